/**
 * `inventory-mirror daemon` end to end: the real CLI in a child process, the real
 * simulator on 127.0.0.1, a real SQLite file. Cycles are driven by node-cron with a
 * 2-second schedule; /metrics is scraped over HTTP; SIGTERM must give exit 0 within
 * 10 s and leave a consistent database. `status` reads that database meanwhile.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli, spawnCli } from "../helpers/cli.js";
import { waitFor } from "../helpers/wait-for.js";

const KEY = "sim_e2e_daemon_7b3e9f1a2c4d6e8f0a1b2c3d";
let sim: RunningSimulator;
let dir: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  sim = await startSimulator({ seed: 31, skus: 40, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-daemon-"));
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Started {
  child: ChildProcess;
  url: string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

/** Spawn `daemon` with a config file; resolve once it logs where it listens. */
async function startDaemon(name: string, config: object, baseUrl = sim.baseUrl, key = KEY): Promise<Started> {
  const cfgPath = join(dir, `${name}.json`);
  writeFileSync(cfgPath, JSON.stringify(config));
  const child = spawnCli(["daemon", "--config", cfgPath], { env: { INVENTORY_API_KEY: key, INVENTORY_BASE_URL: baseUrl } });
  children.push(child);
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  child.stdout!.resume();
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal, at: Date.now() })));
  const url = await waitFor(
    () => /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(stderr)?.[1],
    () => `daemon did not listen:\n${stderr}`,
    15_000,
  );
  return { child, url, stderr: () => stderr, exit };
}

/** Read-only query; [] while the file or its tables do not exist yet. */
function query<T>(db: string, sql: string, ...params: unknown[]): T[] {
  let d: Database.Database | undefined;
  try {
    d = new Database(db, { readonly: true, fileMustExist: true });
    d.pragma("busy_timeout = 5000");
    return d.prepare(sql).all(...params) as T[];
  } catch {
    return [];
  } finally {
    d?.close();
  }
}

function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function sigterm(d: Started): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const sent = Date.now();
  d.child.kill("SIGTERM");
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no exit 10 s after SIGTERM:\n${d.stderr()}`)), 10_000).unref());
  const e = await Promise.race([d.exit, timeout]);
  return { code: e.code, signal: e.signal, ms: e.at - sent };
}

function integrity(db: string): string {
  const d = new Database(db, { readonly: true });
  try {
    return d.pragma("integrity_check", { simple: true }) as string;
  } finally {
    d.close();
  }
}

describe("inventory-mirror daemon (real process)", () => {
  it("runs on schedule, serves /healthz /readyz /metrics, `status` reads the live database, and SIGTERM exits 0", async () => {
    const db = join(dir, "scheduled.db");
    const d = await startDaemon("scheduled", {
      db,
      schedule: { incremental: "*/2 * * * * *", full: "0 0 1 1 *" },
      daemon: { listen: "127.0.0.1:0", readyMaxAgeSeconds: 60 },
    });

    // The catch-up run on the empty database, then two cycles of the 2-s cron schedule.
    await waitFor(
      () => (query<{ n: number }>(db, "SELECT count(*) AS n FROM sync_runs WHERE status = 'succeeded'")[0]?.n ?? 0) >= 3,
      () => `three successful runs:\n${d.stderr()}`,
      30_000,
    );

    const health = await fetch(`${d.url}/healthz`);
    expect(health.status).toBe(200);
    const ready = await fetch(`${d.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ready: true, maxAgeSeconds: 60 });

    const res = await fetch(`${d.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(sample(text, 'inventory_mirror_sync_runs_total{mode="incremental",outcome="succeeded"}')).toBeGreaterThanOrEqual(3);
    expect(sample(text, 'inventory_mirror_sync_runs_total{mode="incremental",outcome="failed"}')).toBe(0);
    for (const endpoint of ["workspace", "locations", "list", "detail", "history"]) {
      expect(sample(text, `inventory_mirror_requests_total{endpoint="${endpoint}",status="2xx"}`), endpoint).toBeGreaterThan(0);
    }
    const lastSuccess = sample(text, "inventory_mirror_last_success_timestamp_seconds")!;
    expect(Math.abs(Date.now() / 1000 - lastSuccess)).toBeLessThan(30);
    expect(sample(text, 'inventory_mirror_sync_duration_seconds_count{mode="incremental",outcome="succeeded"}')).toBeGreaterThanOrEqual(3);
    expect(sample(text, "inventory_mirror_rate_limited_total")).toBe(0);
    expect(sample(text, "inventory_mirror_ready")).toBe(1);
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);

    // What is not clean, per the simulator: the daemon's gauge and `status` agree with it.
    const truth = sim.groundTruth();
    const notClean = truth.skus.flatMap((s) => (s.detail.locations ?? []).filter((l) => l.freshness?.status !== "clean").map((l) => `${s.detail.sku.id}/${l.id}`));
    const notCleanSkus = new Set(notClean.map((k) => k.split("/")[0]));
    expect(notClean.length).toBeGreaterThan(0);
    expect(sample(text, "inventory_mirror_skus_not_clean")).toBe(notCleanSkus.size);

    // `status` while the daemon runs: read-only, no key.
    const st = await runCli(["status", "--db", db, "--json", "--runs", "2"], { timeoutMs: 30_000 });
    expect(st.stderr).toBe("");
    expect(st.code).toBe(0);
    const report = JSON.parse(st.stdout);
    expect(report.workspace).toMatchObject({ id: truth.workspace.workspace.id, name: truth.workspace.workspace.name });
    expect(report.runs).toHaveLength(2);
    expect(report.runs.map((r: { id: number }) => r.id)).toEqual([...report.runs.map((r: { id: number }) => r.id)].sort((a, b) => b - a));
    expect(report.lastSuccess).toMatchObject({ mode: "incremental" });
    expect(report.quota.state).toBe("clear");
    expect(report.notClean.pairs).toBe(notClean.length);
    expect(report.notClean.skus).toBe(notCleanSkus.size);
    expect(report.notClean.shown.map((i: { skuId: string; locationId: string }) => `${i.skuId}/${i.locationId}`).sort()).toEqual(notClean.slice(0, 20).sort());
    const human = await runCli(["status", "--db", db], { timeoutMs: 30_000 });
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`scan not reflected: ${notClean.length} SKU × location`);

    const stop = await sigterm(d);
    expect(stop).toMatchObject({ code: 0, signal: null });
    expect(stop.ms).toBeLessThan(10_000);
    expect(d.stderr()).not.toMatch(/"level":(50|60)/);
    expect(d.stderr()).toContain('"msg":"daemon stopped"');
    expect(integrity(db)).toBe("ok");
    expect(query(db, "SELECT id FROM sync_runs WHERE status = 'running'")).toEqual([]);
  });

  it("SIGTERM in the middle of a run: the run ends 'interrupted', ticks skipped meanwhile are journaled, exit 0, consistent file", async () => {
    const slow = await startSimulator({ seed: 32, skus: 400, apiKey: KEY });
    try {
      const db = join(dir, "interrupted.db");
      const d = await startDaemon(
        "interrupted",
        {
          db,
          // 400 SKUs at 20 requests/s: the catch-up run takes ~40 s, longer than many 2-s slots.
          rateLimit: { requestsPerSecond: 20 },
          schedule: { incremental: "*/2 * * * * *", full: "0 0 1 1 *" },
          daemon: { listen: "127.0.0.1:0" },
        },
        slow.baseUrl,
      );
      const run = await waitFor(
        () => query<{ id: number }>(db, "SELECT id FROM sync_runs WHERE status = 'running' AND skus_fetched > 0")[0],
        () => `a run in progress:\n${d.stderr()}`,
        30_000,
      );
      // Ticks that found this run in progress are journaled against it.
      await waitFor(
        () => query(db, "SELECT id FROM sync_journal WHERE run_id = ? AND kind = 'tick_skipped'", run.id).length >= 1,
        () => `a tick_skipped entry:\n${d.stderr()}`,
        10_000,
      );
      const text = await (await fetch(`${d.url}/metrics`)).text();
      expect(sample(text, 'inventory_mirror_ticks_skipped_total{mode="incremental",reason="overlap"}')).toBeGreaterThanOrEqual(1);
      expect(sample(text, 'inventory_mirror_sync_running{mode="incremental"}')).toBe(1);
      expect((await fetch(`${d.url}/readyz`)).status).toBe(503);

      const stop = await sigterm(d);
      expect(stop).toMatchObject({ code: 0, signal: null });
      expect(stop.ms).toBeLessThan(10_000);
      expect(integrity(db)).toBe("ok");
      const [row] = query<{ status: string; skus_fetched: number }>(db, "SELECT status, skus_fetched FROM sync_runs WHERE id = ?", run.id);
      expect(row!.status).toBe("interrupted");
      expect(row!.skus_fetched).toBeLessThan(400);
      expect(query(db, "SELECT id FROM sync_journal WHERE run_id = ? AND kind = 'interrupted'", run.id)).toHaveLength(1);
      const skipped = query<{ message: string }>(db, "SELECT message FROM sync_journal WHERE run_id = ? AND kind = 'tick_skipped'", run.id);
      expect(skipped[0]!.message).toMatch(/^incremental tick \(schedule\) skipped: the incremental run started \S+ is still in progress$/);
    } finally {
      await slow.close();
    }
  });

  it("a refused key: the daemon stays up, /readyz 503 with the reason, the error counted, SIGTERM exits 0", async () => {
    const db = join(dir, "refused.db");
    const d = await startDaemon("refused", { db, schedule: { incremental: "*/2 * * * * *", full: "0 0 1 1 *" }, daemon: { listen: "127.0.0.1:0" } }, sim.baseUrl, "sim_e2e_daemon_wrong_key_00000000");
    const ready = await waitFor(
      async () => {
        const r = await fetch(`${d.url}/readyz`);
        const body = (await r.json()) as { reason: string };
        return /\(auth\)/.test(body.reason) ? { status: r.status, body } : null;
      },
      () => `readyz naming the refused key:\n${d.stderr()}`,
      15_000,
    );
    expect(ready.status).toBe(503);
    const text = await (await fetch(`${d.url}/metrics`)).text();
    expect(sample(text, 'inventory_mirror_sync_errors_total{kind="auth"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'inventory_mirror_sync_runs_total{mode="incremental",outcome="failed"}')).toBeGreaterThanOrEqual(1);
    expect((await fetch(`${d.url}/healthz`)).status).toBe(200);
    expect(d.stderr()).not.toContain("sim_e2e_daemon_wrong_key_00000000");
    const stop = await sigterm(d);
    expect(stop).toMatchObject({ code: 0, signal: null });
  });

  it("refuses to start, exit 2, without a key, without a base URL, or with a bad --listen", async () => {
    const base = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: join(dir, "never.db") };
    const cases: Array<[string[], Record<string, string | undefined>, RegExp]> = [
      [["daemon"], { ...base, INVENTORY_API_KEY: undefined }, /no developer key/],
      [["daemon"], { ...base, INVENTORY_BASE_URL: undefined }, /no base URL/],
      [["daemon", "--listen", "nowhere"], base, /--listen: expected host:port/],
      [["daemon"], { ...base, INVENTORY_DAEMON_LISTEN: "1.2.3.4:99999" }, /INVENTORY_DAEMON_LISTEN: expected host:port/],
      [["daemon", "--db", join(dir, "missing-dir", "x.db")], base, /database directory .* does not exist/],
    ];
    for (const [args, env, message] of cases) {
      const r = await runCli(args, { env, timeoutMs: 30_000 });
      expect(r.stderr, args.join(" ")).toMatch(message);
      expect(r.code, args.join(" ")).toBe(2);
    }
  });
});
