/**
 * The developer key never leaves the Authorization header.
 *
 * Every command of the CLI (the COMMANDS table: a command without a case here fails the
 * first test) runs at --log-level debug through every scenario: success, 401, 429 with
 * Retry-After, 503 until retries run out, response timeouts, every malformed-body fault
 * the simulator has, the key given through INVENTORY_API_KEY_FILE, a hostile server that
 * echoes the Authorization header back into error bodies, headers and field names, and the
 * simulator echoing it into the names of successful answers (hostile-text.ts).
 * After each run the key's bytes (so also "Bearer <key>") must be in no line of stdout or
 * stderr, in no file the run wrote (database, -wal, -shm, .lock, anything in its working
 * directory) and in no column of any row of any table of the database.
 *
 * Then, in-process: the logger's redaction for every shape a header or the key can take in
 * a logged object, and the client's refusal to follow redirects with the key.
 *
 * Adding a command: add an entry to CASES. `run` gets the scenario's server, environment
 * and config file; use `ctx.cli` for a command that exits, `ctx.cliUntil` for a long-running
 * one (it is stopped with SIGTERM once its output matches), and `ctx.prepareDatabase()` when
 * the command reads a mirror that a sync must have written first. A scenario that cannot
 * apply to the command goes in `notApplicable` with the reason.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { randomBytes, randomUUID } from "node:crypto";
import { COMMANDS } from "../../src/cli/options.js";
import { FAULT_KINDS, startSimulator, type FaultKind, type FaultRule, type RunningSimulator, type SimulatorOptions } from "../../src/simulator/index.js";
import type { EndpointName } from "../../src/core/defaults.js";
import { createLogger } from "../../src/core/logger.js";
import { parseScrubbed, redactSecrets, Secret } from "../../src/core/secret.js";
import { ApiClient } from "../../src/client/api-client.js";
import { poolTransport } from "../../src/client/transport.js";
import { RequestScheduler } from "../../src/scheduler/scheduler.js";
import { ApiError } from "../../src/core/errors.js";
import { runCli, spawnCli, type CliResult } from "../helpers/cli.js";
import { startPostgres, type RunningPostgres } from "../helpers/postgres.js";
import { formatLeaks, leaksInDatabases, leaksInFiles, leaksInText } from "./leak-helpers.js";

/** Distinctive: a fixed prefix and 40 random hex characters, new every run. */
const KEY_SECRET_PART = randomBytes(20).toString("hex");
const KEY = `imk_leaktest_${KEY_SECRET_PART}`;
/** What a server that does not know our key accepts instead (the 401 scenario). */
const OTHER_KEY = `imk_otherkey_${randomBytes(20).toString("hex")}`;
/**
 * The key, "Bearer <key>", and its first and last 16 random characters: a text clipped
 * in the middle of the key (a field name cut to 40 characters, say) leaks part of it,
 * and that is caught too.
 */
const NEEDLES = [KEY, `Bearer ${KEY}`, KEY_SECRET_PART.slice(0, 16), KEY_SECRET_PART.slice(-16)];
/** The demo's own generated simulator key has this shape; it must not be shown either. */
const DEMO_KEY_SHAPE = /sim_[0-9a-f]{32}/;

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "im-leak-"));
});

/** The PostgreSQL server of the publish case, started on its first use (test/helpers/postgres.ts). */
let pgServer: Promise<RunningPostgres> | null = null;
let publishRuns = 0;
const postgres = () => (pgServer ??= startPostgres());
afterAll(async () => {
  if (pgServer) await (await pgServer).stop();
});

/** Every row of every table in every schema the publish wrote, as text. */
async function postgresRows(url: string): Promise<string> {
  const { default: pg } = await import("pg");
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const tables = await c.query<{ s: string; t: string }>("SELECT table_schema AS s, table_name AS t FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')");
    const out: string[] = [];
    for (const { s, t } of tables.rows) out.push(JSON.stringify((await c.query(`SELECT * FROM ${pg.escapeIdentifier(s)}.${pg.escapeIdentifier(t)}`)).rows));
    return out.join("\n");
  } finally {
    await c.end();
  }
}
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Scenarios

/** Where a command's requests should be made to fail, and how densely. */
interface FaultTarget {
  endpoints: EndpointName[];
  /** Fire on every Nth matching request (undefined: every one). */
  every?: number;
}

interface Scenario {
  name: string;
  faults(target: FaultTarget): FaultRule[];
  /** The server knows another key: every request is refused with 401. */
  refuseKey?: boolean;
  /** The key comes from INVENTORY_API_KEY_FILE (mode 0644: the warning path too) instead of INVENTORY_API_KEY. */
  keyFile?: boolean;
  /** The echo server below instead of the simulator. */
  hostile?: boolean;
  /** Config file keys on top of FAST_CONFIG. */
  config?: Record<string, unknown>;
  sim?: Partial<SimulatorOptions>;
  /** The fault kind that must have fired, to prove the scenario exercised its path. */
  fires?: FaultKind;
}

/** Small waits and retries so failure paths end fast; caps small enough for the oversize fault. */
const FAST_CONFIG = {
  retry: { maxRetries: 1, backoffBaseMs: 10, backoffCapMs: 20, minRetryAfterMs: 10 },
  rateLimit: { maxWaitSeconds: 5 },
  http: { connectTimeoutMs: 2_000, responseTimeoutMs: 3_000, maxResponseBytes: 256 * 1024 },
};

const rule = (kind: FaultKind, t: FaultTarget, extra: Partial<FaultRule> = {}): FaultRule => ({
  kind,
  endpoint: t.endpoints,
  ...(t.every ? { every: t.every } : {}),
  ...extra,
});

/** Every other fault the simulator can inject (a kind added there becomes a scenario here by itself). */
const BODY_FAULTS = FAULT_KINDS.filter((k) => k !== "429" && k !== "503" && k !== "slow");

const SCENARIOS: Scenario[] = [
  { name: "success", faults: () => [] },
  { name: "401 (the key is refused)", faults: () => [], refuseKey: true },
  { name: "429 with Retry-After", faults: (t) => [rule("429", t, { retryAfter: "seconds:1", count: 1 })], fires: "429" },
  { name: "503 until retries run out", faults: (t) => [rule("503", { endpoints: t.endpoints })], fires: "503" },
  {
    name: "response timeouts",
    faults: (t) => [rule("slow", { endpoints: t.endpoints }, { delayMs: 1_500 })],
    config: { http: { ...FAST_CONFIG.http, responseTimeoutMs: 300 } },
    fires: "slow",
  },
  ...BODY_FAULTS.map(
    (kind): Scenario => ({
      name: kind === "reset" ? "connection reset mid-request" : `malformed response: ${kind}`,
      faults: (t) => [rule(kind, t, kind === "oversize" ? { bytes: 512 * 1024 } : {})],
      // reject-cursor only fires on a request that carries a cursor: make history page.
      ...(kind === "reject-cursor" ? { sim: { historyDepth: 160 } } : {}),
      fires: kind,
    }),
  ),
  { name: "key from INVENTORY_API_KEY_FILE (group-readable)", faults: () => [], keyFile: true },
  { name: "key file, refused (401)", faults: () => [], keyFile: true, refuseKey: true },
  { name: "hostile server echoing the Authorization header", faults: () => [], hostile: true },
  // Successful answers whose names carry the Authorization header (and terminal control sequences): scrubbed before they are stored or printed.
  { name: "simulator echoing the Authorization header into names", faults: () => [], sim: { hostileText: { echoAuthorization: true, controlChars: true } } },
  // ...with every character of every string written as a \uXXXX escape: the key's bytes are in no form in the body, yet in the values it parses to.
  { name: "simulator echoing the Authorization header, every character \\u-escaped", faults: () => [], sim: { hostileText: { echoAuthorization: true, escapeStrings: true } } },
];

// ---------------------------------------------------------------------------------------------
// Commands

interface RunContext {
  scenario: Scenario;
  /** The run's working directory: everything the run writes must land here, and all of it is scanned. */
  dir: string;
  /** Base URL of this scenario's server. */
  baseUrl: string;
  /** INVENTORY_* for this scenario: the key (or key file), base URL, database in `dir`. */
  env: Record<string, string>;
  /** The config file for this scenario (outside `dir`). */
  configPath: string;
  /** The mirror database path (in `dir`). */
  db: string;
  /** The simulator, when the scenario uses one. */
  sim: RunningSimulator | null;
  /** The key the server accepts. */
  serverKey: string;
  cli(args: string[], extraEnv?: Record<string, string>): Promise<CliResult>;
  /** Start a long-running command, stop it with SIGTERM once its output matches `until` (or after `timeoutMs`). */
  cliUntil(
    args: string[],
    until: RegExp,
    opts?: { timeoutMs?: number; extraEnv?: Record<string, string>; whileRunning?: (out: { stdout: string; stderr: string }) => Promise<void> },
  ): Promise<CliResult>;
  /**
   * For a command that reads the mirror: a `sync --full` into `db` first, under this scenario
   * (its key, faults and server), so the database holds what this failure path records.
   * Its output is scanned too.
   */
  prepareDatabase(): Promise<CliResult>;
  /** Something else the command exposed (an HTTP endpoint's body, say), to be scanned too. */
  scanAlso(where: string, text: string): void;
  /** For a command that runs its own server (simulate): the fault kinds that server says fired. */
  reportFired(kinds: string[]): void;
}

interface CommandCase {
  /** Where failures should be injected for this command. */
  target: FaultTarget;
  /** The run must leave a database to scan (except when the key is refused). */
  writesDatabase?: boolean;
  /** It (or the sync it prepares with) reads the key from the environment: a group-readable key file draws the warning. */
  readsKey?: boolean;
  /** Scenario name -> why it does not apply to this command. */
  notApplicable?: Record<string, string>;
  /** When set, only these scenarios apply; `why` says why the others do not. */
  only?: { names: string[]; why: string };
  run(ctx: RunContext): Promise<CliResult>;
}

const DEBUG = ["--log-level", "debug"];

const CASES: Record<string, CommandCase> = {
  sync: {
    // Detail and history: the run gets past the workspace check, creates the database and
    // records the failures (journal, sku_sync.last_error, sync_runs.error) where the scan looks.
    target: { endpoints: ["detail", "history"], every: 2 },
    writesDatabase: true,
    readsKey: true,
    run: (ctx) => ctx.cli(["sync", "--full", "--no-progress", "--config", ctx.configPath, ...DEBUG]),
  },
  status: {
    // status takes no key and sends no request: the faults hit the sync that writes the database
    // it then reads, so it prints the runs, errors and journal entries of each failure path. It
    // could only leak what the database holds (scanned too) or what it reads itself, so one run
    // (--json: every field) per scenario is enough. The same goes for stock and reconcile.
    target: { endpoints: ["detail", "history"], every: 2 },
    writesDatabase: true,
    readsKey: true,
    run: async (ctx) => {
      await ctx.prepareDatabase();
      return ctx.cli(["status", "--json", "--runs", "50", "--config", ctx.configPath]);
    },
  },
  stock: {
    // Reads the mirror only: the faults hit the sync that wrote it (shared with status and reconcile).
    target: { endpoints: ["detail", "history"], every: 2 },
    writesDatabase: true,
    readsKey: true,
    run: async (ctx) => {
      await ctx.prepareDatabase();
      return ctx.cli(["stock", "--at", "2000-01-01", "--json", "--config", ctx.configPath]);
    },
  },
  reconcile: {
    target: { endpoints: ["detail", "history"], every: 2 },
    writesDatabase: true,
    readsKey: true,
    run: async (ctx) => {
      await ctx.prepareDatabase();
      return ctx.cli(["reconcile", "--json", "--config", ctx.configPath]);
    },
  },
  changes: {
    // Reads the change feed only, which holds what the sync stored (names, notes, history rows).
    target: { endpoints: ["detail", "history"], every: 2 },
    writesDatabase: true,
    readsKey: true,
    run: async (ctx) => {
      await ctx.prepareDatabase();
      return ctx.cli(["changes", "--json", "--config", ctx.configPath]);
    },
  },
  daemon: {
    target: { endpoints: ["detail", "history"], every: 2 },
    writesDatabase: true,
    readsKey: true,
    // Publishing into PostgreSQL after its runs (publish.postgres.enabled, a database per run).
    // Until its first run has ended and been published (or the run failed before it had a
    // result: nothing to publish); then /healthz, /readyz and /metrics are read (and scanned),
    // it gets SIGTERM, and every row it published is scanned too.
    run: async (ctx) => {
      const pgUrl = await (await postgres()).createDatabase(`leak_${++publishRuns}`);
      const config = ctx.configPath.replace(/\.json$/, "-publish.json");
      writeFileSync(config, JSON.stringify({ ...(JSON.parse(readFileSync(ctx.configPath, "utf8")) as object), publish: { postgres: { enabled: true } } }));
      const result = await ctx.cliUntil(
        ["daemon", "--listen", "127.0.0.1:0", "--config", config, ...DEBUG],
        /published (into|\d+ changes into) PostgreSQL|publish into PostgreSQL failed|run failed: |tick skipped/,
        {
          extraEnv: { INVENTORY_PG_URL: pgUrl },
          whileRunning: async (out) => {
            const url = /daemon listening on (http:\/\/[^\s"]+)/.exec(out.stderr)?.[1];
            if (!url) throw new Error(`the daemon did not log where it listens:\n${out.stderr.slice(0, 2000)}`);
            for (const path of ["/healthz", "/readyz", "/metrics"]) {
              const res = await fetch(new URL(path, url), { signal: AbortSignal.timeout(3_000) });
              ctx.scanAlso(`daemon ${path}`, await res.text());
            }
          },
        },
      );
      ctx.scanAlso("PostgreSQL rows the daemon published", await postgresRows(pgUrl));
      const { password } = await postgres();
      if (`${result.stdout}${result.stderr}`.includes(password)) throw new Error("the daemon showed the PostgreSQL connection string's password");
      return result;
    },
  },
  check: {
    target: { endpoints: ["workspace"] },
    readsKey: true,
    notApplicable: { "malformed response: reject-cursor": "check makes one request, which never carries a cursor" },
    run: (ctx) => ctx.cli(["check", "--json", "--config", ctx.configPath, ...DEBUG]),
  },
  simulate: {
    target: { endpoints: ["detail", "history"] },
    notApplicable: { "hostile server echoing the Authorization header": "simulate is the server: there is no other server to be hostile" },
    // The simulator is started with the server key and faults as flags; a client then sends KEY
    // to every endpoint (in the 401 scenarios the simulator knows another key and refuses it).
    run: (ctx) => runSimulateCommand(ctx),
  },
  publish: {
    // Reads the mirror only (no key, no request): the faults hit the sync that wrote it. Published
    // into a real PostgreSQL (a database per run), whose every row is scanned too.
    target: { endpoints: ["detail", "history"], every: 2 },
    writesDatabase: true,
    readsKey: true,
    run: async (ctx) => {
      const prepared = await ctx.prepareDatabase();
      const url = await (await postgres()).createDatabase(`leak_${++publishRuns}`);
      const result = await ctx.cli(["publish", "--postgres", "--json", "--config", ctx.configPath, ...DEBUG], { INVENTORY_PG_URL: url });
      // Whatever the sync went through, a mirror it left is published (the scan below reads real rows).
      if (prepared.code !== 3 && result.code !== 0) throw new Error(`publish exited ${result.code}: ${result.stderr.slice(0, 2000)}`);
      ctx.scanAlso("PostgreSQL rows", await postgresRows(url));
      return result;
    },
  },
  demo: {
    target: { endpoints: [] },
    only: {
      names: ["success"],
      why: "demo takes no key, config, base URL or faults: it starts its own simulator with a generated key and ignores the environment",
    },
    run: (ctx) => ctx.cli(["demo", "--db", join(ctx.dir, "demo.db"), "--skus", "5", ...DEBUG]),
  },
};

it("every command in the COMMANDS table has a key-leak case (add one to CASES for a new command)", () => {
  const missing = COMMANDS.map((c) => c.name).filter((n) => !(n in CASES));
  expect(missing, `commands without a key-leak case: ${missing.join(", ")}`).toEqual([]);
  const unknown = Object.keys(CASES).filter((n) => !COMMANDS.some((c) => c.name === n));
  expect(unknown, `CASES for commands that no longer exist: ${unknown.join(", ")}`).toEqual([]);
  for (const [name, c] of Object.entries(CASES)) {
    for (const s of [...Object.keys(c.notApplicable ?? {}), ...(c.only?.names ?? [])]) {
      expect(
        SCENARIOS.map((x) => x.name),
        `${name}: scenario "${s}" does not exist`,
      ).toContain(s);
    }
  }
});

for (const command of COMMANDS) {
  const c = CASES[command.name];
  if (!c) continue;
  // Concurrent: most of a run is waiting (process start, retries, timeouts), not computing.
  describe.concurrent(`${command.name}: the key appears in no output, file or database row`, () => {
    for (const scenario of SCENARIOS) {
      const why = c.only && !c.only.names.includes(scenario.name) ? c.only.why : c.notApplicable?.[scenario.name];
      if (why) {
        it.skip(`${scenario.name} (not applicable: ${why})`, () => {});
        continue;
      }
      it(scenario.name, async ({ expect }) => {
        const { result, ctx, firedKinds, extra } = await runScenario(command.name, c, scenario);
        const diag = `exit ${result.code}\nstdout:\n${result.stdout.slice(0, 2000)}\nstderr:\n${result.stderr.slice(0, 4000)}`;

        // The run ended on its own (no crash, no stack trace) and really went down its path.
        expect(result.signal === null || command.name === "simulate", diag).toBe(true);
        expect(result.stderr, diag).not.toMatch(/unexpected error|\n\s+at .+:\d+:\d+\)?\n/);
        if (scenario.fires) expect(firedKinds, `fault ${scenario.fires} never fired\n${diag}`).toContain(scenario.fires);
        if (command.name === "sync" || command.name === "check") {
          if (scenario.name === "success" || scenario.name.startsWith("key from")) expect(result.code, diag).toBe(0);
          if (scenario.refuseKey) {
            expect(result.code, diag).toBe(3);
            expect(result.stderr).toMatch(/developer key was refused/);
          }
        }
        if (scenario.keyFile && c.readsKey) expect([result.stderr, ...extra.map((e) => e.text)].join("\n")).toMatch(/readable by group or others/);

        const needles = command.name === "simulate" ? NEEDLES : [...NEEDLES, DEMO_KEY_SHAPE];
        const leaks = [
          ...leaksInText("stdout", result.stdout, needles),
          ...leaksInText("stderr", result.stderr, needles),
          ...extra.flatMap((e) => leaksInText(e.where, e.text, needles)),
          ...leaksInFiles(ctx.dir, needles),
        ];
        const dbScan = leaksInDatabases(ctx.dir, needles);
        leaks.push(...dbScan.leaks);
        expect(leaks, `the key leaked:\n${formatLeaks(leaks)}`).toEqual([]);
        if (c.writesDatabase && !scenario.refuseKey) expect(dbScan.rowsScanned, "the run wrote no database to scan").toBeGreaterThan(0);
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Running one (command, scenario)

let runSeq = 0;
/** Scenario name -> the mirror a sync wrote under it (for the commands that only read one). */
const preparedMirrors = new Map<string, Promise<{ dir: string; result: CliResult; fired: string[] }>>();

async function runScenario(commandName: string, c: CommandCase, scenario: Scenario) {
  const base = join(root, `${commandName}-${++runSeq}`);
  const dir = join(base, "run");
  const inputs = join(base, "inputs");
  mkdirSync(dir, { recursive: true });
  mkdirSync(inputs, { recursive: true });

  const serverKey = scenario.refuseKey ? OTHER_KEY : KEY;
  const faults = scenario.faults(c.target);
  let sim: RunningSimulator | null = null;
  let hostile: HostileServer | null = null;
  let baseUrl: string;
  if (scenario.hostile) {
    hostile = await startHostileServer();
    baseUrl = hostile.baseUrl;
  } else {
    sim = await startSimulator({ seed: 5, skus: 4, roots: 1, sectionsPerRoot: 1, leavesPerSection: 2, historyDepth: 4, apiKey: serverKey, faults, ...scenario.sim });
    baseUrl = sim.baseUrl;
  }

  const configPath = join(inputs, "config.json");
  writeFileSync(configPath, JSON.stringify({ ...FAST_CONFIG, ...scenario.config }));
  const db = join(dir, "mirror.db");
  const env: Record<string, string> = { INVENTORY_BASE_URL: baseUrl, INVENTORY_DB: db };
  if (scenario.keyFile) {
    const keyFile = join(inputs, "key");
    writeFileSync(keyFile, `${KEY}\n`);
    chmodSync(keyFile, 0o644);
    env.INVENTORY_API_KEY_FILE = keyFile;
  } else {
    env.INVENTORY_API_KEY = KEY;
  }

  const reported: string[] = [];
  const extra: Array<{ where: string; text: string }> = [];
  const ctx: RunContext = {
    reportFired: (kinds) => reported.push(...kinds),
    scenario,
    dir,
    baseUrl,
    env,
    configPath,
    db,
    sim,
    serverKey,
    cli: (args, extraEnv = {}) => runCli(args, { env: { ...env, ...extraEnv }, cwd: dir, timeoutMs: 30_000 }),
    cliUntil: (args, until, opts = {}) => runUntil(args, { ...env, ...opts.extraEnv }, dir, until, opts.timeoutMs ?? 20_000, opts.whileRunning),
    prepareDatabase: async () => {
      // One sync per scenario, shared by every command that reads the mirror: copied into this run's directory.
      let prepared = preparedMirrors.get(scenario.name);
      if (!prepared) {
        prepared = (async () => {
          const r = await runCli(["sync", "--full", "--no-progress", "--config", configPath, ...DEBUG], { env, cwd: dir, timeoutMs: 30_000 });
          const copy = join(root, `prepared-${++runSeq}`);
          cpSync(dir, copy, { recursive: true });
          const fired = sim
            ? Object.entries(sim.stats().faultsFired)
                .filter(([, n]) => (n ?? 0) > 0)
                .map(([k]) => k)
            : [];
          return { dir: copy, result: r, fired };
        })();
        preparedMirrors.set(scenario.name, prepared);
      } else {
        cpSync((await prepared).dir, dir, { recursive: true });
      }
      const p = await prepared;
      extra.push({ where: "the preparing sync's stdout", text: p.result.stdout }, { where: "the preparing sync's stderr", text: p.result.stderr });
      reported.push(...p.fired);
      return p.result;
    },
    scanAlso: (where, text) => extra.push({ where, text }),
  };
  try {
    const result = await c.run(ctx);
    if (sim)
      reported.push(
        ...Object.entries(sim.stats().faultsFired)
          .filter(([, n]) => (n ?? 0) > 0)
          .map(([k]) => k),
      );
    return { result, ctx, firedKinds: reported, extra };
  } finally {
    await sim?.close();
    await hostile?.close();
  }
}

/** Spawn a long-running command; SIGTERM it once stdout+stderr match `until` (or at the timeout). */
function runUntil(
  args: string[],
  env: Record<string, string | undefined>,
  cwd: string,
  until: RegExp,
  timeoutMs: number,
  whileRunning?: (out: { stdout: string; stderr: string }) => Promise<void>,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, { env, cwd });
    const out = { stdout: "", stderr: "" };
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      child.kill("SIGTERM");
    };
    const check = () => {
      if (stopping || !until.test(out.stdout + out.stderr)) return;
      if (!whileRunning) return stop();
      stopping = true; // no second trigger while the callback runs
      whileRunning(out).then(
        () => child.kill("SIGTERM"),
        (err: unknown) => {
          child.kill("SIGTERM");
          reject(err);
        },
      );
    };
    child.stdout!.on("data", (d) => {
      out.stdout += d;
      check();
    });
    child.stderr!.on("data", (d) => {
      out.stderr += d;
      check();
    });
    const timer = setTimeout(stop, timeoutMs);
    const killer = setTimeout(() => child.kill("SIGKILL"), timeoutMs + 10_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      clearTimeout(killer);
      resolve({ code, signal, ...out });
    });
  });
}

/** A fault rule as a --fault spec for the simulate command. */
function toSpec(r: FaultRule): string {
  const parts: string[] = [];
  if (r.endpoint) parts.push(`endpoint=${([] as string[]).concat(r.endpoint).join("|")}`);
  if (r.every !== undefined) parts.push(`every=${r.every}`);
  if (r.count !== undefined) parts.push(`count=${r.count}`);
  if (r.delayMs !== undefined) parts.push(`delay=${r.delayMs}`);
  if (r.bytes !== undefined) parts.push(`bytes=${r.bytes}`);
  if (r.retryAfter !== undefined) parts.push(`retry-after=${r.retryAfter}`);
  return parts.length ? `${r.kind}:${parts.join(",")}` : r.kind;
}

/**
 * `simulate` in the foreground, with this scenario's key and faults as flags; then a client
 * sends KEY to all five endpoints (and the admin stats endpoint), and the simulator is stopped.
 */
async function runSimulateCommand(ctx: RunContext): Promise<CliResult> {
  const faults = ctx.scenario.faults(CASES.simulate!.target);
  const env: Record<string, string | undefined> = { ...ctx.env, INVENTORY_API_KEY: ctx.scenario.keyFile ? undefined : ctx.serverKey };
  const args = ["simulate", "--port", "0", "--skus", "3", "--history", "3", ...faults.flatMap((f) => ["--fault", toSpec(f)])];
  return runUntil(args, env, ctx.dir, /base URL\s+(http:\S+)/, 20_000, async (out) => {
    const base = /base URL\s+(http:\S+)/.exec(out.stdout)![1]!;
    const get = async (path: string, auth: string | null = `Bearer ${KEY}`): Promise<unknown> => {
      try {
        // Short: under the slow fault the answer does not matter, only what the simulator prints.
        const res = await fetch(base + path, { headers: auth ? { authorization: auth } : {}, signal: AbortSignal.timeout(600) });
        const text = await res.text();
        try {
          return JSON.parse(text);
        } catch {
          return null;
        }
      } catch {
        return null; // reset, timeout: the point is what the simulator prints, not the answer
      }
    };
    await get("/v1/external/workspace");
    await get("/v1/external/locations");
    const list = (await get("/v1/external/inventory-status?limit=2")) as { items?: Array<{ id?: string }> } | null;
    const sku = list?.items?.[0]?.id ?? randomUUID();
    await get(`/v1/external/inventory-status/${sku}`);
    await get(`/v1/external/inventory-status/${sku}/history?limit=100`);
    await get(`/v1/external/inventory-status/${sku}/history?limit=1&cursor=not-a-cursor`);
    await get("/v1/external/workspace", null);
    await get("/v1/external/workspace", `Bearer ${KEY}x`);
    const stats = (await get("/_sim/stats", `Bearer ${ctx.serverKey}`)) as { faultsFired?: Record<string, number> } | null;
    ctx.reportFired(
      Object.entries(stats?.faultsFired ?? {})
        .filter(([, n]) => n > 0)
        .map(([k]) => k),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// A hostile server: it echoes the Authorization header it receives into every place a
// client might copy text from: error codes and messages, Retry-After, the names of fields
// that fail validation, an HTML error page. A client that trusts server text leaks the key.

interface HostileServer {
  baseUrl: string;
  close(): Promise<void>;
}

async function startHostileServer(): Promise<HostileServer> {
  const skus: string[] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  const seen = new Map<string, number>();
  const once = (key: string) => {
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    return n === 1;
  };
  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const auth = req.headers.authorization ?? "";
    const key = auth.replace(/^Bearer\s+/i, "");
    const echo = { error: { code: `bad_${key}`, message: `refused ${auth} (key ${key})` } };
    const url = new URL(req.url ?? "/", "http://x");
    const p = url.pathname;
    const detail = /^\/v1\/external\/inventory-status\/([^/]+)$/.exec(p);
    const history = /^\/v1\/external\/inventory-status\/([^/]+)\/history$/.exec(p);
    if (p === "/v1/external/workspace") {
      // First a 503 echoing the key (in its body and its Retry-After), then the workspace.
      if (once("ws")) return json(res, 503, echo, { "retry-after": auth });
      return json(res, 200, { workspace: { id: "ws-hostile", name: "Hostile" }, scope: "read" });
    }
    if (p === "/v1/external/locations") return json(res, 200, { locations: [] });
    if (p === "/v1/external/inventory-status") {
      if (!url.searchParams.get("cursor")) {
        return json(res, 200, { items: skus.map((id) => ({ id, totalQuantity: 1, locationQuantities: {} })), page: { nextCursor: "page-2" } });
      }
      // Page 2 comes late (the SKU workers go first) and fails validation at a field named after the key.
      setTimeout(() => json(res, 200, { items: [{ id: randomUUID(), totalQuantity: 1, locationQuantities: { [auth]: "x" } }] }), 700);
      return;
    }
    if (detail) {
      const i = skus.indexOf(detail[1]!);
      if (i === 0) return json(res, 500, echo); // retried, then the SKU fails with the server's message
      if (i === 1) return json(res, 200, { sku: { id: skus[1], options: { [auth]: { nested: key } } }, totalQuantity: 1, locations: [] });
      if (i === 2) {
        res.writeHead(200, { "content-type": "text/html" });
        return res.end(`<html><body>Proxy error for ${auth}</body></html>`);
      }
      if (once("429")) return json(res, 429, echo, { "retry-after": key });
      return json(res, 404, echo);
    }
    if (history) return json(res, 400, echo);
    json(res, 404, echo);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// In-process: the logger and the client

describe("logger redaction: every shape a header or the key can take in a logged object", () => {
  const secret = new Secret(KEY);
  const bearer = `Bearer ${secret.reveal()}`;

  class UndiciLikeError extends Error {
    override name = "UndiciLikeError";
    code = "UND_ERR_SOCKET";
    constructor(readonly opts: unknown) {
      super("other side closed");
    }
  }

  const shapes: Array<[string, (log: ReturnType<typeof createLogger>) => void]> = [
    ["the Secret itself", (l) => l.debug({ key: secret, apiKey: secret, nested: { secret } }, "key object")],
    ["headers.authorization", (l) => l.debug({ headers: { authorization: bearer } }, "request")],
    ["headers.Authorization", (l) => l.debug({ headers: { Authorization: bearer } }, "request")],
    ["req.headers", (l) => l.debug({ req: { method: "GET", headers: { authorization: bearer } } }, "request")],
    ["request options (3 levels)", (l) => l.debug({ request: { options: { headers: { authorization: bearer } } } }, "request options")],
    ["request options (5 levels)", (l) => l.debug({ a: { b: { c: { d: { headers: { authorization: bearer } } } } } }, "deep")],
    ["undici raw header array", (l) => l.debug({ opts: { headers: ["authorization", bearer, "accept", "application/json"] } }, "dispatch")],
    ["a Headers instance", (l) => l.debug({ headers: new Headers({ authorization: bearer }) }, "headers instance")],
    ["a Request", (l) => l.debug({ request: new Request("http://127.0.0.1/", { headers: { authorization: bearer } }) }, "request object")],
    ["an error with the header in its cause", (l) => l.error({ err: new Error("request failed", { cause: { headers: { authorization: bearer } } }) }, "failed")],
    [
      "an error with an error cause carrying options",
      (l) => l.error({ err: new Error("fetch failed", { cause: new UndiciLikeError({ headers: { authorization: bearer }, path: "/v1" }) }) }, "failed"),
    ],
    [
      "an axios-style error config",
      (l) => l.error({ err: Object.assign(new Error("401"), { config: { headers: { Authorization: bearer } }, request: { headers: { authorization: bearer } } }) }, "failed"),
    ],
    ["an error passed directly", (l) => l.error(Object.assign(new Error(`server said: ${bearer}`), { response: { data: { echo: KEY } } }))],
    ["a response dump", (l) => l.debug({ response: { status: 401, body: `{"error":{"message":"bad key ${KEY}"}}`, headers: { "www-authenticate": `Bearer realm="x", error="${KEY}"` } } }, "response")],
    ["the message string", (l) => l.info(`calling the API with ${bearer} and ${KEY}`)],
    ["printf-style arguments", (l) => l.info("calling with %s and %o", bearer, { key: KEY })],
    ["child logger bindings", (l) => l.child({ authorization: bearer, token: KEY }).debug("child")],
    ["the key as an object key", (l) => l.debug({ [KEY]: 1, [`Bearer ${KEY}`]: 2 }, "keys")],
    ["a plain string field", (l) => l.debug({ note: `x${KEY}y`, list: [KEY, { k: KEY }] }, "fields")],
  ];

  for (const [name, log] of shapes) {
    it(name, () => {
      const stream = new PassThrough();
      let out = "";
      stream.on("data", (d) => (out += d));
      const logger = createLogger("trace", stream);
      log(logger);
      logger.flush?.();
      expect(out.length, "nothing was logged").toBeGreaterThan(0);
      expect(out).not.toContain(KEY);
    });
  }

  it("redactSecrets scrubs the key and any Bearer token, whole, wherever it sits", () => {
    expect(redactSecrets(`a${KEY}b`)).toBe("a[redacted]b");
    expect(redactSecrets(`Authorization: Bearer ${KEY}`)).not.toContain(KEY);
    expect(redactSecrets("authorization: bearer some-other-token-1234")).toBe("authorization: bearer [redacted]");
    expect(String(secret)).toBe("[redacted]");
    expect(JSON.stringify({ secret })).toBe('{"secret":"[redacted]"}');
    expect(`${secret}`).toBe("[redacted]");
  });

  it("a body that echoes the key in \\u escapes parses with the key redacted in every value (parseScrubbed)", () => {
    const escapeAll = (text: string) => [...text].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");
    const echoed = escapeAll(`Bearer ${KEY}`);
    // Half the key escaped, half as itself, and in a property name spelt with escapes: no byte form of the key in the text.
    const half = `${escapeAll(KEY.slice(0, 10))}${KEY.slice(10)}`;
    const body = `{"sku":{"name":"Widget (${echoed})","note":"\\u002b${half}\\n"},"\\u006eame":"${echoed}"}`;
    expect(body).not.toContain(KEY);
    expect(JSON.stringify(JSON.parse(body))).toContain(KEY);
    const parsed = parseScrubbed(body);
    expect(JSON.stringify(parsed)).not.toContain(KEY);
    expect(parsed).toEqual({ sku: { name: "Widget (Bearer [redacted])", note: "+[redacted]\n" }, name: "Bearer [redacted]" });
    // A key with slashes, written with every "/" as "\/" (as PHP's json_encode does).
    const slashed = `imk/leak/${KEY_SECRET_PART}`;
    new Secret(slashed);
    expect(parseScrubbed(`{"note":"${slashed.replaceAll("/", "\\/")}"}`)).toEqual({ note: "[redacted]" });
    // Without a key in it, escapes parse as JSON.parse reads them.
    expect(parseScrubbed('{"a":"\\u002bx\\n\\\\u0041","b":[1,"\\/"]}')).toEqual({ a: "+x\n\\u0041", b: [1, "/"] });
  });
});

describe("the key goes to the configured origin only", () => {
  let target: Server;
  let other: Server;
  let targetBase: string;
  let otherBase: string;
  const otherSaw: string[] = [];
  const targetSaw: string[] = [];
  let redirectTo = "";
  let status = 302;

  beforeAll(async () => {
    other = createServer((req, res) => {
      otherSaw.push(`${req.url} ${req.headers.authorization ?? "(no auth)"}`);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ workspace: { id: "x", name: "stolen" }, scope: "read" }));
    });
    target = createServer((req, res) => {
      targetSaw.push(`${req.url}`);
      if (req.url?.startsWith("/landing")) {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify({ workspace: { id: "x", name: "same origin" }, scope: "read" }));
      }
      res.writeHead(status, { location: redirectTo });
      res.end();
    });
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    await new Promise<void>((r) => target.listen(0, "127.0.0.1", r));
    otherBase = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    targetBase = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of [target, other]) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
  });

  const client = () =>
    new ApiClient({
      baseUrl: new URL(targetBase),
      key: new Secret(KEY),
      scheduler: new RequestScheduler({ concurrency: 1, requestsPerSecond: null, maxRetries: 0, max429Retries: 0, backoffBaseMs: 1, backoffCapMs: 2, minRetryAfterMs: 1, maxWaitMs: 1_000 }),
      http: { connectTimeoutMs: 2_000, responseTimeoutMs: 2_000, maxResponseBytes: 100_000, connections: 1 },
      transport: poolTransport,
    });

  for (const code of [301, 302, 303, 307, 308]) {
    for (const where of ["another origin", "the same origin"] as const) {
      it(`a ${code} redirect to ${where} is not followed`, async () => {
        status = code;
        redirectTo = where === "another origin" ? `${otherBase}/steal` : `${targetBase}/landing`;
        otherSaw.length = 0;
        targetSaw.length = 0;
        const c = client();
        try {
          const err = await c.workspace(AbortSignal.timeout(5_000)).then(
            () => null,
            (e: unknown) => e,
          );
          expect(err).toBeInstanceOf(ApiError);
          expect((err as ApiError).message).toMatch(new RegExp(`${code} redirect; redirects are not followed`));
          expect((err as ApiError).message).not.toContain(KEY);
          expect(otherSaw).toEqual([]);
          expect(targetSaw).toEqual(["/v1/external/workspace"]);
        } finally {
          await c.close();
        }
      });
    }
  }
});
