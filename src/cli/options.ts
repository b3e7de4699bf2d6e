/**
 * Every command's options, as one table. `parseArgs` options and `--help` text are
 * both generated from it, so the help cannot drift from what is accepted.
 */
import { parseArgs } from "node:util";
import { ConfigError } from "../core/errors.js";
import { DEFAULTS } from "../core/defaults.js";
import { looksLikeKeyName } from "../core/config.js";

/**
 * A command's parsed options, as parseCommandArgs hands them over: by option name (`base-url`),
 * a string, true for a switch, a string[] for a repeatable option; absent when not given.
 */
export type CliValues = Readonly<Record<string, string | boolean | string[] | undefined>>;

/** What each src/cli/commands/*.ts exports as its default: run the command, return the exit code. */
export type CommandRun = (values: CliValues) => Promise<number>;

export interface OptionDef {
  name: string;
  type: "string" | "boolean";
  arg?: string;
  help: string;
  multiple?: boolean;
  /** Takes a number below 0: `--name -5` is read as `--name=-5` (parseArgs would take "-5" for an option). */
  signed?: boolean;
}

const CONNECTION: OptionDef[] = [
  { name: "config", type: "string", arg: "FILE", help: "config file (JSON; see config.example.json). Env: INVENTORY_CONFIG" },
  { name: "base-url", type: "string", arg: "URL", help: "API base URL, may carry a path prefix; http:// only to loopback. Env: INVENTORY_BASE_URL" },
  { name: "expected-workspace-id", type: "string", arg: "ID", help: "refuse (exit 4) unless the key belongs to this workspace id" },
  { name: "expected-workspace-name", type: "string", arg: "NAME", help: "refuse (exit 4) unless the key belongs to this workspace name" },
  { name: "concurrency", type: "string", arg: "N", help: `most requests in flight at once; fewer when fewer reach the rate (default ${DEFAULTS.concurrency})` },
  {
    name: "max-rps",
    type: "string",
    arg: "N",
    help: "client-side ceiling in requests per second (default: none; adapts to 429s). Your quota's rate, if known, saves the seconds of finding it. Config: rateLimit.requestsPerSecond",
  },
  { name: "log-level", type: "string", arg: "LEVEL", help: "fatal, error, warn, info, debug, trace or silent (default info); logs are JSON lines on stderr" },
];
const DB: OptionDef = { name: "db", type: "string", arg: "FILE", help: `SQLite database file (default ${DEFAULTS.dbPath}). Env: INVENTORY_DB` };
const JSON_OUT: OptionDef = { name: "json", type: "boolean", help: "print the result as JSON on stdout" };
const HELP: OptionDef = { name: "help", type: "boolean", help: "show this help" };

export interface CommandDef {
  name: string;
  usage: string;
  summary: string;
  description: string;
  options: OptionDef[];
}

export const COMMANDS: CommandDef[] = [
  {
    name: "sync",
    usage: "inventory-mirror sync [--full] [options]",
    summary: "mirror the workspace into the database (--full: complete backfill), then exit",
    description:
      "Checks the workspace, walks the locations tree and every list page, and fetches detail and history for every SKU\n" +
      "(with --full) or for the SKUs that need it. Each SKU is written in one transaction; an interrupted run resumes.",
    options: [
      { name: "full", type: "boolean", help: "full backfill: fetch detail and complete history of every SKU" },
      { name: "max-requests", type: "string", arg: "N", help: "request budget for this run; reaching it ends the run as partial (config: sync.maxRequests)" },
      {
        name: "ignore-quota-wall",
        type: "boolean",
        help: "start although the last run stored a quota wall (a Retry-After beyond rateLimit.maxWaitSeconds) still in force; a run that finishes clears it",
      },
      DB,
      ...CONNECTION,
      { name: "no-progress", type: "boolean", help: "no live progress line on a terminal" },
      JSON_OUT,
      HELP,
    ],
  },
  {
    name: "check",
    usage: "inventory-mirror check [options]",
    summary: "call the workspace endpoint and print the workspace id, name and scope",
    description: "Confirms the key works and which workspace it is connected to. Writes nothing.",
    options: [...CONNECTION, JSON_OUT, HELP],
  },
  {
    name: "simulate",
    usage: "inventory-mirror simulate [options]",
    summary: "run the built-in API simulator in the foreground and print its base URL and key",
    description:
      "Serves all five endpoints of the inventory API over a generated, deterministic workspace on 127.0.0.1.\n" +
      "It accepts the key in INVENTORY_API_KEY if set, otherwise a random one it prints. Stop it with Ctrl-C.",
    options: [
      { name: "port", type: "string", arg: "N", help: "port to listen on (default 4010; 0 = any free port)" },
      { name: "host", type: "string", arg: "HOST", help: "address to listen on (default 127.0.0.1)" },
      { name: "prefix", type: "string", arg: "PATH", help: "path prefix before /v1/external (e.g. /api)" },
      { name: "seed", type: "string", arg: "N", help: "random seed; the same seed gives the same workspace (default 42)" },
      { name: "skus", type: "string", arg: "N", help: "number of SKUs (default 200)" },
      { name: "roots", type: "string", arg: "N", help: "root locations (default 2)" },
      { name: "sections", type: "string", arg: "N", help: "sections per root (default 2)" },
      { name: "leaves", type: "string", arg: "N", help: "leaves per section (default 3)" },
      { name: "history", type: "string", arg: "N", help: "mean history rows per SKU (default 12)" },
      { name: "workspace-name", type: "string", arg: "NAME", help: "workspace name (default 'Simulated Workspace')" },
      { name: "quota-rps", type: "string", arg: "N", help: "per-workspace quota in requests/s, answered with 429 + Retry-After (default: none)" },
      { name: "quota-burst", type: "string", arg: "N", help: "quota burst size (default: the quota)" },
      { name: "quota-start-tokens", type: "string", arg: "N", help: "tokens in the bucket when the first request comes (default: full; 0 = just emptied by another client)" },
      {
        name: "quota-other-client-rps",
        type: "string",
        arg: "N",
        help: "another client of the workspace spends the same quota at N requests/s (Poisson arrivals, seeded; it neither retries nor waits out a Retry-After)",
      },
      { name: "quota-window", type: "string", arg: "N/S", help: "fixed-window quota instead: N requests per window of S seconds, e.g. 300/10" },
      { name: "quota-sliding", type: "string", arg: "N/S", help: "sliding-window quota instead: at most N requests in any S seconds (a log of admissions), e.g. 300/10" },
      {
        name: "quota-retry-after",
        type: "string",
        arg: "FORM",
        help: "quota 429s name their wait as seconds (default), seconds-floor (whole seconds cut down: 0 under a second), seconds-round (to the nearest second), date (HTTP-date rounded up), date-floor (HTTP-date cut to its second: up to 1 s early), date-iso (ISO 8601, to the millisecond) or none",
      },
      { name: "preauth-rps", type: "string", arg: "N", help: "a limit before authentication too: a token bucket of N requests/s in front of the key check and the quota (default: none)" },
      { name: "preauth-burst", type: "string", arg: "N", help: "its burst size (default: N)" },
      { name: "preauth-retry-after", type: "string", arg: "FORM", help: "how its 429s name their wait: seconds (default), seconds-floor, seconds-round, date, date-floor, date-iso or none" },
      {
        name: "max-in-flight",
        type: "string",
        arg: "N",
        help: "a limit on concurrency, not rate: at most N requests being answered at once, counted from the quota's decision (after the key check and the quota) to the response's end, latency included; one more is a 429 naming 1 s (default: none)",
      },
      { name: "latency-ms", type: "string", arg: "MS", help: "delay every API response by MS after the quota's decision (default 0)" },
      { name: "latency-jitter-ms", type: "string", arg: "MS", help: "vary that delay uniformly by ± MS, seeded (default 0)" },
      {
        name: "latency-inbound-share",
        type: "string",
        arg: "F",
        help: "spend this share (0-1) of the latency before the quota's decision instead, as a real network's way in; each way jittered apart (default 0)",
      },
      {
        name: "stall-ms",
        type: "string",
        arg: "MS",
        help: "now and then decide nothing for up to MS, then decide every request that arrived meanwhile at once, as a busy server process does (default: never)",
      },
      { name: "stall-every-ms", type: "string", arg: "MS", help: "the mean gap between those stalls, exponential and seeded (default 1000; needs --stall-ms or the quota-stalls profile)" },
      {
        name: "clock-skew-ms",
        type: "string",
        arg: "MS",
        signed: true,
        help: "this server's clock reads MS ahead of the machine's (negative: behind): its Date header and the dates its Retry-After names (default 0)",
      },
      { name: "profile", type: "string", arg: "NAME", multiple: true, help: "behave as another server the API document allows (repeatable; see docs/server-variance.md)" },
      { name: "fault", type: "string", arg: "SPEC", multiple: true, help: "inject a fault, e.g. 429:p=0.05,retry-after=date or 503:every=10 (repeatable; see README)" },
      { name: "churn", type: "string", arg: "PCT", help: "mutate this percentage of SKUs every --churn-interval seconds" },
      { name: "churn-interval", type: "string", arg: "S", help: "seconds between churn rounds (default 60)" },
      HELP,
    ],
  },
  {
    name: "demo",
    usage: "inventory-mirror demo [--db FILE] [--skus N]",
    summary: "start the simulator, run a full sync of it into ./data/demo.db and show example queries (npm start)",
    description: "No key or configuration needed: everything runs on 127.0.0.1.",
    options: [
      { name: "db", type: "string", arg: "FILE", help: "database file (default ./data/demo.db)" },
      { name: "skus", type: "string", arg: "N", help: "SKUs in the simulated workspace (default 500)" },
      { name: "log-level", type: "string", arg: "LEVEL", help: "log level (default warn)" },
      HELP,
    ],
  },
  {
    name: "daemon",
    usage: "inventory-mirror daemon [options]",
    summary: "run as a sidecar: scheduled syncs, /healthz /readyz /metrics, until SIGTERM",
    description:
      "Runs an incremental sync on config schedule.incremental (default every 5 minutes) and a full sync on schedule.full\n" +
      "(default nightly), never two at once (a tick that finds a run in progress is skipped and journaled), and serves\n" +
      "/healthz, /readyz (last success younger than daemon.readyMaxAgeSeconds) and /metrics (Prometheus) on daemon.listen.\n" +
      "Starts with an incremental sync when the database has no recent success. SIGTERM/SIGINT: stops scheduling,\n" +
      "interrupts the run in hand after its current transaction (the next run resumes it), exits 0.\n" +
      "With feed.serve in the config file it also serves GET /changes?since=SEQ, the change feed as a long-poll (NDJSON;\n" +
      'README, "The change feed"); beyond loopback that needs a bearer token from INVENTORY_FEED_TOKEN or INVENTORY_FEED_TOKEN_FILE.\n' +
      "The key comes from INVENTORY_API_KEY or INVENTORY_API_KEY_FILE (read again for every run). Logs: JSON lines on stderr.",
    options: [
      { name: "listen", type: "string", arg: "HOST:PORT", help: "where /healthz, /readyz and /metrics listen (default 127.0.0.1:9464). Env: INVENTORY_DAEMON_LISTEN; config: daemon.listen" },
      DB,
      ...CONNECTION,
      HELP,
    ],
  },
  {
    name: "status",
    usage: "inventory-mirror status [--db FILE] [--runs N] [--json]",
    summary: "show the last runs, the quota backoff state and SKUs whose scan is not reflected (no key, read-only)",
    description:
      "Reads the database only (no key, no request), read-only, so it works while the daemon or a sync is writing.\n" +
      "Shows the last runs with mode, status, duration and counters; whether requests are paused by a 429/503 or waiting\n" +
      "for a quota wall's resume time; and the SKU × locations whose freshness is not clean, longest-standing first.",
    options: [
      DB,
      { name: "config", type: "string", arg: "FILE", help: "config file, for its db setting. Env: INVENTORY_CONFIG" },
      { name: "runs", type: "string", arg: "N", help: "how many of the last runs to show (default 10)" },
      JSON_OUT,
      HELP,
    ],
  },
  {
    name: "stock",
    usage: "inventory-mirror stock --at TIMESTAMP [--location ID] [--sku ID|CODE] [--db FILE] [--json]",
    summary: "stock per SKU and leaf at a past moment, reconstructed from current quantities and history (read-only)",
    description:
      "Starts from each SKU x leaf's current quantity and undoes, newest first, every history row after TIMESTAMP\n" +
      "(a movement by its signed amount, a SET back to observed - delta). Where freshness is not clean, the rows after\n" +
      "the last replay are first taken as not yet reflected (marked *). Rows at exactly TIMESTAMP count as done.\n" +
      "Only current SKUs; leaves with 0 are not listed. Reads the database only (no key, no request), so it works while\n" +
      "a sync is writing. Exit 0, or 2 for a bad timestamp, an unknown location or SKU, or a database to upgrade first.",
    options: [
      { name: "at", type: "string", arg: "TIMESTAMP", help: "ISO 8601, e.g. 2026-03-01T00:00:00Z (no zone = UTC; a date alone = its 00:00 UTC)" },
      { name: "location", type: "string", arg: "ID", help: "a root, section or leaf id: quantities summed per SKU over the leaves under it" },
      { name: "sku", type: "string", arg: "ID|CODE", help: "only this SKU, by its id or its code (exit 2 when none matches)" },
      DB,
      { name: "config", type: "string", arg: "FILE", help: "config file, for its db setting. Env: INVENTORY_CONFIG" },
      JSON_OUT,
      HELP,
    ],
  },
  {
    name: "reconcile",
    usage: "inventory-mirror reconcile [--sku ID|CODE] [--db FILE] [--json]",
    summary: "check that mirrored history, leaf quantities and list totals agree; exit 1 with mismatches (read-only)",
    description:
      "For each current SKU x leaf, replays the mirrored history (the latest SET's observed count plus later movements)\n" +
      "and compares it with the mirrored quantity; checks that the leaf quantities add up to the list's root quantities\n" +
      "and totalQuantity. Every mismatch is reported with SKU, location, expected and found values, and whether a\n" +
      "freshness other than clean explains it (those do not fail the check). A wrong leaf row is reported once, with the\n" +
      "totals it throws off. Exit 0 when consistent, 1 with unexplained mismatches, 2 on a usage or database error.",
    options: [
      { name: "sku", type: "string", arg: "ID|CODE", help: "check only this SKU, by its id or its code (exit 2 when none matches)" },
      DB,
      { name: "config", type: "string", arg: "FILE", help: "config file, for its db setting. Env: INVENTORY_CONFIG" },
      JSON_OUT,
      HELP,
    ],
  },
  {
    name: "changes",
    usage: "inventory-mirror changes [--since SEQ] [--follow] [--json] [--db FILE]",
    summary: "print the change feed: what each committed unit of work changed, in commit order (no key, read-only)",
    description:
      "Every unit of work a sync commits (the locations tree, a list page, one SKU's detail and history, the end of a walk)\n" +
      "appends what it changed to the database's change feed in the same transaction: SKU and location fields, leaf\n" +
      "quantities, new and removed history rows, deletions and revivals, each with a sequence number (seq). This prints\n" +
      "the changes after --since, oldest first, one per line (--json: one JSON object per line, NDJSON; shapes in\n" +
      "docs/schema.md). Resume from the last seq you handled: nothing is skipped or reordered. With --follow it keeps\n" +
      `printing as new runs commit (it looks every ${DEFAULTS.feedPollIntervalMs} ms) until SIGINT/SIGTERM. Reads the database only, so it works\n` +
      "while the daemon or a sync writes. Exit 0; 1 when retention already pruned changes after --since; 2 on a usage error.",
    options: [
      { name: "since", type: "string", arg: "SEQ", help: "print the changes after this sequence number (default 0: all that are kept)" },
      { name: "follow", type: "boolean", help: "keep printing new changes as runs commit them, until interrupted" },
      JSON_OUT,
      DB,
      { name: "config", type: "string", arg: "FILE", help: "config file, for its db setting. Env: INVENTORY_CONFIG" },
      HELP,
    ],
  },
  {
    name: "publish",
    usage: "inventory-mirror publish --postgres [--schema NAME] [--bulk] [--batch-size N] [--db FILE] [--json]",
    summary: "copy the mirror's tables and BI views into PostgreSQL: in bulk, then by the change feed (no API key)",
    description:
      "The first publish loads every contract table of the mirror (docs/schema.md) into the workspace's schema of a\n" +
      "PostgreSQL database with COPY, in one transaction that also records which point of the mirror and which seq of\n" +
      "the change feed it loaded (inventory_mirror.workspaces), and rebuilds the cross-workspace views. Every later\n" +
      "publish applies the feed's changes after that seq, in batches, each with its new seq in one transaction: a killed\n" +
      "publish resumes with nothing lost or applied twice. It loads in bulk again when the schema is new or migrated, or\n" +
      "the feed was pruned past PostgreSQL's seq. The publisher is a registered feed consumer: retention keeps what it has\n" +
      "not confirmed. The connection string comes only from INVENTORY_PG_URL or INVENTORY_PG_URL_FILE.\n" +
      "Reads the mirror read-only (no key, no request) but for its consumer's row, so it works while a sync is writing.",
    options: [
      { name: "postgres", type: "boolean", help: "publish into PostgreSQL (INVENTORY_PG_URL or INVENTORY_PG_URL_FILE)" },
      { name: "schema", type: "string", arg: "NAME", help: "the workspace's schema (default: config publish.postgres.schema, else ws_<workspace id>)" },
      { name: "bulk", type: "boolean", help: "load every table in bulk even when the change feed could be followed" },
      {
        name: "batch-size",
        type: "string",
        arg: "N",
        help: `most changes of the feed per PostgreSQL transaction (default: config publish.postgres.batchChanges, ${DEFAULTS.publishBatchChanges})`,
      },
      DB,
      { name: "config", type: "string", arg: "FILE", help: "config file, for its db and publish settings. Env: INVENTORY_CONFIG" },
      { name: "log-level", type: "string", arg: "LEVEL", help: "fatal, error, warn, info, debug, trace or silent (default info); logs are JSON lines on stderr" },
      JSON_OUT,
      HELP,
    ],
  },
];

export function findCommand(name: string): CommandDef | undefined {
  return COMMANDS.find((c) => c.name === name);
}

export function parseCommandArgs(cmd: CommandDef, argv: string[]): CliValues {
  // A flag people try for the key (--key, --api-key, --token, --access-token, --secret, --bearer,
  // --key-file... any spelling, see looksLikeKeyName) is refused with where the key goes, and
  // before parseArgs, whose "unknown option" would not say it.
  for (const a of argv) {
    const flag = a.replace(/^--?/, "").split("=")[0]!;
    if (a.startsWith("-") && looksLikeKeyName(flag)) {
      throw new ConfigError(`--${flag} is not accepted: the developer key is read only from the environment. ` + `Set INVENTORY_API_KEY, or INVENTORY_API_KEY_FILE to a file that holds it.`);
    }
  }
  argv = joinSignedValues(cmd, argv);
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean }> = {};
  for (const o of cmd.options) options[o.name] = o.multiple ? { type: o.type, multiple: true } : { type: o.type };
  // -h works after a command as it does before one.
  if (options.help) (options.help as { short?: string }).short = "h";
  try {
    const { values, positionals } = parseArgs({ args: argv, options, strict: true, allowPositionals: true });
    if (positionals.length) throw new ConfigError(`unexpected argument "${positionals[0]}" for '${cmd.name}'. See 'inventory-mirror ${cmd.name} --help'.`);
    return values as CliValues;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const message = (err as Error).message;
    // "--max-requests -5": Node reads "-5" as an option and calls the argument ambiguous.
    const ambiguous = /^Option '(--[\w-]+)' argument is ambiguous/.exec(message);
    if (ambiguous) {
      const at = argv.indexOf(ambiguous[1]!);
      const value = at >= 0 ? argv[at + 1] : undefined;
      throw new ConfigError(`${ambiguous[1]}: expected a positive number, got "${value ?? ""}". See 'inventory-mirror ${cmd.name} --help'.`);
    }
    throw new ConfigError(`${message.replace(/\. To specify.*$/s, "")}. See 'inventory-mirror ${cmd.name} --help'.`);
  }
}

/** `--name -5` as `--name=-5` for the options that take a number below 0 (OptionDef.signed). */
function joinSignedValues(cmd: CommandDef, argv: string[]): string[] {
  const signed = new Set(cmd.options.filter((o) => o.signed).map((o) => `--${o.name}`));
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const next = argv[i + 1];
    if (signed.has(argv[i]!) && next !== undefined && /^-\d/.test(next)) {
      out.push(`${argv[i]}=${next}`);
      i++;
    } else out.push(argv[i]!);
  }
  return out;
}

export function commandHelp(cmd: CommandDef): string {
  const width = Math.max(...cmd.options.map((o) => optLabel(o).length)) + 2;
  const lines = [`Usage: ${cmd.usage}`, "", cmd.description, "", "Options:", ...cmd.options.map((o) => `  ${optLabel(o).padEnd(width)}${o.help}`)];
  if (cmd.name === "sync" || cmd.name === "check") lines.push("", ENV_HELP, "", EXIT_HELP);
  return lines.join("\n");
}

function optLabel(o: OptionDef): string {
  return `--${o.name}${o.arg ? ` ${o.arg}` : ""}`;
}

const ENV_HELP = [
  "Environment:",
  "  INVENTORY_API_KEY        the developer key (never accepted as a flag or in the config file)",
  "  INVENTORY_API_KEY_FILE   or: a file holding the key (e.g. a mounted secret; should be mode 600)",
  "  INVENTORY_BASE_URL, INVENTORY_DB, INVENTORY_CONFIG   as --base-url, --db, --config",
  "  INVENTORY_DAEMON_LISTEN  as daemon --listen (host:port of /healthz, /readyz, /metrics)",
  "Precedence: flags > environment > config file > defaults.",
].join("\n");

const EXIT_HELP = [
  "Exit codes:",
  "  0  success (also a run that stopped at its own --max-requests budget; its remaining work stays queued)",
  "  1  sync failed, partial or interrupted (what was committed stays consistent; the next run resumes);",
  "     another process holds the database's writer lock; reconcile found mismatches",
  "  2  usage or configuration error (nothing was requested)",
  "  3  the key was refused (HTTP 401)",
  "  4  the key's workspace is not the expected one, or the database belongs to another workspace (nothing written)",
].join("\n");

export function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return [
    "Usage: inventory-mirror <command> [options]",
    "",
    "Mirror one workspace of the read-only inventory API into a local SQLite file.",
    "",
    "Commands:",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    "",
    "Run 'inventory-mirror <command> --help' for a command's options.",
    "",
    ENV_HELP,
    "",
    EXIT_HELP,
  ].join("\n");
}
