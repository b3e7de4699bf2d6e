/**
 * The CLI's exit-code contract, each code through the real CLI: 2 usage/config,
 * 3 key refused, 4 wrong workspace or a database of another workspace (nothing written),
 * 130 SIGINT, 143 SIGTERM of a one-shot sync, 0 for the daemon's SIGTERM (its normal
 * stop). A stopped sync or daemon leaves no -wal/-shm beside the database.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash } from "node:crypto";
import type { ChildProcess } from "node:child_process";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli, spawnCli } from "../helpers/cli.js";
import { lastRun } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_exit_0a1b2c3d4e5f60718293a4b5";
let sim: RunningSimulator;
let other: RunningSimulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 21, skus: 20, apiKey: KEY });
  other = await startSimulator({ seed: 22, skus: 20, apiKey: KEY, workspaceName: "Other Workspace" });
  dir = mkdtempSync(join(tmpdir(), "im-exit-"));
});
afterAll(async () => {
  await sim?.close();
  await other?.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = (extra: Record<string, string> = {}) => ({ INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: join(dir, "x.db"), ...extra });
const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");

describe("exit 2: usage and configuration errors, before any request", () => {
  const cases: Array<[string, string[], Record<string, string>, RegExp]> = [
    ["unknown option", ["sync", "--fulll"], {}, /Unknown option '--fulll'.*sync --help/],
    ["unknown command", ["synch"], {}, /unknown command "synch"/],
    ["key as a flag", ["sync", "--api-key", "abc"], {}, /--api-key is not accepted.*INVENTORY_API_KEY/],
    ["no key", ["sync", "--full"], { INVENTORY_API_KEY: "" }, /no developer key: set INVENTORY_API_KEY/],
    ["plain http to a non-loopback host", ["sync", "--base-url", "http://inventory.example.com"], {}, /--base-url: plain http:\/\/ is refused except to loopback/],
    ["base URL that is not a URL", ["check"], { INVENTORY_BASE_URL: "not a url" }, /INVENTORY_BASE_URL: "not a url" is not a URL/],
    ["concurrency not a number", ["sync", "--concurrency", "many"], {}, /--concurrency: expected a whole number from 1 to 64, got "many"/],
    ["bad log level", ["check", "--log-level", "loud"], {}, /--log-level: expected one of fatal, error, warn, info, debug, trace, silent/],
    ["database in a missing directory", ["sync", "--full", "--db", "/nonexistent-dir/x.db"], {}, /database directory \/nonexistent-dir does not exist/],
  ];
  for (const [name, args, extra, message] of cases) {
    it(name, async () => {
      sim.resetStats();
      const r = await runCli(args, { env: env(extra) });
      expect(r.stderr).toMatch(message);
      expect(r.code).toBe(2);
      expect(sim.stats().requests).toBe(0);
    });
  }

  it("config file mistakes name the key and what was expected", async () => {
    const cfg = join(dir, "bad.json");
    writeFileSync(cfg, JSON.stringify({ concurrency: "4", rateLimit: { requestsPerSecond: -1 }, schedule: { incremental: "every 5 minutes" }, colour: "blue" }));
    const r = await runCli(["sync", "--config", cfg], { env: env() });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown key\(s\) "colour"/);
    expect(r.stderr).toMatch(/concurrency: Invalid input: expected number, received string/);
    expect(r.stderr).toMatch(/rateLimit\.requestsPerSecond: Too small/);
    expect(r.stderr).toMatch(/schedule\.incremental: expected a cron expression/);
  });

  it("a key in the config file is refused with where to put it", async () => {
    const cfg = join(dir, "key.json");
    writeFileSync(cfg, JSON.stringify({ baseUrl: sim.baseUrl, apiKey: "secret-in-file" }));
    const r = await runCli(["sync", "--config", cfg], { env: env() });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/"apiKey" looks like a developer key.*INVENTORY_API_KEY/);
    expect(r.stderr).not.toContain("secret-in-file");
  });

  it("--help lists every option and exits 0", async () => {
    const r = await runCli(["sync", "--help"]);
    expect(r.code).toBe(0);
    for (const o of ["--full", "--config FILE", "--db FILE", "--base-url URL", "--concurrency N", "--expected-workspace-id ID", "--expected-workspace-name NAME", "--log-level LEVEL", "--max-rps N"]) {
      expect(r.stdout).toContain(o);
    }
  });
});

describe("exit 3: the key is refused", () => {
  it("a wrong key: clear message, the key not echoed", async () => {
    const wrong = "sim_wrong_key_ffffffffffffffffffffffff";
    const r = await runCli(["sync", "--full"], { env: env({ INVENTORY_API_KEY: wrong }) });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/HTTP 401.*developer key was refused/);
    expect(r.stderr + r.stdout).not.toContain(wrong);
    expect(existsSync(join(dir, "x.db"))).toBe(false);
  });
  it("check with a wrong key exits 3 too", async () => {
    const r = await runCli(["check"], { env: env({ INVENTORY_API_KEY: "sim_nope_1234567890" }) });
    expect(r.code).toBe(3);
  });
});

describe("exit 4: the wrong workspace, nothing written", () => {
  it("--expected-workspace-id mismatch shows both workspaces and creates no database", async () => {
    const db = join(dir, "expected.db");
    const r = await runCli(["sync", "--full", "--db", db, "--expected-workspace-id", "00000000-0000-4000-8000-000000000000"], { env: env() });
    expect(r.code).toBe(4);
    const ws = sim.groundTruth().workspace.workspace;
    expect(r.stderr).toContain(ws.id);
    expect(r.stderr).toContain("00000000-0000-4000-8000-000000000000");
    expect(existsSync(db)).toBe(false);
  });

  it("--expected-workspace-id is a UUID, compared whatever its case: the right id typed in upper case is no mismatch", async () => {
    const ws = sim.groundTruth().workspace.workspace;
    const r = await runCli(["check", "--expected-workspace-id", ws.id.toUpperCase()], { env: env() });
    expect(r.code).toBe(0);
  });

  it("--expected-workspace-name mismatch (check)", async () => {
    const r = await runCli(["check", "--expected-workspace-name", "Acme Production"], { env: env() });
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/not the expected workspace.*Acme Production/);
  });

  it("a database that belongs to another workspace is left byte-for-byte untouched", async () => {
    const db = join(dir, "owned.db");
    expect((await runCli(["sync", "--full"], { env: env({ INVENTORY_DB: db }) })).code).toBe(0);
    const before = sha(db);
    chmodSync(db, 0o600);
    const r = await runCli(["sync", "--full"], { env: env({ INVENTORY_DB: db, INVENTORY_BASE_URL: other.baseUrl }) });
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/this database belongs to workspace .*Simulated Workspace.*but the key is connected to workspace .*Other Workspace/);
    expect(sha(db)).toBe(before);
  });
});

/** A process we started, with its output and its end. */
interface Started {
  child: ChildProcess;
  out: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}
const started: ChildProcess[] = [];
afterEach(() => {
  for (const c of started.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

function start(args: string[], extraEnv: Record<string, string>): Started {
  const child = spawnCli(args, { env: extraEnv });
  started.push(child);
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("close", (code, signal) => resolve({ code, signal })));
  return { child, out: () => out, exit };
}

/** Poll `probe` (no database reads: a reader of ours must not be the one holding -wal/-shm) until it holds. */
async function until(probe: () => unknown, what: () => string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const walFiles = (db: string) => [`${db}-wal`, `${db}-shm`].filter((f) => existsSync(f));

describe("exit 130 and 143: stopped by a signal, no -wal/-shm left", () => {
  let slow: RunningSimulator;
  beforeAll(async () => {
    slow = await startSimulator({ seed: 23, skus: 200, apiKey: KEY });
    // Every SKU request held a while: a run is still fetching SKUs when the signal comes.
    slow.setFaults([{ kind: "slow", delayMs: 50, endpoint: ["detail", "history"] }]);
  });
  afterAll(async () => {
    await slow?.close();
  });

  for (const [sig, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const) {
    it(`sync stopped by ${sig} mid-run exits ${code}, the run recorded interrupted, no -wal/-shm left`, async () => {
      const db = join(dir, `sync-${sig}.db`);
      slow.resetStats();
      const p = start(["sync", "--full", "--no-progress"], { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: slow.baseUrl, INVENTORY_DB: db });
      await until(
        () => slow.stats().byEndpoint.detail >= 10,
        () => `10 detail requests:\n${p.out()}`,
      );
      p.child.kill(sig);
      const end = await p.exit;
      expect(end, p.out()).toEqual({ code, signal: null });
      expect(p.out()).toMatch(/sync: interrupted: interrupted before the run finished/);
      expect(walFiles(db)).toEqual([]);
      expect(lastRun(db)).toMatchObject({ status: "interrupted" });
    });
  }

  for (const [sig, code] of [
    ["SIGTERM", 0],
    ["SIGINT", 130],
  ] as const) {
    it(`the daemon stopped by ${sig} after a run and a /metrics scrape exits ${code} and leaves no -wal/-shm`, async () => {
      const db = join(dir, `daemon-${sig}.db`);
      const cfg = join(dir, `daemon-${sig}.json`);
      // Nothing scheduled during the test: only the catch-up run on the empty database.
      writeFileSync(cfg, JSON.stringify({ db, schedule: { incremental: "0 0 1 1 *", full: "0 0 1 1 *" }, daemon: { listen: "127.0.0.1:0" } }));
      const d = start(["daemon", "--config", cfg], { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl });
      await until(
        () => d.out().includes('"msg":"run succeeded"'),
        () => `the catch-up run:\n${d.out()}`,
      );
      const url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(d.out())![1];
      const metrics = await fetch(`${url}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(/^inventory_mirror_skus_not_clean \d+/m);
      // The daemon's read-only state reads made them appear; the stop must remove them.
      expect(walFiles(db)).toContain(`${db}-shm`);
      d.child.kill(sig);
      const end = await d.exit;
      expect(end, d.out()).toEqual({ code, signal: null });
      expect(d.out()).toContain('"msg":"daemon stopped"');
      expect(walFiles(db)).toEqual([]);
      expect(lastRun(db)).toMatchObject({ status: "succeeded" });
    });
  }
});
