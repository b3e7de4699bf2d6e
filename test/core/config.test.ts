/**
 * loadConfig: one schema, defaults from DEFAULTS, and the overlay order
 * defaults < config file < environment < flags, key by key.
 */
import { afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULTS } from "../../src/core/defaults.js";
import { ConfigError } from "../../src/core/errors.js";
import { loadConfig, type Flags, type ResolvedConfig } from "../../src/core/config.js";

const dir = mkdtempSync(join(tmpdir(), "im-config-unit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let seq = 0;
function configFile(content: unknown): string {
  const p = join(dir, `config-${++seq}.json`);
  writeFileSync(p, JSON.stringify(content));
  return p;
}

/** The value at a dotted path of the resolved config. */
function at(config: ResolvedConfig, path: string): unknown {
  return path.split(".").reduce<unknown>((node, seg) => (node as Record<string, unknown>)[seg], config);
}

/** The message loadConfig throws (it must throw a ConfigError). */
function refusal(flags: Flags, env: NodeJS.ProcessEnv = {}): string {
  try {
    loadConfig(flags, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("loadConfig accepted it");
}

interface Layered {
  /** Dotted path in the file and in the resolved config. */
  key: string;
  file: unknown;
  env?: [name: string, value: string];
  flag?: [name: keyof Flags, value: string];
  /** The resolved values from the file, the environment and the flag (when they differ from what was given). */
  resolved?: { file?: unknown; env?: unknown; flag?: unknown };
}

/** Every key a flag or variable stands for, with a distinct value from each source. */
const LAYERED: Layered[] = [
  {
    key: "baseUrl",
    file: "https://file.example",
    env: ["INVENTORY_BASE_URL", "https://env.example"],
    flag: ["baseUrl", "https://flag.example"],
    resolved: { file: "https://file.example/", env: "https://env.example/", flag: "https://flag.example/" },
  },
  { key: "db", file: "from-file.db", env: ["INVENTORY_DB", "from-env.db"], flag: ["db", "from-flag.db"], resolved: { file: join(dir, "from-file.db") } },
  {
    key: "daemon.listen",
    file: "127.0.0.1:1001",
    env: ["INVENTORY_DAEMON_LISTEN", "127.0.0.1:1002"],
    flag: ["listen", "[::1]:1003"],
    resolved: { file: { host: "127.0.0.1", port: 1001 }, env: { host: "127.0.0.1", port: 1002 }, flag: { host: "::1", port: 1003 } },
  },
  { key: "concurrency", file: 3, flag: ["concurrency", "5"], resolved: { flag: 5 } },
  { key: "logLevel", file: "debug", flag: ["logLevel", "error"] },
  { key: "expectedWorkspace.id", file: "11111111-1111-4111-8111-111111111111", flag: ["expectedWorkspaceId", "22222222-2222-4222-8222-222222222222"] },
  { key: "expectedWorkspace.name", file: "File WS", flag: ["expectedWorkspaceName", "Flag WS"] },
  { key: "rateLimit.requestsPerSecond", file: 2, flag: ["maxRps", "7.5"], resolved: { flag: 7.5 } },
  { key: "sync.maxRequests", file: 100, flag: ["maxRequests", "250"], resolved: { flag: 250 } },
];

/** { a: { b: v } } for "a.b". */
function nested(path: string, value: unknown): Record<string, unknown> {
  return path
    .split(".")
    .reverse()
    .reduce<unknown>((inner, seg) => ({ [seg]: inner }), value) as Record<string, unknown>;
}

const shown = (v: unknown) => (v instanceof URL ? v.href : v);

describe("overlay order: defaults < config file < environment < flags", () => {
  for (const l of LAYERED) {
    const config = () => configFile(nested(l.key, l.file));
    const env = l.env ? { [l.env[0]]: l.env[1] } : {};
    const flag: Flags = l.flag ? { [l.flag[0]]: l.flag[1] } : {};
    const expectFile = l.resolved?.file ?? l.file;

    it(`${l.key}: the file's value over the default`, () => {
      const resolved = shown(at(loadConfig({ config: config() }, {}), l.key));
      expect(resolved).toEqual(expectFile);
      expect(resolved).not.toEqual(shown(at(loadConfig({}, {}), l.key)));
    });
    if (l.env) {
      it(`${l.key}: ${l.env[0]} over the file`, () => {
        expect(shown(at(loadConfig({ config: config() }, env), l.key))).toEqual(l.resolved?.env ?? l.env![1]);
      });
    }
    it(`${l.key}: --${l.flag![0]} over ${l.env ? "the environment and " : ""}the file`, () => {
      expect(shown(at(loadConfig({ ...flag, config: config() }, env), l.key))).toEqual(l.resolved?.flag ?? l.flag![1]);
    });
  }

  it("the overlay covers every flag that loadConfig takes", () => {
    const flags = LAYERED.map((l) => l.flag![0]).sort();
    const all: Array<keyof Flags> = ["baseUrl", "concurrency", "db", "expectedWorkspaceId", "expectedWorkspaceName", "listen", "logLevel", "maxRequests", "maxRps"];
    expect(flags).toEqual(all.sort());
  });

  it("INVENTORY_CONFIG names the file; --config wins over it", () => {
    const fromEnv = configFile({ concurrency: 2 });
    const fromFlag = configFile({ concurrency: 4 });
    expect(loadConfig({}, { INVENTORY_CONFIG: fromEnv }).concurrency).toBe(2);
    expect(loadConfig({ config: fromFlag }, { INVENTORY_CONFIG: fromEnv }).concurrency).toBe(4);
  });

  it("an empty variable counts as unset", () => {
    const file = configFile({ baseUrl: "https://file.example", db: "f.db", daemon: { listen: "127.0.0.1:1001" } });
    const c = loadConfig({ config: file }, { INVENTORY_BASE_URL: "", INVENTORY_DB: "", INVENTORY_DAEMON_LISTEN: "" });
    expect([c.baseUrl?.href, c.db, c.daemon.listen.port]).toEqual(["https://file.example/", join(dir, "f.db"), 1001]);
  });

  it("keys the overlay does not touch keep the file's values", () => {
    const c = loadConfig({ config: configFile({ rateLimit: { adaptive: false, maxWaitSeconds: 5 } }), maxRps: "3" }, {});
    expect(c.rateLimit).toEqual({ requestsPerSecond: 3, adaptive: false, maxWaitSeconds: 5 });
  });
});

describe("a flag or variable is checked by its key's rule, with its own name in the message", () => {
  const cases: Array<[string, Flags, NodeJS.ProcessEnv, string]> = [
    ["--concurrency above the key's maximum", { concurrency: "65" }, {}, '--concurrency: expected a whole number from 1 to 64, got "65"'],
    ["--concurrency not a number", { concurrency: "4x" }, {}, '--concurrency: expected a whole number from 1 to 64, got "4x"'],
    ["--max-rps zero", { maxRps: "0" }, {}, '--max-rps: expected a positive number, got "0"'],
    ["--max-requests a fraction", { maxRequests: "2.5" }, {}, `--max-requests: expected a whole number from 1 to ${Number.MAX_SAFE_INTEGER}, got "2.5"`],
    ["--log-level not a level", { logLevel: "loud" }, {}, '--log-level: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"'],
    ["--listen a port too high", { listen: "127.0.0.1:65536" }, {}, '--listen: expected host:port such as 127.0.0.1:9464 or 0.0.0.0:9464, got "127.0.0.1:65536"'],
    ["INVENTORY_BASE_URL not https", {}, { INVENTORY_BASE_URL: "ftp://x.example" }, "INVENTORY_BASE_URL: expected an https:// URL, got ftp:"],
    [
      "--base-url over a good INVENTORY_BASE_URL",
      { baseUrl: "http://remote.example" },
      { INVENTORY_BASE_URL: "https://ok.example" },
      "--base-url: plain http:// is refused except to loopback addresses",
    ],
  ];
  for (const [name, flags, env, message] of cases) {
    it(name, () => {
      expect(refusal(flags, env)).toContain(message);
    });
  }

  it("the file's value of the same key is refused by the same rule, named as the file's", () => {
    expect(refusal({ config: configFile({ concurrency: 65 }) })).toMatch(/config file .* is invalid:\n {2}- concurrency: Too big: expected number to be <=64/);
  });

  it("a flag does not hide a mistake in the file: the value it overrides is still checked", () => {
    expect(refusal({ config: configFile({ concurrency: "4" }), concurrency: "8" })).toMatch(/config file .* is invalid:\n {2}- concurrency: Invalid input: expected number, received string/);
    expect(refusal({ config: configFile({ rateLimit: true }), maxRps: "2" })).toMatch(/rateLimit: Invalid input: expected object, received boolean/);
  });

  it("the file's own mistakes come before a flag's", () => {
    expect(refusal({ config: configFile({ retry: { maxRetry: 1 } }), concurrency: "0" })).toMatch(/^config file .*retry: unknown key\(s\) "maxRetry"/s);
  });
});

/**
 * Where each resolved key's default comes from. A key added to the schema must be added here
 * (the first test fails otherwise), with its DEFAULTS constant, or null for "none".
 */
const DEFAULT_OF: Record<string, unknown> = {
  baseUrl: null,
  db: DEFAULTS.dbPath,
  concurrency: DEFAULTS.concurrency,
  logLevel: DEFAULTS.logLevel,
  "expectedWorkspace.id": null,
  "expectedWorkspace.name": null,
  "rateLimit.requestsPerSecond": DEFAULTS.requestsPerSecond,
  "rateLimit.adaptive": DEFAULTS.adaptiveRate,
  "rateLimit.maxWaitSeconds": DEFAULTS.maxWaitMs / 1000,
  "http.connectTimeoutMs": DEFAULTS.connectTimeoutMs,
  "http.responseTimeoutMs": DEFAULTS.responseTimeoutMs,
  "http.maxResponseBytes": DEFAULTS.maxResponseBytes,
  "retry.maxRetries": DEFAULTS.maxRetries,
  "retry.max429Retries": DEFAULTS.max429Retries,
  "retry.backoffBaseMs": DEFAULTS.backoffBaseMs,
  "retry.backoffCapMs": DEFAULTS.backoffCapMs,
  "retry.minRetryAfterMs": DEFAULTS.minRetryAfterMs,
  "sync.maxFailedShare": DEFAULTS.maxFailedShare,
  "sync.maxRequests": DEFAULTS.maxRequests,
  "sync.reverifyWindowHours": DEFAULTS.reverifyWindowHours,
  "sync.historyOverlapRows": DEFAULTS.historyOverlapRows,
  "sync.maxRunSeconds": DEFAULTS.maxRunMs / 1000,
  "storage.walCapMegabytes": DEFAULTS.walCapBytes / (1024 * 1024),
  "storage.walCheckIntervalMs": DEFAULTS.walCheckIntervalMs,
  "schedule.incremental": DEFAULTS.scheduleIncremental,
  "schedule.full": DEFAULTS.scheduleFull,
  "daemon.listen.host": DEFAULTS.daemonListen.split(":")[0],
  "daemon.listen.port": Number(DEFAULTS.daemonListen.split(":")[1]),
  "publish.postgres.schema": null,
  "publish.postgres.enabled": DEFAULTS.publishPostgresEnabled,
  "publish.postgres.batchChanges": DEFAULTS.publishBatchChanges,
  "daemon.readyMaxAgeSeconds": DEFAULTS.readyMaxAgeSeconds,
  "feed.serve": DEFAULTS.feedServe,
  "feed.longPollSeconds": DEFAULTS.feedLongPollSeconds,
  "feed.retentionDays": DEFAULTS.feedRetentionDays,
  "feed.retentionMaxChanges": DEFAULTS.feedRetentionMaxChanges,
};

function leaves(v: unknown, prefix = ""): Array<[string, unknown]> {
  if (v === null || typeof v !== "object" || v instanceof URL) return [[prefix, v]];
  return Object.entries(v).flatMap(([k, x]) => leaves(x, prefix ? `${prefix}.${k}` : k));
}

describe("every default comes from DEFAULTS", () => {
  it("with no file, no variable and no flag, each key resolves to its DEFAULTS constant", () => {
    expect(Object.fromEntries(leaves(loadConfig({}, {})))).toEqual(DEFAULT_OF);
  });

  it("config.example.json shows those defaults (where it does not show an example value instead)", () => {
    const example = JSON.parse(readFileSync(new URL("../../config.example.json", import.meta.url), "utf8")) as Record<string, unknown>;
    const examples = new Set(["baseUrl", "expectedWorkspace.id", "expectedWorkspace.name", "publish.postgres.schema"]);
    for (const [key, value] of leaves(example)) {
      if (examples.has(key)) continue;
      expect([key, value]).toEqual([key, key === "daemon.listen" ? DEFAULTS.daemonListen : DEFAULT_OF[key]]);
    }
  });

  it("the schema states no default of its own: every .default() and .prefault() takes DEFAULTS (or {} for a section)", () => {
    const source = readFileSync(new URL("../../src/core/config.ts", import.meta.url), "utf8");
    const args = [...source.matchAll(/\.(?:default|prefault)\(([^)]*)\)/g)].map((m) => m[1]!.trim());
    expect(args.length).toBeGreaterThan(20);
    expect(args.filter((a) => a !== "{}" && !a.startsWith("DEFAULTS."))).toEqual([]);
  });
});
