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
  maxWaitMs: number;
  http: { connectTimeoutMs: number; responseTimeoutMs: number; maxResponseBytes: number };
  retry: { maxRetries: number; max429Retries: number; backoffBaseMs: number; backoffCapMs: number; minRetryAfterMs: number };
  sync: { maxFailedShare: number; maxRequests: number | null; reverifyWindowHours: number; historyOverlapRows: number };
  schedule: { incremental: string; full: string };
  daemon: { host: string; port: number; readyMaxAgeSeconds: number };
}

/** Keys under which people put a key by mistake. */
const KEY_NAMES = /^(api[-_]?key|apikey|key|token|developer[-_]?key|secret|authorization|bearer|password)$/i;

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
    expectedWorkspaceId: flags.expectedWorkspaceId ?? file.expectedWorkspace?.id ?? null,
    expectedWorkspaceName: flags.expectedWorkspaceName ?? file.expectedWorkspace?.name ?? null,
    requestsPerSecond,
    maxWaitMs: (file.rateLimit?.maxWaitSeconds ?? DEFAULTS.maxWaitMs / 1000) * 1000,
    http: {
      connectTimeoutMs: file.http?.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      responseTimeoutMs: file.http?.responseTimeoutMs ?? DEFAULTS.responseTimeoutMs,
      maxResponseBytes: file.http?.maxResponseBytes ?? DEFAULTS.maxResponseBytes,
    },
    retry: {
      maxRetries: file.retry?.maxRetries ?? DEFAULTS.maxRetries,
      max429Retries: DEFAULTS.max429Retries,
      backoffBaseMs: file.retry?.backoffBaseMs ?? DEFAULTS.backoffBaseMs,
      backoffCapMs: file.retry?.backoffCapMs ?? DEFAULTS.backoffCapMs,
      minRetryAfterMs: file.retry?.minRetryAfterMs ?? DEFAULTS.minRetryAfterMs,
    },
    sync: {
      maxFailedShare: file.sync?.maxFailedShare ?? DEFAULTS.maxFailedShare,
      maxRequests,
      reverifyWindowHours: file.sync?.reverifyWindowHours ?? 24,
      historyOverlapRows: file.sync?.historyOverlapRows ?? 20,
    },
    schedule: {
      incremental: file.schedule?.incremental ?? "*/5 * * * *",
      full: file.schedule?.full ?? "17 3 * * *",
    },
    daemon: { host, port: Number(portStr), readyMaxAgeSeconds: file.daemon?.readyMaxAgeSeconds ?? 1800 },
  };
}

function readConfigFile(path: string): ConfigFile {
  if (!existsSync(path)) throw new ConfigError(`config file ${path} does not exist (--config / INVENTORY_CONFIG)`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  const keyAt = findKeyLikeEntry(raw, "");
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
      if (i.code === "unrecognized_keys") return `${where === "(top level)" ? "" : where + ": "}unknown key(s) ${i.keys.map((k) => `"${k}"`).join(", ")}`;
      return `${where}: ${i.message}`;
    });
    throw new ConfigError(`config file ${path} is invalid:\n  - ${lines.join("\n  - ")}\nSee config.example.json for every key.`);
  }
  return parsed.data;
}

function findKeyLikeEntry(v: unknown, path: string): string | null {
  if (!v || typeof v !== "object" || Array.isArray(v)) return null;
  for (const [k, child] of Object.entries(v)) {
    const here = path ? `${path}.${k}` : k;
    if (KEY_NAMES.test(k)) return here;
    const deeper = findKeyLikeEntry(child, here);
    if (deeper) return deeper;
  }
  return null;
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
    throw new ConfigError(`${source}: "${raw}" is not a URL; expected e.g. https://api.example.com or https://host/prefix`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ConfigError(`${source}: expected an https:// URL, got ${url.protocol}`);
  }
  if (url.protocol === "http:" && !isLoopbackHost(url.hostname)) {
    throw new ConfigError(`${source}: plain http:// is refused except to loopback addresses (the key would travel in clear); use https://`);
  }
  if (url.username || url.password) throw new ConfigError(`${source}: credentials in the URL are not supported; the key comes from INVENTORY_API_KEY`);
  if (url.search || url.hash) throw new ConfigError(`${source}: the base URL must not have a query string or fragment`);
  return url;
}

/**
 * The developer key: INVENTORY_API_KEY, or the contents of INVENTORY_API_KEY_FILE
 * (one trailing newline trimmed). Warns through `warn` when the file is readable by
 * group or others.
 */
export function loadKey(env: NodeJS.ProcessEnv = process.env, warn: (msg: string) => void = () => {}): Secret {
  const direct = env.INVENTORY_API_KEY;
  const file = env.INVENTORY_API_KEY_FILE;
  if (direct && file) throw new ConfigError("both INVENTORY_API_KEY and INVENTORY_API_KEY_FILE are set; set only one");
  if (direct) {
    if (/\s/.test(direct.trim()) || direct.trim() === "") throw new ConfigError("INVENTORY_API_KEY is empty or contains whitespace");
    return new Secret(direct.trim());
  }
  if (file) {
    if (!existsSync(file)) throw new ConfigError(`INVENTORY_API_KEY_FILE: ${file} does not exist`);
    const st = statSync(file);
    if (!st.isFile()) throw new ConfigError(`INVENTORY_API_KEY_FILE: ${file} is not a file`);
    if (st.mode & 0o077) warn(`key file ${file} is readable by group or others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`);
    const value = readFileSync(file, "utf8").replace(/\r?\n$/, "");
    if (value === "" || /\s/.test(value)) throw new ConfigError(`INVENTORY_API_KEY_FILE: ${file} is empty or holds whitespace besides a final newline`);
    return new Secret(value);
  }
  throw new ConfigError(
    "no developer key: set INVENTORY_API_KEY, or INVENTORY_API_KEY_FILE to a file holding the key. " +
      "To try inventory-mirror without one, run 'inventory-mirror simulate' and use the key it prints.",
  );
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
