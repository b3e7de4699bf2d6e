/**
 * Configuration from one source: the zod schema below. Its input is the config file (strict:
 * unknown keys are mistakes), its defaults are DEFAULTS (core/defaults.ts), and its output,
 * `ResolvedConfig`, nests like the file (`rateLimit.*`, `retry.*`, ...). Precedence is
 * defaults < config file < environment < flags: the environment and the flags are an overlay
 * set into the file's object before the one parse, so a flag is checked by the rule of the key
 * it stands for. Every error names the key (or flag, or variable) and what was expected, and
 * is raised before any request is made (exit 2).
 *
 * The developer key is not configuration: it comes only from INVENTORY_API_KEY or the
 * file named by INVENTORY_API_KEY_FILE, and a key found anywhere else is refused.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { isIP } from "node:net";
import { z } from "zod";
import { validate as validateCron } from "node-cron";
import { DEFAULTS } from "./defaults.js";
import { ConfigError } from "./errors.js";
import { LOG_LEVELS } from "./logger.js";
import { looksLikePostgresUrl } from "./pg-url.js";
import { Secret } from "./secret.js";

/** A PostgreSQL schema name we create: lower case, unquoted-identifier safe, at most 63 bytes. */
export const PG_SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const PG_SCHEMA_NAME_RULE = "expected a PostgreSQL schema name: a-z, 0-9 and _, starting with a letter or _, at most 63 characters";
/** Most requests in flight (and SKU workers) anyone may configure. */
export const MAX_CONCURRENCY = 64;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const LISTEN = /^(\[[0-9a-f:]+\]|[^\s:[\]]+):(\d{1,5})$/i;

/**
 * A value check whose message stands on its own rather than in the file's list of mistakes:
 * "prefixed" is shown after where the value came from (`--base-url: ...`), "whole" as it is.
 */
type Standalone = "prefixed" | "whole";
function standaloneOf(issue: z.core.$ZodIssue): Standalone | undefined {
  return issue.code === "custom" ? (issue.params as { standalone?: Standalone } | undefined)?.standalone : undefined;
}

const cron = z.string().refine((s) => validateCron(s), { message: "expected a cron expression such as '*/5 * * * *'" });
const positiveInt = z.number().int().positive();
/** An optional key without a default: absent is null. */
const orNull = <T extends z.ZodType>(schema: T) => schema.optional().transform((v) => v ?? null);

const baseUrl = z.string().transform((raw, ctx) => {
  const checked = checkBaseUrl(raw);
  if ("url" in checked) return checked.url;
  ctx.addIssue({ code: "custom", message: checked.problem, params: { standalone: "prefixed" } });
  return z.NEVER;
});

/** Workspace ids are UUIDs (the API document): a typo is caught before any request is made. */
const workspaceId = z
  .string()
  .min(1)
  .superRefine((id, ctx) => {
    if (UUID.test(id)) return;
    const message = `expected workspace id "${id}" (--expected-workspace-id / expectedWorkspace.id) is not a UUID such as 00000000-0000-4000-8000-000000000000`;
    ctx.addIssue({ code: "custom", message, params: { standalone: "whole" } });
  });

/** host:port (an IPv6 host in brackets) becomes { host, port }. */
const listen = z
  .string()
  .refine((s) => Number(LISTEN.exec(s)?.[2] ?? NaN) <= 65535, "expected host:port such as 127.0.0.1:9464")
  .transform((s) => {
    const [, host, port] = LISTEN.exec(s)!;
    return { host: host!.replace(/^\[|\]$/g, ""), port: Number(port) };
  });

/**
 * The config file's schema and the resolved config's: README ("Configuration") documents it and
 * config.example.json shows every key. Sections default to {} so that their keys' defaults apply.
 */
export const ConfigSchema = z.strictObject({
  $schema: z.string().optional(),
  baseUrl: orNull(baseUrl),
  /** Relative to the config file's directory in the file; to the working directory from --db / INVENTORY_DB. */
  db: z.string().min(1).default(DEFAULTS.dbPath),
  concurrency: positiveInt.max(MAX_CONCURRENCY).default(DEFAULTS.concurrency),
  logLevel: z.enum(LOG_LEVELS).default(DEFAULTS.logLevel),
  expectedWorkspace: z.strictObject({ id: orNull(workspaceId), name: orNull(z.string().min(1)) }).prefault({}),
  rateLimit: z
    .strictObject({
      requestsPerSecond: z.number().positive().nullable().default(DEFAULTS.requestsPerSecond),
      adaptive: z.boolean().default(DEFAULTS.adaptiveRate),
      maxWaitSeconds: z
        .number()
        .positive()
        .default(DEFAULTS.maxWaitMs / 1000),
    })
    .prefault({}),
  http: z
    .strictObject({
      connectTimeoutMs: positiveInt.default(DEFAULTS.connectTimeoutMs),
      responseTimeoutMs: positiveInt.default(DEFAULTS.responseTimeoutMs),
      maxResponseBytes: positiveInt.default(DEFAULTS.maxResponseBytes),
    })
    .prefault({}),
  retry: z
    .strictObject({
      maxRetries: z.number().int().min(0).max(100).default(DEFAULTS.maxRetries),
      max429Retries: z.number().int().min(0).max(10_000).default(DEFAULTS.max429Retries),
      backoffBaseMs: positiveInt.default(DEFAULTS.backoffBaseMs),
      backoffCapMs: positiveInt.default(DEFAULTS.backoffCapMs),
      minRetryAfterMs: positiveInt.default(DEFAULTS.minRetryAfterMs),
    })
    .prefault({}),
  sync: z
    .strictObject({
      maxFailedShare: z.number().min(0).max(1).default(DEFAULTS.maxFailedShare),
      maxRequests: positiveInt.nullable().default(DEFAULTS.maxRequests),
      reverifyWindowHours: z.number().positive().default(DEFAULTS.reverifyWindowHours),
      historyOverlapRows: z.number().int().min(0).default(DEFAULTS.historyOverlapRows),
      maxRunSeconds: z
        .number()
        .positive()
        .max(2_000_000)
        .default(DEFAULTS.maxRunMs / 1000),
    })
    .prefault({}),
  /** The WAL size cap kept by the WAL guard while BI readers come and go (see store/wal-guard.ts). */
  storage: z
    .strictObject({
      walCapMegabytes: z
        .number()
        .min(1)
        .default(DEFAULTS.walCapBytes / (1024 * 1024)),
      walCheckIntervalMs: z.number().int().min(50).default(DEFAULTS.walCheckIntervalMs),
    })
    .prefault({}),
  schedule: z.strictObject({ incremental: cron.default(DEFAULTS.scheduleIncremental), full: cron.default(DEFAULTS.scheduleFull) }).prefault({}),
  daemon: z
    .strictObject({
      listen: listen.prefault(DEFAULTS.daemonListen),
      readyMaxAgeSeconds: z.number().positive().default(DEFAULTS.readyMaxAgeSeconds),
    })
    .prefault({}),
  /** The change feed: whether the daemon serves GET /changes, how long it waits, and the outbox's retention (store/outbox.ts). */
  feed: z
    .strictObject({
      serve: z.boolean().default(DEFAULTS.feedServe),
      longPollSeconds: z.number().positive().max(300).default(DEFAULTS.feedLongPollSeconds),
      retentionDays: z.number().positive().default(DEFAULTS.feedRetentionDays),
      retentionMaxChanges: positiveInt.default(DEFAULTS.feedRetentionMaxChanges),
    })
    .prefault({}),
  /** Where `publish --postgres` and the daemon's continuous publish write. The connection string is not configuration (INVENTORY_PG_URL). */
  publish: z
    .strictObject({
      postgres: z
        .strictObject({
          schema: orNull(z.string().regex(PG_SCHEMA_NAME, PG_SCHEMA_NAME_RULE)),
          /** The daemon publishes after each run that committed (INVENTORY_PG_URL or INVENTORY_PG_URL_FILE then required). */
          enabled: z.boolean().default(DEFAULTS.publishPostgresEnabled),
          /** Most changes of the feed per PostgreSQL transaction. */
          batchChanges: positiveInt.default(DEFAULTS.publishBatchChanges),
        })
        .prefault({}),
    })
    .prefault({}),
});
/**
 * The resolved config: every key filled in, nested and in the units of the file (seconds in
 * `rateLimit.maxWaitSeconds` and `sync.maxRunSeconds`, megabytes in `storage.walCapMegabytes`);
 * `baseUrl` a URL or null, `daemon.listen` a host and a port.
 */
export type ResolvedConfig = z.output<typeof ConfigSchema>;

/**
 * The overlay: each flag and environment variable that stands for a key of the file. A flag's
 * option is its name in kebab case (`maxRps` is --max-rps).
 */
interface Overlay {
  /** The key it stands for, as a path in the file. */
  path: readonly string[];
  flag: string;
  env?: string;
  /** Flags are text: this reads it as the key's JSON type; text that is not stays text, for the schema to refuse. */
  read?: (text: string) => unknown;
  /** What a refused value should have been, for a message such as `--concurrency: expected ..., got "x"`. */
  expected?: string;
}
const wholeNumber = (text: string): unknown => (/^\d+$/.test(text) ? Number(text) : text);
const number = (text: string): unknown => (Number.isFinite(Number(text)) ? Number(text) : text);

const OVERLAY = [
  { path: ["baseUrl"], flag: "baseUrl", env: "INVENTORY_BASE_URL" },
  { path: ["db"], flag: "db", env: "INVENTORY_DB" },
  { path: ["concurrency"], flag: "concurrency", read: wholeNumber, expected: `a whole number from 1 to ${MAX_CONCURRENCY}` },
  { path: ["logLevel"], flag: "logLevel", expected: `one of ${LOG_LEVELS.join(", ")}` },
  { path: ["expectedWorkspace", "id"], flag: "expectedWorkspaceId" },
  { path: ["expectedWorkspace", "name"], flag: "expectedWorkspaceName" },
  { path: ["rateLimit", "requestsPerSecond"], flag: "maxRps", read: number, expected: "a positive number" },
  { path: ["sync", "maxRequests"], flag: "maxRequests", read: wholeNumber, expected: `a whole number from 1 to ${Number.MAX_SAFE_INTEGER}` },
  { path: ["publish", "postgres", "batchChanges"], flag: "batchSize", read: wholeNumber, expected: `a whole number from 1 to ${Number.MAX_SAFE_INTEGER}` },
  { path: ["daemon", "listen"], flag: "listen", env: "INVENTORY_DAEMON_LISTEN", expected: "host:port such as 127.0.0.1:9464 or 0.0.0.0:9464" },
] as const satisfies readonly Overlay[];

/** The flags loadConfig reads, by name (camelCase of the option): --config and one per overlay entry. */
export type Flags = Partial<Record<"config" | (typeof OVERLAY)[number]["flag"], string>>;
export const CONFIG_FLAGS: ReadonlyArray<keyof Flags> = ["config", ...OVERLAY.map((o) => o.flag)];

/** The command-line option of a flag: `baseUrl` is `base-url`. */
export function optionOf(flag: keyof Flags): string {
  return flag.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** An overlay value set into the file's object, and where it came from (for messages). */
interface Applied {
  entry: Overlay;
  /** `--max-rps` or `INVENTORY_BASE_URL`. */
  label: string;
  text: string;
}

/**
 * Names under which people put a key by mistake: apiKey, api_key, INVENTORY_API_KEY, token,
 * accessToken, apiKeyFile, developerKey, secret, authorization, bearer, password, credentials...
 * Matched on the name lowercased with separators removed, so every spelling is caught. No
 * legitimate config key ends like this (checked by a test against ConfigSchema's shape).
 */
const KEY_LIKE = /(key|token|secret|authorization|bearer|password|passwd|credentials?)(file|path)?$/;

/** Does this config key or flag name look like somewhere a developer key is being put? */
export function looksLikeKeyName(name: string): boolean {
  return KEY_LIKE.test(name.toLowerCase().replace(/[^a-z0-9]/g, ""));
}

/** An environment variable; empty counts as unset (as `FOO=` in a compose file means). */
function fromEnv(env: NodeJS.ProcessEnv, name: string): string | undefined {
  return env[name] || undefined;
}

/** defaults < config file < environment < flags: one parse of the file's object with the overlay set into it. */
export function loadConfig(flags: Flags, env: NodeJS.ProcessEnv = process.env): ResolvedConfig {
  const configPath = flags.config ?? fromEnv(env, "INVENTORY_CONFIG") ?? null;
  const file = configPath ? readConfigFile(configPath) : {};
  const { merged, applied } = withOverlay(file, flags, env);
  const parsed = ConfigSchema.safeParse(merged);
  const shadowed = shadowedMistakes(file, applied);
  if (parsed.success && !shadowed.length) return parsed.data;
  throw configError(shadowed, parsed.error?.issues ?? [], applied, configPath);
}

/**
 * A copy of the file's object with the overlay set into it: per key, the environment's value,
 * then the flag's. A value whose way the file blocks with something other than an object
 * (`"rateLimit": true`) is not set: the parse reports the file's mistake instead of hiding it.
 */
function withOverlay(file: unknown, flags: Flags, env: NodeJS.ProcessEnv): { merged: unknown; applied: Map<string, Applied> } {
  const merged = isPlainObject(file) ? { ...file } : file;
  const applied = new Map<string, Applied>();
  const flagText = flags as Readonly<Record<string, string | undefined>>;
  for (const entry of OVERLAY as readonly Overlay[]) {
    const sources = [
      { label: entry.env ?? "", text: entry.env ? fromEnv(env, entry.env) : undefined },
      { label: `--${optionOf(entry.flag as keyof Flags)}`, text: flagText[entry.flag] },
    ];
    for (const { label, text } of sources) {
      if (text === undefined) continue;
      if (setAt(merged, entry.path, entry.read ? entry.read(text) : text)) applied.set(entry.path.join("."), { entry, label, text });
    }
  }
  return { merged, applied };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Sets `value` at `path` of `root` (a copy of the file's top level), copying the objects on the
 * way (the file's object stays as read) or creating them; false where the way holds something else.
 */
function setAt(root: unknown, path: readonly string[], value: unknown): boolean {
  let node = root;
  for (const seg of path.slice(0, -1)) {
    if (!isPlainObject(node)) return false;
    const next = node[seg];
    if (next === undefined) node[seg] = {};
    else if (isPlainObject(next)) node[seg] = { ...next };
    else return false;
    node = node[seg];
  }
  if (!isPlainObject(node)) return false;
  node[path[path.length - 1]!] = value;
  return true;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let node = root;
  for (const seg of path) node = isPlainObject(node) ? node[String(seg)] : undefined;
  return node;
}

/**
 * A flag or variable does not hide a mistake in the file: the file's values it overrides are
 * checked against their key's schema too. Their shape only: a base URL or a workspace id is
 * checked where it is the one used.
 */
function shadowedMistakes(file: unknown, applied: ReadonlyMap<string, Applied>): z.core.$ZodIssue[] {
  return [...applied.values()].flatMap(({ entry }) => {
    const value = valueAt(file, entry.path);
    const schema = schemaAt(entry.path);
    if (value === undefined || !schema) return [];
    const issues = schema.safeParse(value).error?.issues ?? [];
    return issues.filter((i) => !standaloneOf(i)).map((i) => ({ ...i, path: [...entry.path, ...i.path] }));
  });
}

/**
 * One ConfigError for what was refused: the file's own mistakes, all of them as one list;
 * otherwise the first value refused, named by where it came from.
 */
function configError(shadowed: readonly z.core.$ZodIssue[], issues: readonly z.core.$ZodIssue[], applied: ReadonlyMap<string, Applied>, configPath: string | null): ConfigError {
  const sourceOf = (i: z.core.$ZodIssue) => applied.get(i.path.join("."));
  const inFile = [...shadowed, ...issues.filter((i) => !standaloneOf(i) && !sourceOf(i))];
  if (inFile.length) {
    return new ConfigError(`config file ${configPath} is invalid:\n  - ${inFile.map(fileMistake).join("\n  - ")}\nSee config.example.json for every key.`);
  }
  const issue = issues.find((i) => standaloneOf(i)) ?? issues[0]!;
  const source = sourceOf(issue);
  if (standaloneOf(issue) === "whole") return new ConfigError(issue.message);
  if (!source) return new ConfigError(`${issue.path.join(".")} (config file): ${issue.message}`);
  if (source.entry.expected) return new ConfigError(`${source.label}: expected ${source.entry.expected}, got "${source.text}"`);
  return new ConfigError(`${source.label}: ${issue.message}`);
}

/** One line of the file's list of mistakes: where, and what was expected there. */
function fileMistake(i: z.core.$ZodIssue): string {
  const where = i.path.length ? i.path.join(".") : "(top level)";
  if (i.code !== "unrecognized_keys") return `${where}: ${i.message}`;
  const allowed = allowedKeysAt(i.path);
  return (
    `${where === "(top level)" ? "" : where + ": "}unknown key(s) ${i.keys.map((k) => `"${clip(k)}"`).join(", ")}` +
    (allowed.length ? `; expected only ${allowed.map((k) => `"${k}"`).join(", ")}${didYouMean(i.keys, allowed)}` : "")
  );
}

/** A config file is a few hundred bytes; anything near this is not one (or is /dev/zero). */
const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

/**
 * The config file's JSON, unparsed by the schema (loadConfig does that once, with the overlay),
 * its `db` made relative to the file's directory. A key-like name anywhere is refused here.
 */
function readConfigFile(path: string): unknown {
  if (!existsSync(path)) throw new ConfigError(`config file ${path} does not exist (--config / INVENTORY_CONFIG)`);
  // The key file's checks: a regular file of a sane size, checked before reading a byte.
  const st = statSync(path);
  if (!st.isFile()) throw new ConfigError(`config file ${path} is not a regular file (--config / INVENTORY_CONFIG); expected a JSON file`);
  if (st.size > MAX_CONFIG_FILE_BYTES) throw new ConfigError(`config file ${path} is ${st.size} bytes, more than a config file's ${MAX_CONFIG_FILE_BYTES} (--config / INVENTORY_CONFIG)`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    // Without the snippet of the file JSON.parse quotes (so not with the error as cause either):
    // it may be the very key someone pasted there.
    const why = (err as Error).message.replace(/,? *"(?:[^"\\]|\\.)*"(\.\.\.)?( is not valid JSON)?/g, "").trim();
    throw new ConfigError(`config file ${path} is not valid JSON: ${why}`);
  }
  const keyAt = findKeyLikeEntry(raw);
  if (keyAt) {
    throw new ConfigError(
      `config file ${path}: "${keyAt}" looks like a developer key. The key is never read from the config file: ` +
        `set INVENTORY_API_KEY, or INVENTORY_API_KEY_FILE to a file that holds it, and remove it from ${path}.`,
    );
  }
  const pgUrlAt = findPostgresUrlEntry(raw);
  if (pgUrlAt) {
    throw new ConfigError(
      `config file ${path}: "${pgUrlAt}" looks like a PostgreSQL connection string. It is never read from the config file: ` +
        `set INVENTORY_PG_URL, or INVENTORY_PG_URL_FILE to a file that holds it, and remove it from ${path}.`,
    );
  }
  if (isPlainObject(raw) && typeof raw.db === "string" && raw.db !== "") raw.db = resolve(dirname(resolve(path)), raw.db);
  return raw;
}

/**
 * The path of the first key-like name anywhere in the parsed file (objects and arrays),
 * breadth first and without recursion: a deeply nested file must end in a clear error,
 * not a stack overflow. Deeper than any valid config file nests is left to the schema.
 */
function findKeyLikeEntry(root: unknown): string | null {
  return findEntry(root, (k) => looksLikeKeyName(k));
}

/** The path of the first value that is a PostgreSQL connection URL (pg-url.ts), or of a key named like one. */
function findPostgresUrlEntry(root: unknown): string | null {
  return findEntry(root, (k, v) => PG_URL_KEY.test(k.toLowerCase().replace(/[^a-z0-9]/g, "")) || (typeof v === "string" && looksLikePostgresUrl(v)));
}
/**
 * Names under which people put a connection string: url, pgUrl, postgresUrl, databaseUrl, connectionString,
 * dsn... (not baseUrl, the API's address).
 */
const PG_URL_KEY = /^(url|uri|dsn|connectionstring)$|(pg|postgres|postgresql|database|db|connection)(url|uri|dsn|string)(file|path)?$/;

/** The path of the first entry (name and value) that `matches`; array items are matched with an empty name. */
function findEntry(root: unknown, matches: (key: string, value: unknown) => boolean): string | null {
  const MAX_DEPTH = 32;
  let level: Array<[unknown, string]> = [[root, ""]];
  for (let depth = 0; depth < MAX_DEPTH && level.length; depth++) {
    const next: Array<[unknown, string]> = [];
    for (const [v, path] of level) {
      if (!v || typeof v !== "object") continue;
      for (const [k, child] of Object.entries(v)) {
        const here = Array.isArray(v) ? `${path}[${k}]` : path ? `${path}.${k}` : k;
        if (matches(Array.isArray(v) ? "" : k, child)) return here.length > 120 ? `${here.slice(0, 117)}...` : here;
        next.push([child, here]);
      }
    }
    level = next;
  }
  return null;
}

/** A schema without its wrappers (optional, default, the input side of a transform). */
function unwrapped(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    if (s instanceof z.ZodPipe) s = s.in as z.ZodType;
    else if (s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodDefault || s instanceof z.ZodPrefault) s = s.unwrap() as z.ZodType;
    else return s;
  }
}

/** The schema of the key at `path` (undefined where there is none). */
function schemaAt(path: readonly PropertyKey[]): z.ZodType | undefined {
  let schema: z.ZodType | undefined = ConfigSchema;
  for (const seg of path) {
    const inner: z.ZodType = unwrapped(schema);
    schema = inner instanceof z.ZodObject ? (inner.shape as Record<string, z.ZodType>)[String(seg)] : undefined;
    if (!schema) return undefined;
  }
  return schema;
}

/** The keys the schema allows at `path` (for "unknown key" messages). */
function allowedKeysAt(path: readonly PropertyKey[]): string[] {
  const schema = schemaAt(path);
  const inner = schema && unwrapped(schema);
  return inner instanceof z.ZodObject ? Object.keys(inner.shape) : [];
}

/** " (did you mean "x"?)" when an unknown key is a small typo of an allowed one. */
function didYouMean(unknown: readonly string[], allowed: readonly string[]): string {
  for (const u of unknown) {
    const lu = u.toLowerCase();
    const best = allowed.find((a) => {
      const la = a.toLowerCase();
      return editDistance(lu, la) <= Math.max(1, Math.floor(a.length / 3)) || (lu.length >= 4 && (la.startsWith(lu) || lu.startsWith(la)));
    });
    if (best) return ` (did you mean "${best}" for "${clip(u)}"?)`;
  }
  return "";
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 3 || a.length > 64 || b.length > 64) return Infinity;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** Echo at most this much of something the user wrote: messages stay one readable line. */
function clip(s: string, max = 80): string {
  return s.length > max ? `${s.slice(0, max - 3)}...` : s;
}

/** Loopback: 127.0.0.0/8, ::1, localhost. Plain http is allowed only there. */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost") return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  if (isIP(h) === 6) return h === "::1" || h === "0:0:0:0:0:0:0:1";
  return false;
}

/** The base URL, or what is wrong with it (shown after where it came from: `--base-url: ...`). */
function checkBaseUrl(raw: string): { url: URL } | { problem: string } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Userinfo is masked: a URL that fails to parse may still carry a password.
    const shown = clip(raw.replace(/\/\/[^/@\s]*@/, "//***@"));
    return { problem: `"${shown}" is not a URL; expected e.g. https://api.example.com or https://host/prefix` };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return { problem: `expected an https:// URL, got ${url.protocol}` };
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname)) {
    return { problem: "plain http:// is refused except to loopback addresses (the key would travel in clear); use https://" };
  }
  if (url.username || url.password) return { problem: "credentials in the URL are not supported; the key comes from INVENTORY_API_KEY" };
  if (url.search || url.hash) return { problem: "the base URL must not have a query string or fragment" };
  if (/\/v1\/external\/?$/i.test(url.pathname)) {
    const base = url.origin + url.pathname.replace(/\/v1\/external\/?$/i, "");
    return { problem: `the base URL ends with /v1/external, which every endpoint path adds itself (requests would go to …/v1/external/v1/external/…); use ${base}` };
  }
  return { url };
}

/** A key file larger than this is not a key file (a wrong path, e.g. a log or a certificate bundle). */
const MAX_KEY_FILE_BYTES = 16 * 1024;
/**
 * Shortest key we accept. Redaction scrubs the key's bytes from every log line and error;
 * a very short key would also match ordinary text, so it could neither be scrubbed nor kept secret.
 */
const MIN_KEY_LENGTH = 8;

/**
 * The bearer token the daemon's GET /changes requires: INVENTORY_FEED_TOKEN, or the contents
 * of INVENTORY_FEED_TOKEN_FILE; null when neither is set. Checked and wrapped as the key is
 * (a Secret: never printed, scrubbed from every log line), and, like the key, never read
 * from the config file (a "token" key there is refused).
 */
export function loadFeedToken(env: NodeJS.ProcessEnv = process.env, warn: (msg: string) => void = () => {}): Secret | null {
  if (!env.INVENTORY_FEED_TOKEN && !env.INVENTORY_FEED_TOKEN_FILE) return null;
  return loadKey({ INVENTORY_API_KEY: env.INVENTORY_FEED_TOKEN, INVENTORY_API_KEY_FILE: env.INVENTORY_FEED_TOKEN_FILE }, warn, "INVENTORY_FEED_TOKEN");
}

/**
 * The developer key: INVENTORY_API_KEY, or the contents of INVENTORY_API_KEY_FILE
 * (one trailing newline trimmed). Warns through `warn` when the file is readable by
 * group or others. No message here ever contains the key's value.
 */
export function loadKey(env: NodeJS.ProcessEnv = process.env, warn: (msg: string) => void = () => {}, name = "INVENTORY_API_KEY"): Secret {
  const direct = env.INVENTORY_API_KEY;
  const file = env.INVENTORY_API_KEY_FILE;
  if (direct && file) throw new ConfigError(`both ${name} and ${name}_FILE are set; set only one`);
  if (direct) return new Secret(checkKey(direct.trim(), name));
  if (file) {
    const what = `${name}_FILE (${file})`;
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new ConfigError(
        code === "ENOENT" ? `${what}: the file does not exist; create it with the key on one line, or fix the path` : `${what}: cannot read the file (${code ?? (err as Error).message})`,
        { cause: err },
      );
    }
    if (!st.isFile()) throw new ConfigError(`${what}: not a regular file; expected a file holding the key on one line`);
    if (st.size > MAX_KEY_FILE_BYTES) throw new ConfigError(`${what}: ${st.size} bytes is too large for a key file; expected the key on one line`);
    if (st.mode & 0o077) warn(`key file ${file} is readable by group or others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`);
    let content: string;
    try {
      content = readFileSync(file, "utf8");
    } catch (err) {
      throw new ConfigError(`${what}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
    }
    // Trimmed as the environment's key is: an editor's trailing space or newline is not part of a key.
    return new Secret(checkKey(content.trim(), what));
  }
  throw new ConfigError(
    "no developer key: set INVENTORY_API_KEY, or INVENTORY_API_KEY_FILE to a file holding the key. " +
      "To try inventory-mirror without one, run 'inventory-mirror simulate' and use the key it prints.",
  );
}

/**
 * A key must be one token of visible ASCII (what an Authorization header can carry),
 * without quotes or backslashes: JSON escapes those, and an escaped key would slip past
 * the byte-for-byte scrubbing of log lines. The value is never echoed.
 */
function checkKey(value: string, source: string): string {
  if (value === "") throw new ConfigError(`${source} is empty; expected the developer key`);
  if (/\s/.test(value)) throw new ConfigError(`${source} holds whitespace inside the key; expected the key alone on one line`);
  if (!/^[\x21-\x7e]+$/.test(value) || /["\\]/.test(value)) {
    throw new ConfigError(`${source} holds characters a developer key cannot contain; expected visible ASCII without quotes or backslashes`);
  }
  if (value.length < MIN_KEY_LENGTH) throw new ConfigError(`${source} is ${value.length} characters long; expected a developer key of at least ${MIN_KEY_LENGTH}`);
  return value;
}
