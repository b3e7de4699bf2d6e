/**
 * People's input: every configuration mistake ends in exit 2, before any request, with a
 * message that names the key (or flag, or variable) and what was expected; a key offered
 * anywhere but INVENTORY_API_KEY / INVENTORY_API_KEY_FILE is refused with where it goes,
 * and never echoed. Then: the files a run creates are owner-only, and a database or a key
 * of another workspace ends in exit 4 with both workspaces shown and nothing written.
 *
 * Through the real CLI against the simulator, which must see zero requests in every
 * exit-2 case. test/e2e/exit-codes.test.ts covers the first few of each kind (unknown
 * option, --api-key, no key, http to a remote host, INVENTORY_BASE_URL not a URL, the
 * --db directory, four config-file mistakes, apiKey in the file); this file covers the rest.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { z } from "zod";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { ConfigSchema, looksLikeKeyName } from "../../src/core/config.js";
import { COMMANDS } from "../../src/cli/options.js";
import { runCli, spawnCli, type CliResult } from "../helpers/cli.js";

const KEY = "imk_config_test_7c1e9a0b2d4f6e8a1c3b5d7f";
let sim: RunningSimulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 31, skus: 3, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-config-"));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

let seq = 0;
/** A config file (an object as JSON, or raw text) in a directory of its own. */
function configFile(content: unknown): string {
  const d = join(dir, `cfg-${++seq}`);
  mkdirSync(d);
  const p = join(d, "config.json");
  writeFileSync(p, typeof content === "string" ? content : JSON.stringify(content));
  return p;
}
function keyFile(content: string | Buffer, mode = 0o600): string {
  const p = join(dir, `key-${++seq}`);
  writeFileSync(p, content);
  chmodSync(p, mode);
  return p;
}
const env = (extra: Record<string, string | undefined> = {}) => ({ INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: join(dir, "x.db"), ...extra });

interface Mistake {
  name: string;
  args: () => string[];
  env?: () => Record<string, string | undefined>;
  /** Every pattern must match stderr. */
  says: RegExp[];
  /** Must not appear anywhere in the output (a value that may be a secret). */
  never?: string[];
}

const cfg =
  (content: unknown, command = "sync") =>
  () => [command, ...(command === "sync" ? ["--full"] : []), "--config", configFile(content)];

const MISTAKES: Mistake[] = [
  // ---- unknown keys: named, with what is allowed there, and a typo's likely meaning
  {
    name: "unknown top-level key (a typo)",
    args: cfg({ baseURL: "https://x" }),
    says: [/unknown key\(s\) "baseURL"; expected only "\$schema", "baseUrl", "db"/, /did you mean "baseUrl" for "baseURL"\?/],
  },
  { name: "unknown nested key", args: cfg({ http: { timeout: 5 } }), says: [/http: unknown key\(s\) "timeout"; expected only "connectTimeoutMs", "responseTimeoutMs", "maxResponseBytes"/] },
  { name: "unknown nested key (a typo)", args: cfg({ retry: { maxRetry: 3 } }), says: [/retry: unknown key\(s\) "maxRetry".*did you mean "maxRetries"/] },
  { name: "unknown key two levels down", args: cfg({ expectedWorkspace: { uuid: "x" } }), says: [/expectedWorkspace: unknown key\(s\) "uuid"; expected only "id", "name"/] },
  { name: "unknown schedule", args: cfg({ schedule: { hourly: "0 * * * *" } }), says: [/schedule: unknown key\(s\) "hourly"; expected only "incremental", "full"/] },

  // ---- wrong types and ranges
  { name: "concurrency 0", args: cfg({ concurrency: 0 }), says: [/concurrency: Too small: expected number to be >0/] },
  { name: "concurrency 1000", args: cfg({ concurrency: 1000 }), says: [/concurrency: Too big: expected number to be <=64/] },
  { name: "a number as a string", args: cfg({ http: { responseTimeoutMs: "5000" } }), says: [/http\.responseTimeoutMs: Invalid input: expected number, received string/] },
  { name: "a fraction where a whole number goes", args: cfg({ retry: { maxRetries: 1.5 } }), says: [/retry\.maxRetries: Invalid input: expected int, received number/] },
  { name: "a negative timeout", args: cfg({ http: { connectTimeoutMs: -1 } }), says: [/http\.connectTimeoutMs: Too small/] },
  { name: "a share above 1", args: cfg({ sync: { maxFailedShare: 2 } }), says: [/sync\.maxFailedShare: Too big: expected number to be <=1/] },
  { name: "logLevel not a level", args: cfg({ logLevel: "loud" }), says: [/logLevel: Invalid option: expected one of "fatal"\|"error"\|"warn"\|"info"\|"debug"\|"trace"\|"silent"/] },
  { name: "a string where an object goes", args: cfg({ expectedWorkspace: "Acme" }), says: [/expectedWorkspace: Invalid input: expected object, received string/] },
  { name: "a boolean where an object goes", args: cfg({ rateLimit: true }), says: [/rateLimit: Invalid input: expected object, received boolean/] },
  { name: "baseUrl a number", args: cfg({ baseUrl: 42 }), says: [/baseUrl: Invalid input: expected string, received number/] },
  { name: "daemon.listen without a port", args: cfg({ daemon: { listen: "localhost" } }), says: [/daemon\.listen: expected host:port such as 127\.0\.0\.1:9464/] },
  {
    name: "every mistake of a file at once",
    args: cfg({ concurrency: "4", http: { timeout: 1 }, schedule: { full: "nightly" }, colour: 1 }),
    says: [/concurrency: .*expected number/, /http: unknown key\(s\) "timeout"/, /schedule\.full: expected a cron expression/, /unknown key\(s\) "colour"/],
  },
  { name: "a top-level array", args: cfg([{ baseUrl: "https://x" }]), says: [/\(top level\): Invalid input: expected object, received array/] },
  { name: "not JSON", args: cfg("{ baseUrl: 'https://x' }"), says: [/config file .*config\.json is not valid JSON/] },
  { name: "an empty file", args: cfg(""), says: [/config file .*config\.json is not valid JSON/] },
  {
    name: "/dev/zero as the config file (not a regular file; it was read until memory ran out)",
    args: () => ["sync", "--config", "/dev/zero"],
    says: [/config file \/dev\/zero is not a regular file/],
  },
  { name: "a directory as the config file", args: () => ["check", "--config", dir], says: [/is not a regular file \(--config \/ INVENTORY_CONFIG\)/] },
  { name: "a 2 MB config file", args: cfg(`{"logLevel": "info", "pad": "${"x".repeat(2 * 1024 * 1024)}"}`), says: [/config\.json is \d+ bytes, more than a config file's 1048576/] },
  { name: "a missing config file", args: () => ["sync", "--config", join(dir, "nope.json")], says: [/config file .*nope\.json does not exist \(--config \/ INVENTORY_CONFIG\)/] },
  { name: "a missing config file from INVENTORY_CONFIG", args: () => ["check"], env: () => ({ INVENTORY_CONFIG: join(dir, "nope.json") }), says: [/config file .*nope\.json does not exist/] },
  {
    name: "a config nested 100000 levels deep: a clear error, not a stack overflow",
    args: cfg('{"a":'.repeat(100_000) + "1" + "}".repeat(100_000)),
    says: [/unknown key\(s\) "a"; expected only/],
  },

  // ---- cron expressions
  { name: "schedule.incremental with three fields", args: cfg({ schedule: { incremental: "* * *" } }), says: [/schedule\.incremental: expected a cron expression such as '\*\/5 \* \* \* \*'/] },
  { name: "schedule.full with minute 61", args: cfg({ schedule: { full: "61 * * * *" } }), says: [/schedule\.full: expected a cron expression/] },
  { name: "schedule.full as a number", args: cfg({ schedule: { full: 5 } }), says: [/schedule\.full: Invalid input: expected string, received number/] },

  // ---- the base URL, from each source
  {
    name: "baseUrl (file) not a URL",
    args: cfg({ baseUrl: "inventory.example.com" }),
    env: () => ({ INVENTORY_BASE_URL: undefined }),
    says: [/baseUrl \(config file\): "inventory\.example\.com" is not a URL; expected e\.g\. https:\/\/api\.example\.com/],
  },
  { name: "--base-url not http(s)", args: () => ["check", "--base-url", "ftp://inventory.example.com"], says: [/--base-url: expected an https:\/\/ URL, got ftp:/] },
  { name: "a file: base URL", args: () => ["check"], env: () => ({ INVENTORY_BASE_URL: "file:///etc/passwd" }), says: [/INVENTORY_BASE_URL: expected an https:\/\/ URL, got file:/] },
  {
    name: "plain http to a non-loopback host (file)",
    args: cfg({ baseUrl: "http://inventory.example.com" }),
    env: () => ({ INVENTORY_BASE_URL: undefined }),
    says: [/baseUrl \(config file\): plain http:\/\/ is refused except to loopback addresses .*use https:\/\//],
  },
  {
    name: "plain http to a private address (env)",
    args: () => ["check"],
    env: () => ({ INVENTORY_BASE_URL: "http://10.0.0.5:8080" }),
    says: [/INVENTORY_BASE_URL: plain http:\/\/ is refused except to loopback/],
  },
  { name: "plain http to a name that only looks loopback", args: () => ["check", "--base-url", "http://127.0.0.1.nip.io"], says: [/--base-url: plain http:\/\/ is refused except to loopback/] },
  { name: "plain http to localhost.evil", args: () => ["check", "--base-url", "http://localhost.evil.example"], says: [/--base-url: plain http:\/\/ is refused/] },
  {
    name: "a base URL with credentials",
    args: () => ["check", "--base-url", "https://me:hunter2-password@inventory.example.com"],
    says: [/--base-url: credentials in the URL are not supported; the key comes from INVENTORY_API_KEY/],
    never: ["hunter2-password"],
  },
  {
    name: "a broken URL with credentials is not echoed",
    args: () => ["check", "--base-url", "https://me:hunter2-password@inv entory"],
    says: [/--base-url: "https:\/\/\*\*\*@inv entory" is not a URL/],
    never: ["hunter2-password"],
  },
  {
    name: "a base URL with a query string",
    args: () => ["check", "--base-url", "https://inventory.example.com/?token=abc"],
    says: [/--base-url: the base URL must not have a query string or fragment/],
  },

  // ---- the database path
  {
    name: "db (file, relative to the file) in a missing directory",
    args: cfg({ db: "missing/mirror.db" }),
    env: () => ({ INVENTORY_DB: undefined }),
    says: [/database directory .*cfg-\d+\/missing does not exist \(db: .*missing\/mirror\.db\); create it or choose another --db/],
  },
  { name: "INVENTORY_DB in a missing directory", args: () => ["sync"], env: () => ({ INVENTORY_DB: join(dir, "no-such-dir", "x.db") }), says: [/database directory .*no-such-dir does not exist/] },

  // ---- flags
  { name: "--max-rps not positive", args: () => ["sync", "--max-rps=-1"], says: [/--max-rps: expected a positive number, got "-1"/] },
  { name: "--max-rps zero", args: () => ["sync", "--max-rps", "0"], says: [/--max-rps: expected a positive number, got "0"/] },
  { name: "--max-requests zero", args: () => ["sync", "--max-requests", "0"], says: [/--max-requests: expected a whole number from 1 to/] },
  { name: "a stray argument", args: () => ["sync", "full"], says: [/unexpected argument "full" for 'sync'/] },
  {
    name: "demo --log-level not a level",
    args: () => ["demo", "--log-level", "loud", "--db", join(dir, "demo-never", "d.db")],
    says: [/--log-level: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"/],
  },
];

if (COMMANDS.some((c) => c.name === "daemon")) {
  MISTAKES.push({ name: "daemon --listen without a port", args: () => ["daemon", "--listen", "localhost"], says: [/--listen: expected host:port such as 127\.0\.0\.1:9464/] });
}

/** The key offered in the config file, under the names people use. Never echoed. */
const KEY_IN_FILE: Array<[string, unknown]> = [
  ["api_key", { api_key: "s3cret-in-the-file-1" }],
  ["token", { token: "s3cret-in-the-file-2" }],
  ["INVENTORY_API_KEY", { INVENTORY_API_KEY: "s3cret-in-the-file-3" }],
  ["accessToken", { accessToken: "s3cret-in-the-file-4" }],
  ["developerKey", { developerKey: "s3cret-in-the-file-5" }],
  ["credentials", { credentials: { user: "x", pass: "s3cret-in-the-file-6" } }],
  ["apiKeyFile", { apiKeyFile: "/run/secrets/s3cret-in-the-file-7" }],
  ["http.authorization", { http: { authorization: "Bearer s3cret-in-the-file-8" } }],
  ["headers.Authorization", { headers: { Authorization: "Bearer s3cret-in-the-file-9" } }],
  ["auth.bearer", { auth: { bearer: "s3cret-in-the-file-10" } }],
  ["keys[0].secret", { keys: [{ secret: "s3cret-in-the-file-11" }] }],
];
for (const [path, content] of KEY_IN_FILE) {
  const value = JSON.stringify(content).match(/s3cret-in-the-file-\d+/)![0];
  MISTAKES.push({
    name: `a key in the config file as ${path}`,
    args: cfg(content),
    says: [new RegExp(`"${path.replace(/[.[\]]/g, "\\$&")}" looks like a developer key\\. The key is never read from the config file: set INVENTORY_API_KEY, or INVENTORY_API_KEY_FILE`)],
    never: [value],
  });
}

/** The key offered as a flag, in the spellings people use, on every command that takes options. */
const KEY_FLAGS: Array<[string, string[]]> = [
  ["key", ["sync", "--key", "s3cret-flag-1"]],
  ["token", ["check", "--token=s3cret-flag-2"]],
  ["apikey", ["sync", "--apikey", "s3cret-flag-3"]],
  ["developer-key", ["daemon", "--developer-key", "s3cret-flag-4"]],
  ["secret", ["check", "--secret", "s3cret-flag-5"]],
  ["api-token", ["sync", "--api-token", "s3cret-flag-6"]],
  ["access-token", ["status", "--access-token", "s3cret-flag-7"]],
  ["bearer", ["check", "--bearer", "s3cret-flag-8"]],
  ["authorization", ["sync", "--authorization", "Bearer s3cret-flag-9"]],
  ["key-file", ["daemon", "--key-file", "/run/s3cret-flag-10"]],
  ["password", ["check", "-password", "s3cret-flag-11"]],
  ["API_KEY", ["sync", "--API_KEY=s3cret-flag-12"]],
];
for (const [flag, args] of KEY_FLAGS) {
  if (!COMMANDS.some((c) => c.name === args[0])) continue; // a command not (yet) in the table
  MISTAKES.push({
    name: `a key as --${flag} (${args[0]})`,
    args: () => args,
    says: [new RegExp(`--${flag} is not accepted: the developer key is read only from the environment\\. Set INVENTORY_API_KEY, or INVENTORY_API_KEY_FILE`)],
    never: [args.join(" ").match(/s3cret-flag-\d+/)![0]],
  });
}

/** The key's own variables. */
MISTAKES.push(
  {
    name: "both INVENTORY_API_KEY and INVENTORY_API_KEY_FILE",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY_FILE: keyFile(`${KEY}\n`) }),
    says: [/both INVENTORY_API_KEY and INVENTORY_API_KEY_FILE are set; set only one/],
  },
  {
    name: "a missing key file",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: undefined, INVENTORY_API_KEY_FILE: join(dir, "no-key-here") }),
    says: [/INVENTORY_API_KEY_FILE \(.*no-key-here\): the file does not exist; create it with the key on one line, or fix the path/],
  },
  {
    name: "an empty key file",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: undefined, INVENTORY_API_KEY_FILE: keyFile("") }),
    says: [/INVENTORY_API_KEY_FILE \(.*\) is empty; expected the developer key/],
  },
  {
    name: "a key file with only a newline",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: undefined, INVENTORY_API_KEY_FILE: keyFile("\n") }),
    says: [/INVENTORY_API_KEY_FILE \(.*\) is empty/],
  },
  {
    name: "a key file of two lines",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: undefined, INVENTORY_API_KEY_FILE: keyFile(`${KEY}\nsecond-line-s3cret\n`) }),
    says: [/INVENTORY_API_KEY_FILE \(.*\) holds whitespace inside the key; expected the key alone on one line/],
    never: ["second-line-s3cret", KEY],
  },
  {
    name: "a key file that is a directory",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: undefined, INVENTORY_API_KEY_FILE: dir }),
    says: [/INVENTORY_API_KEY_FILE \(.*\): not a regular file; expected a file holding the key on one line/],
  },
  {
    name: "a key file far too large to be one",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: undefined, INVENTORY_API_KEY_FILE: keyFile("x".repeat(100_000)) }),
    says: [/INVENTORY_API_KEY_FILE \(.*\): 100000 bytes is too large for a key file/],
  },
  {
    name: "a key with a space inside",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: "imk_part one-s3cret" }),
    says: [/INVENTORY_API_KEY holds whitespace inside the key; expected the key alone on one line/],
    never: ["one-s3cret"],
  },
  { name: "a key only of spaces", args: () => ["check"], env: () => ({ INVENTORY_API_KEY: "   " }), says: [/INVENTORY_API_KEY is empty; expected the developer key/] },
  {
    name: "a key too short to be scrubbed from logs",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: "abc" }),
    says: [/INVENTORY_API_KEY is 3 characters long; expected a developer key of at least 8/],
  },
  {
    name: "a key with a quote (would escape past log scrubbing)",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: 'imk_"quoted"_s3cret' }),
    says: [/INVENTORY_API_KEY holds characters a developer key cannot contain; expected visible ASCII without quotes or backslashes/],
    never: ["quoted"],
  },
  {
    name: "a key with non-ASCII characters",
    args: () => ["check"],
    env: () => ({ INVENTORY_API_KEY: "imk_schlüssel_s3cret" }),
    says: [/INVENTORY_API_KEY holds characters a developer key cannot contain/],
    never: ["schlüssel"],
  },
);

describe.concurrent("exit 2, a message naming the key and what was expected, and no request", () => {
  for (const m of MISTAKES) {
    it(m.name, async ({ expect }) => {
      const before = sim.stats().requests;
      const r = await runCli(m.args(), { env: env(m.env?.() ?? {}), cwd: dir, timeoutMs: 30_000 });
      const diag = `exit ${r.code}\nstderr: ${r.stderr}\nstdout: ${r.stdout}`;
      expect(r.code, diag).toBe(2);
      for (const re of m.says) expect(r.stderr, diag).toMatch(re);
      expect(r.stderr, diag).toMatch(/^inventory-mirror \w+: configuration error: /);
      for (const secret of m.never ?? []) expect(r.stdout + r.stderr).not.toContain(secret);
      expect(existsSync(join(dir, "data")), "a refused command created ./data").toBe(false);
      expect(existsSync(join(dir, "demo-never")), "a refused demo created its directory").toBe(false);
      expect(r.stderr, "a stack trace").not.toMatch(/\n\s+at .+:\d+:\d+/);
      expect(sim.stats().requests - before, "a request was made").toBe(0);
    });
  }
});

describe("exit 2 leaves nothing behind and requests nothing", () => {
  it("no request was made by any of the cases above (the simulator's total)", () => {
    expect(sim.stats().requests).toBe(0);
  });
});

describe("a key file that works", () => {
  it("group-readable: a warning that says what to do, then it works", async () => {
    const s = await startSimulator({ seed: 32, skus: 2, apiKey: KEY });
    try {
      const r = await runCli(["check"], { env: { INVENTORY_BASE_URL: s.baseUrl, INVENTORY_API_KEY_FILE: keyFile(`${KEY}\n`, 0o640) } });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/key file .* is readable by group or others \(mode 640\); chmod 600 it/);
      expect(r.stdout).toMatch(/workspace id:/);
      expect(r.stderr + r.stdout).not.toContain(KEY);
    } finally {
      await s.close();
    }
  });

  it("trailing spaces and a newline are trimmed, as they are from INVENTORY_API_KEY", async () => {
    const s = await startSimulator({ seed: 32, skus: 2, apiKey: KEY });
    try {
      const r = await runCli(["check", "--json"], { env: { INVENTORY_BASE_URL: s.baseUrl, INVENTORY_API_KEY_FILE: keyFile(`  ${KEY}  \n`, 0o600) } });
      expect(r.code, r.stderr).toBe(0);
      expect(s.stats().requests).toBe(1);
    } finally {
      await s.close();
    }
  });

  it("mode 0600 with CRLF: no warning, the line ending trimmed", async () => {
    const s = await startSimulator({ seed: 32, skus: 2, apiKey: KEY });
    try {
      const r = await runCli(["check", "--json"], { env: { INVENTORY_BASE_URL: s.baseUrl, INVENTORY_API_KEY_FILE: keyFile(`${KEY}\r\n`, 0o600) } });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toMatch(/readable by group/);
      expect(s.stats().requests).toBe(1);
    } finally {
      await s.close();
    }
  });
});

describe("the broad key-name check has no false positives", () => {
  it("no key of the config file's schema looks like a key name", () => {
    const names: string[] = [];
    const walk = (schema: z.ZodType, path: string) => {
      for (;;) {
        if (schema instanceof z.ZodPipe) schema = schema.in as z.ZodType;
        else if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable || schema instanceof z.ZodDefault || schema instanceof z.ZodPrefault) schema = schema.unwrap() as z.ZodType;
        else break;
      }
      if (!(schema instanceof z.ZodObject)) return;
      for (const [k, child] of Object.entries(schema.shape as Record<string, z.ZodType>)) {
        names.push(path + k);
        walk(child, `${path}${k}.`);
      }
    };
    walk(ConfigSchema, "");
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((n) => looksLikeKeyName(n.split(".").pop()!))).toEqual([]);
  });

  it("no option of any command looks like a key flag", () => {
    const flagged = COMMANDS.flatMap((c) => c.options.map((o) => `${c.name} --${o.name}`)).filter((f) => looksLikeKeyName(f.split("--")[1]!));
    expect(flagged).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("files a run creates are owner-only", () => {
  const mode = (p: string) => (statSync(p).mode & 0o777).toString(8);

  it("the database and its .lock are created 0600, even under umask 000", async () => {
    const d = mkdtempSync(join(dir, "perm-"));
    const db = join(d, "mirror.db");
    const old = process.umask(0);
    let r: CliResult;
    try {
      r = await runCli(["sync", "--full"], { env: env({ INVENTORY_DB: db }) });
    } finally {
      process.umask(old);
    }
    expect(r.code, r.stderr).toBe(0);
    const files = readdirSync(d);
    expect(files).toContain("mirror.db");
    expect(files).toContain("mirror.db.lock");
    for (const f of files) expect(`${f} ${mode(join(d, f))}`).toBe(`${f} 600`);
  });

  it("while a sync holds it open, -wal and -shm are 0600 too (under umask 000)", async () => {
    // Detail answers slowly, so the run sits with the database open after the list page is saved.
    const s = await startSimulator({ seed: 34, skus: 2, apiKey: KEY, faults: [{ kind: "slow", endpoint: "detail", delayMs: 1_500 }] });
    const d = mkdtempSync(join(dir, "perm-"));
    const db = join(d, "mirror.db");
    const old = process.umask(0);
    const child = spawnCli(["sync", "--full"], { env: env({ INVENTORY_DB: db, INVENTORY_BASE_URL: s.baseUrl }) });
    process.umask(old);
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    child.stdout!.resume();
    child.stderr!.resume();
    try {
      const want = ["mirror.db", "mirror.db-shm", "mirror.db-wal", "mirror.db.lock"];
      const deadline = Date.now() + 10_000;
      while (!want.every((f) => existsSync(join(d, f))) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
      const files = readdirSync(d).sort();
      expect(files).toEqual(expect.arrayContaining(want));
      for (const f of files) expect(`${f} ${mode(join(d, f))}`).toBe(`${f} 600`);
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGTERM");
      await exited;
      await s.close();
    }
  });
});

describe("exit 4: another workspace, both shown, nothing written", () => {
  let other: RunningSimulator;
  beforeAll(async () => {
    other = await startSimulator({ seed: 33, skus: 2, apiKey: KEY, workspaceName: "Other Workspace" });
  });
  afterAll(async () => {
    await other?.close();
  });
  const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");

  it("a database that holds another workspace: both ids and names, and not one byte or file written", async () => {
    const d = mkdtempSync(join(dir, "owned-"));
    const db = join(d, "mirror.db");
    expect((await runCli(["sync", "--full"], { env: env({ INVENTORY_DB: db }) })).code).toBe(0);
    const filesBefore = readdirSync(d).sort();
    const before = sha(db);
    const r = await runCli(["sync", "--full"], { env: env({ INVENTORY_DB: db, INVENTORY_BASE_URL: other.baseUrl }) });
    expect(r.code, r.stderr).toBe(4);
    const mine = sim.groundTruth().workspace.workspace;
    const theirs = other.groundTruth().workspace.workspace;
    expect(r.stderr).toContain(`this database belongs to workspace ${mine.id} ("${mine.name}")`);
    expect(r.stderr).toContain(`but the key is connected to workspace ${theirs.id} ("${theirs.name}")`);
    expect(r.stderr).toMatch(/nothing was written/);
    expect(sha(db)).toBe(before);
    // The read-only look at the file's workspace leaves SQLite's side files behind (see the
    // report: store/db.ts peekDatabase), but no data: the WAL, if any, is empty.
    expect(filesBefore).toEqual(["mirror.db", "mirror.db.lock"]);
    expect(
      readdirSync(d)
        .filter((f) => !["mirror.db-wal", "mirror.db-shm"].includes(f))
        .sort(),
    ).toEqual(filesBefore);
    if (existsSync(`${db}-wal`)) expect(statSync(`${db}-wal`).size).toBe(0);
    // Only the workspace endpoint was asked.
    expect(other.stats().byEndpoint).toMatchObject({ workspace: 1, locations: 0, list: 0, detail: 0, history: 0 });
  });

  it("expectedWorkspace in the config file: both workspaces shown, no database created", async () => {
    const d = mkdtempSync(join(dir, "expected-"));
    const db = join(d, "mirror.db");
    const r = await runCli(["sync", "--full", "--config", configFile({ expectedWorkspace: { id: "11111111-1111-4111-8111-111111111111", name: "Acme Production" } })], {
      env: env({ INVENTORY_DB: db }),
    });
    expect(r.code, r.stderr).toBe(4);
    const ws = sim.groundTruth().workspace.workspace;
    expect(r.stderr).toContain(`the key is connected to workspace ${ws.id} ("${ws.name}")`);
    expect(r.stderr).toContain(`not the expected workspace (id 11111111-1111-4111-8111-111111111111, name "Acme Production")`);
    expect(existsSync(db)).toBe(false);
    // Only the writer lock, taken before any request so a second process costs no quota.
    expect(readdirSync(d).filter((f) => f !== "mirror.db.lock")).toEqual([]);
  });
});
