/**
 * Configuration: defaults < config file < environment < flags. The config file is
 * validated with zod (strict: unknown keys are mistakes); every error names the key
 * and what was expected, and is raised before any request is made (exit 2).
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
import { Secret } from "./secret.js";

const cron = z.string().refine((s) => validateCron(s), { message: "expected a cron expression such as '*/5 * * * *'" });
const positiveInt = z.number().int().positive();

/** The config file's schema. Documented in README ("Configuration"); config.example.json shows every key. */
export const ConfigFile = z.strictObject({
  $schema: z.string().optional(),
  baseUrl: z.string().optional(),
  db: z.string().min(1).optional(),
  concurrency: positiveInt.max(64).optional(),
  logLevel: z.enum(LOG_LEVELS).optional(),
  expectedWorkspace: z.strictObject({ id: z.string().min(1).optional(), name: z.string().min(1).optional() }).optional(),
  rateLimit: z
    .strictObject({
      requestsPerSecond: z.number().positive().nullable().optional(),
      adaptive: z.boolean().optional(),
      maxWaitSeconds: z.number().positive().optional(),
    })
    .optional(),
  http: z
    .strictObject({
      connectTimeoutMs: positiveInt.optional(),
      responseTimeoutMs: positiveInt.optional(),
      maxResponseBytes: positiveInt.optional(),
    })
    .optional(),
  retry: z
    .strictObject({
      maxRetries: z.number().int().min(0).max(100).optional(),
      max429Retries: z.number().int().min(0).max(10_000).optional(),
      backoffBaseMs: positiveInt.optional(),
      backoffCapMs: positiveInt.optional(),
      minRetryAfterMs: positiveInt.optional(),
    })
    .optional(),
  sync: z
    .strictObject({
      maxFailedShare: z.number().min(0).max(1).optional(),
      maxRequests: positiveInt.nullable().optional(),
      reverifyWindowHours: z.number().positive().optional(),
      historyOverlapRows: z.number().int().min(0).optional(),
      maxRunSeconds: z.number().positive().max(2_000_000).optional(),
    })
    .optional(),
  storage: z
    .strictObject({
      walCapMegabytes: z.number().min(1).optional(),
      walCheckIntervalMs: z.number().int().min(50).optional(),
    })
    .optional(),
  schedule: z.strictObject({ incremental: cron.optional(), full: cron.optional() }).optional(),
  daemon: z
    .strictObject({
      listen: z.string().regex(/^[^\s:]+:\d{1,5}$|^\[[0-9a-f:]+\]:\d{1,5}$/i, "expected host:port such as 127.0.0.1:9464").optional(),
      readyMaxAgeSeconds: z.number().positive().optional(),
    })
    .optional(),
});
export type ConfigFile = z.infer<typeof ConfigFile>;

export interface Flags {
  config?: string;
  db?: string;
  baseUrl?: string;
  concurrency?: string;
  expectedWorkspaceId?: string;
  expectedWorkspaceName?: string;
  logLevel?: string;
  maxRps?: string;
  maxRequests?: string;
}

export interface ResolvedConfig {
  configPath: string | null;
  dbPath: string;
  baseUrl: URL | null;
  concurrency: number;
  logLevel: (typeof LOG_LEVELS)[number];
  expectedWorkspaceId: string | null;
  expectedWorkspaceName: string | null;
  requestsPerSecond: number | null;
  /** Learn the server's accepted rate from 429s (rateLimit.adaptive, default true). */
  adaptiveRate: boolean;
  maxWaitMs: number;
  http: { connectTimeoutMs: number; responseTimeoutMs: number; maxResponseBytes: number };
  retry: { maxRetries: number; max429Retries: number; backoffBaseMs: number; backoffCapMs: number; minRetryAfterMs: number };
  sync: { maxFailedShare: number; maxRequests: number | null; reverifyWindowHours: number; historyOverlapRows: number; maxRunMs: number };
  /** WAL size cap kept by the WAL guard while BI readers come and go (see store/wal-guard.ts). */
  storage: { walCapBytes: number; walCheckIntervalMs: number };
  schedule: { incremental: string; full: string };
  daemon: { host: string; port: number; readyMaxAgeSeconds: number };
}

/**
 * Names under which people put a key by mistake: apiKey, api_key, INVENTORY_API_KEY, token,
 * accessToken, apiKeyFile, developerKey, secret, authorization, bearer, password, credentials...
 * Matched on the name lowercased with separators removed, so every spelling is caught. No
 * legitimate config key ends like this (checked by a test against ConfigFile's shape).
 */
const KEY_LIKE = /(key|token|secret|authorization|bearer|password|passwd|credentials?)(file|path)?$/;

/** Does this config key or flag name look like somewhere a developer key is being put? */
export function looksLikeKeyName(name: string): boolean {
  return KEY_LIKE.test(name.toLowerCase().replace(/[^a-z0-9]/g, ""));
}

export function loadConfig(flags: Flags, env: NodeJS.ProcessEnv = process.env): ResolvedConfig {
  const configPath = flags.config ?? env.INVENTORY_CONFIG ?? null;
  const file = configPath ? readConfigFile(configPath) : {};
  const fileDir = configPath ? dirname(resolve(configPath)) : process.cwd();

  const dbPath = flags.db ?? env.INVENTORY_DB ?? (file.db ? resolve(fileDir, file.db) : DEFAULTS.dbPath);
  const baseUrlRaw = flags.baseUrl ?? env.INVENTORY_BASE_URL ?? file.baseUrl ?? null;
  const baseUrl = baseUrlRaw === null ? null : parseBaseUrl(baseUrlRaw, flags.baseUrl ? "--base-url" : env.INVENTORY_BASE_URL ? "INVENTORY_BASE_URL" : "baseUrl (config file)");

  const concurrency = flags.concurrency !== undefined ? intFlag("--concurrency", flags.concurrency, 1, 64) : (file.concurrency ?? DEFAULTS.concurrency);
  const logLevelRaw = flags.logLevel ?? file.logLevel ?? DEFAULTS.logLevel;
  if (!(LOG_LEVELS as readonly string[]).includes(logLevelRaw)) {
    throw new ConfigError(`--log-level: expected one of ${LOG_LEVELS.join(", ")}, got "${logLevelRaw}"`);
  }
  const requestsPerSecond =
    flags.maxRps !== undefined ? numFlag("--max-rps", flags.maxRps) : (file.rateLimit?.requestsPerSecond ?? DEFAULTS.requestsPerSecond);
  const maxRequests =
    flags.maxRequests !== undefined ? intFlag("--max-requests", flags.maxRequests, 1, Number.MAX_SAFE_INTEGER) : (file.sync?.maxRequests ?? null);

  const [host, portStr] = splitHostPort(file.daemon?.listen ?? "127.0.0.1:9464");
  return {
    configPath,
    dbPath,
    baseUrl,
    concurrency,
    logLevel: logLevelRaw as ResolvedConfig["logLevel"],
    expectedWorkspaceId: checkWorkspaceId(flags.expectedWorkspaceId ?? file.expectedWorkspace?.id ?? null),
    expectedWorkspaceName: flags.expectedWorkspaceName ?? file.expectedWorkspace?.name ?? null,
    requestsPerSecond,
    adaptiveRate: file.rateLimit?.adaptive ?? true,
    maxWaitMs: (file.rateLimit?.maxWaitSeconds ?? DEFAULTS.maxWaitMs / 1000) * 1000,
    http: {
      connectTimeoutMs: file.http?.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      responseTimeoutMs: file.http?.responseTimeoutMs ?? DEFAULTS.responseTimeoutMs,
      maxResponseBytes: file.http?.maxResponseBytes ?? DEFAULTS.maxResponseBytes,
    },
    retry: {
      maxRetries: file.retry?.maxRetries ?? DEFAULTS.maxRetries,
      max429Retries: file.retry?.max429Retries ?? DEFAULTS.max429Retries,
      backoffBaseMs: file.retry?.backoffBaseMs ?? DEFAULTS.backoffBaseMs,
      backoffCapMs: file.retry?.backoffCapMs ?? DEFAULTS.backoffCapMs,
      minRetryAfterMs: file.retry?.minRetryAfterMs ?? DEFAULTS.minRetryAfterMs,
    },
    sync: {
      maxFailedShare: file.sync?.maxFailedShare ?? DEFAULTS.maxFailedShare,
      maxRequests,
      reverifyWindowHours: file.sync?.reverifyWindowHours ?? 24,
      historyOverlapRows: file.sync?.historyOverlapRows ?? 20,
      maxRunMs: (file.sync?.maxRunSeconds ?? DEFAULTS.maxRunMs / 1000) * 1000,
    },
    storage: {
      walCapBytes: Math.round((file.storage?.walCapMegabytes ?? DEFAULTS.walCapBytes / 1048576) * 1048576),
      walCheckIntervalMs: file.storage?.walCheckIntervalMs ?? DEFAULTS.walCheckIntervalMs,
    },
    schedule: {
      incremental: file.schedule?.incremental ?? "*/5 * * * *",
      full: file.schedule?.full ?? "17 3 * * *",
    },
    daemon: { host, port: Number(portStr), readyMaxAgeSeconds: file.daemon?.readyMaxAgeSeconds ?? 1800 },
  };
}

/** A config file is a few hundred bytes; anything near this is not one (or is /dev/zero). */
const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

function readConfigFile(path: string): ConfigFile {
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
  const parsed = ConfigFile.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => {
      const where = i.path.length ? i.path.join(".") : "(top level)";
      if (i.code === "unrecognized_keys") {
        const allowed = allowedKeysAt(i.path);
        return (
          `${where === "(top level)" ? "" : where + ": "}unknown key(s) ${i.keys.map((k) => `"${clip(k)}"`).join(", ")}` +
          (allowed.length ? `; expected only ${allowed.map((k) => `"${k}"`).join(", ")}${didYouMean(i.keys, allowed)}` : "")
        );
      }
      return `${where}: ${i.message}`;
    });
    throw new ConfigError(`config file ${path} is invalid:\n  - ${lines.join("\n  - ")}\nSee config.example.json for every key.`);
  }
  return parsed.data;
}

/**
 * The path of the first key-like name anywhere in the parsed file (objects and arrays),
 * breadth first and without recursion: a deeply nested file must end in a clear error,
 * not a stack overflow. Deeper than any valid config file nests is left to the schema.
 */
function findKeyLikeEntry(root: unknown): string | null {
  const MAX_DEPTH = 32;
  let level: Array<[unknown, string]> = [[root, ""]];
  for (let depth = 0; depth < MAX_DEPTH && level.length; depth++) {
    const next: Array<[unknown, string]> = [];
    for (const [v, path] of level) {
      if (!v || typeof v !== "object") continue;
      for (const [k, child] of Object.entries(v)) {
        const here = Array.isArray(v) ? `${path}[${k}]` : path ? `${path}.${k}` : k;
        if (!Array.isArray(v) && looksLikeKeyName(k)) return here.length > 120 ? `${here.slice(0, 117)}...` : here;
        next.push([child, here]);
      }
    }
    level = next;
  }
  return null;
}

/** The keys the schema allows at `path` (for "unknown key" messages). */
function allowedKeysAt(path: readonly PropertyKey[]): string[] {
  let schema: z.ZodType = ConfigFile;
  for (const seg of path) {
    while (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) schema = schema.unwrap() as z.ZodType;
    if (!(schema instanceof z.ZodObject)) return [];
    const child = (schema.shape as Record<string, z.ZodType>)[String(seg)];
    if (!child) return [];
    schema = child;
  }
  while (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) schema = schema.unwrap() as z.ZodType;
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
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

export function parseBaseUrl(raw: string, source: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Userinfo is masked: a URL that fails to parse may still carry a password.
    const shown = clip(raw.replace(/\/\/[^/@\s]*@/, "//***@"));
    throw new ConfigError(`${source}: "${shown}" is not a URL; expected e.g. https://api.example.com or https://host/prefix`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ConfigError(`${source}: expected an https:// URL, got ${url.protocol}`);
  }
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname)) {
    throw new ConfigError(`${source}: plain http:// is refused except to loopback addresses (the key would travel in clear); use https://`);
  }
  if (url.username || url.password) throw new ConfigError(`${source}: credentials in the URL are not supported; the key comes from INVENTORY_API_KEY`);
  if (url.search || url.hash) throw new ConfigError(`${source}: the base URL must not have a query string or fragment`);
  if (/\/v1\/external\/?$/i.test(url.pathname)) {
    const base = url.origin + url.pathname.replace(/\/v1\/external\/?$/i, "");
    throw new ConfigError(`${source}: the base URL ends with /v1/external, which every endpoint path adds itself (requests would go to …/v1/external/v1/external/…); use ${base}`);
  }
  return url;
}

/** A key file larger than this is not a key file (a wrong path, e.g. a log or a certificate bundle). */
const MAX_KEY_FILE_BYTES = 16 * 1024;
/**
 * Shortest key we accept. Redaction scrubs the key's bytes from every log line and error;
 * a very short key would also match ordinary text, so it could neither be scrubbed nor kept secret.
 */
const MIN_KEY_LENGTH = 8;

/**
 * The developer key: INVENTORY_API_KEY, or the contents of INVENTORY_API_KEY_FILE
 * (one trailing newline trimmed). Warns through `warn` when the file is readable by
 * group or others. No message here ever contains the key's value.
 */
export function loadKey(env: NodeJS.ProcessEnv = process.env, warn: (msg: string) => void = () => {}): Secret {
  const direct = env.INVENTORY_API_KEY;
  const file = env.INVENTORY_API_KEY_FILE;
  if (direct && file) throw new ConfigError("both INVENTORY_API_KEY and INVENTORY_API_KEY_FILE are set; set only one");
  if (direct) return new Secret(checkKey(direct.trim(), "INVENTORY_API_KEY"));
  if (file) {
    const what = `INVENTORY_API_KEY_FILE (${file})`;
    let st;
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

function intFlag(name: string, v: string, min: number, max: number): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) throw new ConfigError(`${name}: expected a whole number from ${min} to ${max}, got "${v}"`);
  return n;
}
function numFlag(name: string, v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new ConfigError(`${name}: expected a positive number, got "${v}"`);
  return n;
}
function splitHostPort(s: string): [string, string] {
  const i = s.lastIndexOf(":");
  return [s.slice(0, i).replace(/^\[|\]$/g, ""), s.slice(i + 1)];
}

/** Workspace ids are UUIDs (the API document): a typo is caught before any request is made. */
function checkWorkspaceId(id: string | null): string | null {
  if (id !== null && !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) {
    throw new ConfigError(`expected workspace id "${id}" (--expected-workspace-id / expectedWorkspace.id) is not a UUID such as 00000000-0000-4000-8000-000000000000`);
  }
  return id;
}
