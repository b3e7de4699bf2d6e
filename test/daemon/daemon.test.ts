/**
 * The Daemon's rules with a fake clock, a manual trigger and a fake sync function
 * whose runs end when the test says so: no sleeping, no server, no database.
 */
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig, type ResolvedConfig } from "../../src/core/config.js";
import { ApiError, StoreError, SyncError } from "../../src/core/errors.js";
import { createLogger } from "../../src/core/logger.js";
import { Secret } from "../../src/core/secret.js";
import { cronTrigger, Daemon, manualTrigger, type DaemonOptions, type SyncFunction } from "../../src/daemon/daemon.js";
import { DaemonMetrics } from "../../src/daemon/metrics.js";
import type { SkippedTick, StateReader, TickJournal } from "../../src/daemon/state.js";
import type { RunMode } from "../../src/store/store.js";
import type { SyncOptions, SyncResult } from "../../src/sync/sync.js";

const logger = createLogger("silent");
const T0 = Date.parse("2026-03-01T12:00:00.000Z");

function config(readyMaxAgeSeconds = 60): ResolvedConfig {
  const c = loadConfig({ db: "/nonexistent/inventory.db" }, {});
  return { ...c, daemon: { ...c.daemon, readyMaxAgeSeconds } };
}

function resultOf(mode: RunMode, over: Partial<SyncResult> = {}): SyncResult {
  return {
    runId: 1,
    mode,
    status: "succeeded",
    resumedFrom: null,
    workspace: { id: "ws", name: "WS" },
    skusListed: 10,
    skusPlanned: 2,
    plan: { new: 0, changed: 2, repolled: 0, retried: 0, reverified: 0 },
    skusFetched: 2,
    skusFailed: 0,
    skusDeleted: 0,
    locations: 5,
    historyRowsAdded: 7,
    historyDeepWalks: 0,
    repolledDetailOnly: 0,
    requests: 6,
    requestsByEndpoint: { workspace: 1, locations: 1, list: 2, detail: 1, history: 1 },
    requestsByStatus: { "2xx": 6 },
    responses429: 0,
    responses503: 0,
    retries: 0,
    waitMs: 0,
    durationMs: 1234,
    ceilingHeldMs: 0,
    unpacedHeldMs: 0,
    heldAtWrite: 0,
    ceilingHint: null,
    resumeAfter: null,
    error: null,
    ...over,
  };
}

interface Call {
  opts: SyncOptions;
  resolve(over?: Partial<SyncResult>): void;
  reject(err: Error): void;
}

/**
 * runSync stand-in: every call waits until the test resolves or rejects it. Like
 * runSync, an aborted signal ends it as 'interrupted' (unless `manualAbort`).
 */
function fakeSync(manualAbort = false): { fn: SyncFunction; calls: Call[] } {
  const calls: Call[] = [];
  const fn: SyncFunction = (opts) =>
    new Promise<SyncResult>((resolve, reject) => {
      const runId = calls.length + 1;
      calls.push({ opts, resolve: (over) => resolve(resultOf(opts.mode, { runId, ...over })), reject });
      if (!manualAbort) {
        opts.signal.addEventListener("abort", () => resolve(resultOf(opts.mode, { runId, status: "interrupted", error: new SyncError("interrupted") })), { once: true });
      }
    });
  return { fn, calls };
}

function fakeJournal(): TickJournal & { entries: SkippedTick[]; ended: Array<number | null> } {
  const entries: SkippedTick[] = [];
  const ended: Array<number | null> = [];
  return { entries, ended, skipped: (t) => entries.push(t), flush() {}, runEnded: (id) => ended.push(id) };
}

function fakeState(over: Partial<StateReader> = {}): StateReader {
  return {
    lastSuccess: () => null,
    resumeAfter: () => null,
    skusNotClean: () => 3,
    responses: (_id, byEndpoint) => Object.fromEntries(Object.entries(byEndpoint).map(([e, n]) => [e, { "2xx": n }])),
    ...over,
  };
}

const daemons: Daemon[] = [];
afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
}, 5_000);

function setup(over: Partial<DaemonOptions> & { readyMaxAgeSeconds?: number; manualAbort?: boolean } = {}) {
  const clock = {
    t: T0,
    now() {
      return this.t;
    },
  };
  const sync = fakeSync(over.manualAbort);
  const journal = fakeJournal();
  const trigger = manualTrigger({ incremental: 5 * 60_000, full: 24 * 3600_000 });
  const opts: DaemonOptions = {
    config: config(over.readyMaxAgeSeconds),
    key: new Secret("sim_daemon_unit_key_0001"),
    logger,
    sync: sync.fn,
    trigger,
    clock,
    journal,
    state: fakeState(),
    http: false,
    catchUp: false,
    ...over,
  };
  opts.metrics ??= new DaemonMetrics({ defaultMetrics: false, ready: () => d.readiness().ready, skusNotClean: () => 3 });
  const d = new Daemon(opts);
  daemons.push(d);
  return { d, clock, sync, journal, trigger, metrics: opts.metrics };
}

/** One sample's value from the exposition text, or undefined. */
async function sample(metrics: DaemonMetrics, series: string): Promise<number | undefined> {
  const line = (await metrics.text()).split("\n").find((l) => l.startsWith(series + " "));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("Daemon: runs never overlap", () => {
  it("a tick during a run is skipped, counted and journaled; the next tick after it runs", async () => {
    const { d, sync, journal, metrics, clock } = setup();
    await d.start();
    const first = d.tick("incremental", "schedule");
    expect(sync.calls).toHaveLength(1);
    expect(d.inProgress).toEqual({ mode: "incremental", startedAt: T0 });

    clock.t += 5 * 60_000;
    const second = await d.tick("incremental", "schedule");
    const third = await d.tick("full", "schedule");
    expect(second).toMatchObject({ kind: "skipped", reason: "overlap" });
    expect(third).toMatchObject({ kind: "skipped", reason: "overlap" });
    expect(sync.calls).toHaveLength(1);
    expect(journal.entries).toEqual([
      { mode: "incremental", at: T0 + 300_000, message: "incremental tick (schedule) skipped: the incremental run started 2026-03-01T12:00:00.000Z is still in progress" },
      { mode: "full", at: T0 + 300_000, message: expect.stringMatching(/^full tick \(schedule\) skipped/) },
    ]);
    expect(await sample(metrics, 'inventory_mirror_ticks_skipped_total{mode="incremental",reason="overlap"}')).toBe(1);
    expect(await sample(metrics, 'inventory_mirror_ticks_skipped_total{mode="full",reason="overlap"}')).toBe(1);

    sync.calls[0]!.resolve();
    expect(await first).toMatchObject({ kind: "ran", result: { status: "succeeded" } });
    expect(d.inProgress).toBeNull();
    expect(journal.ended).toEqual([1]);

    const fourth = d.tick("full", "schedule");
    expect(sync.calls).toHaveLength(2);
    expect(sync.calls[1]!.opts.mode).toBe("full");
    sync.calls[1]!.resolve();
    await fourth;
    expect(await sample(metrics, 'inventory_mirror_sync_runs_total{mode="incremental",outcome="succeeded"}')).toBe(1);
    expect(await sample(metrics, 'inventory_mirror_sync_runs_total{mode="full",outcome="succeeded"}')).toBe(1);
  });

  it("each run gets the config, the key and the daemon's one abort signal", async () => {
    const keys = ["sim_daemon_unit_key_0001", "sim_daemon_unit_key_0002"];
    let n = 0;
    const { d, sync } = setup({ key: () => new Secret(keys[n++]!) });
    await d.start();
    const a = d.tick("incremental");
    sync.calls[0]!.resolve();
    await a;
    const b = d.tick("incremental");
    sync.calls[1]!.resolve();
    await b;
    expect(sync.calls.map((c) => c.opts.key.reveal())).toEqual(keys); // the key is read again for each run
    expect(sync.calls[0]!.opts.signal).toBe(d.signal);
    expect(sync.calls[1]!.opts.signal).toBe(d.signal);
  });
});

describe("Daemon: stop()", () => {
  it("stops the trigger, aborts the run in hand's signal, waits for the run to end, and resolves", async () => {
    const { d, sync, trigger, metrics } = setup({ manualAbort: true });
    await d.start();
    expect(trigger.started).toBe(true);
    const run = d.tick("full");
    const signal = sync.calls[0]!.opts.signal;
    const order: string[] = [];
    signal.addEventListener("abort", () => {
      order.push("aborted");
      // runSync finishes the transaction in hand and records the run interrupted, a moment later.
      setImmediate(() => {
        order.push("run ended");
        sync.calls[0]!.resolve({ status: "interrupted", error: new SyncError("interrupted") });
      });
    });
    await d.stop();
    order.push("stop resolved");
    expect(order).toEqual(["aborted", "run ended", "stop resolved"]);
    expect(signal.aborted).toBe(true);
    expect(trigger.started).toBe(false);
    expect(await run).toMatchObject({ kind: "ran", result: { status: "interrupted" } });
    expect(await d.tick("incremental")).toEqual({ kind: "stopped" });
    expect(sync.calls).toHaveLength(1);
    expect(await sample(metrics, 'inventory_mirror_sync_runs_total{mode="full",outcome="interrupted"}')).toBe(1);
    // Idempotent.
    await d.stop();
  });

  it("a run stopped before it started (still checking the workspace) is counted interrupted, not failed", async () => {
    const { d, sync, metrics } = setup({ manualAbort: true });
    await d.start();
    const run = d.tick("incremental");
    sync.calls[0]!.opts.signal.addEventListener("abort", () => sync.calls[0]!.reject(new Error("This operation was aborted")));
    await d.stop();
    expect(await run).toEqual({ kind: "stopped" });
    expect(await sample(metrics, 'inventory_mirror_sync_runs_total{mode="incremental",outcome="interrupted"}')).toBe(1);
    expect(await sample(metrics, 'inventory_mirror_sync_runs_total{mode="incremental",outcome="failed"}')).toBe(0);
  });

  it("resolves at once without a run in hand, and a daemon stopped before start never starts", async () => {
    const { d, trigger } = setup();
    await d.start();
    await d.stop();
    const other = setup();
    await other.d.stop();
    await other.d.start();
    expect(other.trigger.started).toBe(false);
    expect(await other.d.tick("incremental")).toEqual({ kind: "stopped" });
    expect(trigger.started).toBe(false);
  });
});

describe("Daemon: readiness", () => {
  it("is ready only while the last successful run is younger than daemon.readyMaxAgeSeconds", async () => {
    const { d, sync, clock } = setup({ readyMaxAgeSeconds: 60 });
    await d.start();
    expect(d.readiness()).toMatchObject({ ready: false, reason: "no successful sync yet", lastSuccessAt: null });

    const run = d.tick("incremental");
    clock.t += 2_000;
    sync.calls[0]!.resolve();
    await run;
    const successAt = T0 + 2_000;
    expect(d.readiness()).toMatchObject({ ready: true, lastSuccessAt: new Date(successAt).toISOString(), ageSeconds: 0, maxAgeSeconds: 60 });

    clock.t = successAt + 59_999;
    expect(d.readiness().ready).toBe(true);
    // A failed run does not make the mirror older: still ready until the age passes.
    const failing = d.tick("incremental");
    sync.calls[1]!.reject(new ApiError("list: 503", { kind: "http", endpoint: "list", status: 503 }));
    expect(await failing).toMatchObject({ kind: "failed", errorKind: "api" });
    expect(d.readiness()).toMatchObject({ ready: true, lastRun: { outcome: "failed", error: "list: 503" } });

    clock.t = successAt + 60_000;
    expect(d.readiness()).toMatchObject({ ready: false, ageSeconds: 60, reason: expect.stringContaining("older than daemon.readyMaxAgeSeconds (60 s)") });
  });

  it("starts from the database's last success, and reports the run in progress", async () => {
    const { d, clock } = setup({ state: fakeState({ lastSuccess: () => T0 - 30_000 }) });
    await d.start();
    expect(d.readiness()).toMatchObject({ ready: true, ageSeconds: 30, running: null });
    void d.tick("full");
    clock.t += 1_000;
    expect(d.readiness().running).toEqual({ mode: "full", since: new Date(T0).toISOString() });
  });

  it("a refused key (401) keeps the daemon running, not ready at once, until a run passes the workspace check", async () => {
    const { d, sync, metrics } = setup({ state: fakeState({ lastSuccess: () => T0 - 1_000 }) });
    await d.start();
    expect(d.readiness().ready).toBe(true);
    const refused = d.tick("incremental");
    sync.calls[0]!.reject(new ApiError("workspace: the key was refused (401)", { kind: "auth", endpoint: "workspace", status: 401 }));
    expect(await refused).toMatchObject({ kind: "failed", errorKind: "auth" });
    expect(d.readiness()).toMatchObject({ ready: false, reason: expect.stringContaining("(auth)") });
    expect(await sample(metrics, 'inventory_mirror_sync_errors_total{kind="auth"}')).toBe(1);
    expect(await sample(metrics, 'inventory_mirror_sync_runs_total{mode="incremental",outcome="failed"}')).toBe(1);

    // Still scheduling: the next tick runs (the key may have been rotated) and clears the state.
    const next = d.tick("incremental");
    expect(sync.calls).toHaveLength(2);
    sync.calls[1]!.resolve();
    await next;
    expect(d.readiness().ready).toBe(true);

    // Revoked in the middle of a run: the run ends failed, and readiness drops the same way.
    const revoked = d.tick("incremental");
    sync.calls[2]!.resolve({ status: "failed", error: new ApiError("detail: 401", { kind: "auth", endpoint: "detail", status: 401 }) });
    await revoked;
    expect(d.readiness()).toMatchObject({ ready: false, reason: expect.stringContaining("(auth)") });
    expect(await sample(metrics, 'inventory_mirror_sync_errors_total{kind="auth"}')).toBe(2);
  });
});

describe("Daemon: catch-up on start", () => {
  const cases: Array<[string, number | null, boolean]> = [
    ["empty database: an incremental run starts at once", null, true],
    ["last success older than the incremental interval: a run starts at once", T0 - 6 * 60_000, true],
    ["last success within the interval: nothing until the next tick", T0 - 4 * 60_000, false],
  ];
  for (const [name, last, runs] of cases) {
    it(name, async () => {
      const { d, sync } = setup({ catchUp: true, state: fakeState({ lastSuccess: () => last }) });
      await d.start();
      expect(sync.calls.map((c) => c.opts.mode)).toEqual(runs ? ["incremental"] : []);
      sync.calls[0]?.resolve();
      await d.idle();
    });
  }
});

describe("Daemon: failures never stop it", () => {
  it("a run that throws is logged and counted; the next tick runs", async () => {
    const { d, sync, metrics, journal } = setup();
    await d.start();
    const a = d.tick("full");
    sync.calls[0]!.reject(new Error("disk full"));
    expect(await a).toMatchObject({ kind: "failed", errorKind: "other" });
    expect(journal.ended).toEqual([null]);
    const b = d.tick("full");
    sync.calls[1]!.resolve({ status: "failed", error: new SyncError("12 SKUs failed") });
    expect(await b).toMatchObject({ kind: "ran", result: { status: "failed" } });
    expect(await sample(metrics, 'inventory_mirror_sync_runs_total{mode="full",outcome="failed"}')).toBe(2);
    expect(await sample(metrics, 'inventory_mirror_sync_errors_total{kind="other"}')).toBe(1);
    expect(await sample(metrics, 'inventory_mirror_sync_errors_total{kind="sync"}')).toBe(1);
  });

  it("another process holding the writer lock: the tick is skipped, not failed", async () => {
    const { d, sync, metrics } = setup();
    await d.start();
    const a = d.tick("incremental");
    sync.calls[0]!.reject(new StoreError("another inventory-mirror process is writing to x.db (it holds x.db.lock); wait for it to finish or stop it."));
    expect(await a).toMatchObject({ kind: "skipped", reason: "locked" });
    expect(await sample(metrics, 'inventory_mirror_ticks_skipped_total{mode="incremental",reason="locked"}')).toBe(1);
    expect(await sample(metrics, 'inventory_mirror_sync_runs_total{mode="incremental",outcome="failed"}')).toBe(0);
  });

  it("a quota wall (partial with a resume time) skips ticks until that time", async () => {
    // The database holds the partial run's resume_after, as the real one does after that run.
    let stored: number | null = null;
    const { d, sync, clock, metrics } = setup({ state: fakeState({ resumeAfter: () => stored }) });
    await d.start();
    const a = d.tick("incremental");
    sync.calls[0]!.resolve({ status: "partial", resumeAfter: new Date(T0 + 600_000).toISOString(), responses429: 3 });
    stored = T0 + 600_000;
    await a;
    clock.t = T0 + 300_000;
    expect(await d.tick("incremental")).toMatchObject({ kind: "skipped", reason: "quota" });
    expect(await d.tick("full")).toMatchObject({ kind: "skipped", reason: "quota" });
    expect(d.readiness().resumeAfter).toBe(new Date(T0 + 600_000).toISOString());
    expect(sync.calls).toHaveLength(1);
    expect(await sample(metrics, 'inventory_mirror_ticks_skipped_total{mode="incremental",reason="quota"}')).toBe(1);
    clock.t = T0 + 600_000;
    const b = d.tick("incremental");
    expect(sync.calls).toHaveLength(2);
    sync.calls[1]!.resolve();
    await b;
  });

  it("a stored quota wall cleared meanwhile (sync --ignore-quota-wall finished) no longer skips ticks", async () => {
    let stored: number | null = T0 + 600_000;
    const { d, sync, clock } = setup({ state: fakeState({ resumeAfter: () => stored }) });
    await d.start();
    clock.t = T0 + 1_000;
    expect(await d.tick("incremental")).toMatchObject({ kind: "skipped", reason: "quota" });
    stored = null;
    const b = d.tick("incremental");
    expect(sync.calls).toHaveLength(1);
    sync.calls[0]!.resolve();
    expect(await b).toMatchObject({ kind: "ran" });
  });

  it("a quota wall recorded in the database is respected after a restart", async () => {
    const { d, sync } = setup({ catchUp: true, state: fakeState({ resumeAfter: () => T0 + 60_000 }) });
    await d.start();
    expect(sync.calls).toHaveLength(0);
  });
});

describe("Daemon: metrics", () => {
  it("counts runs, requests by endpoint and status, 429s, backoff, durations and the last success", async () => {
    const responses = { list: { "2xx": 2, "429": 3 }, detail: { "2xx": 1, "503": 1 }, history: { "2xx": 1, error: 1 } };
    const { d, sync, clock, metrics } = setup({ state: fakeState({ responses: () => responses }) });
    await d.start();
    const a = d.tick("incremental");
    clock.t += 4_000;
    sync.calls[0]!.resolve({ responses429: 3, responses503: 1, retries: 5, waitMs: 2_500, ceilingHeldMs: 750, unpacedHeldMs: 1_250, heldAtWrite: 2, durationMs: 4_000 });
    await a;
    const m = (s: string) => sample(metrics, s);
    expect(await m('inventory_mirror_requests_total{endpoint="list",status="429"}')).toBe(3);
    expect(await m('inventory_mirror_requests_total{endpoint="list",status="2xx"}')).toBe(2);
    expect(await m('inventory_mirror_requests_total{endpoint="detail",status="503"}')).toBe(1);
    expect(await m('inventory_mirror_requests_total{endpoint="history",status="error"}')).toBe(1);
    expect(await m("inventory_mirror_rate_limited_total")).toBe(3);
    expect(await m("inventory_mirror_retries_total")).toBe(5);
    expect(await m("inventory_mirror_held_at_write_total")).toBe(2);
    expect(await m("inventory_mirror_backoff_seconds_total")).toBe(2.5);
    expect(await m("inventory_mirror_inflight_ceiling_seconds_total")).toBe(0.75);
    expect(await m("inventory_mirror_unpaced_hold_seconds_total")).toBe(1.25);
    expect(await m("inventory_mirror_skus_fetched_total")).toBe(2);
    expect(await m("inventory_mirror_history_rows_added_total")).toBe(7);
    expect(await m("inventory_mirror_last_success_timestamp_seconds")).toBe((T0 + 4_000) / 1000);
    expect(await m('inventory_mirror_sync_duration_seconds_count{mode="incremental",outcome="succeeded"}')).toBe(1);
    expect(await m('inventory_mirror_sync_duration_seconds_sum{mode="incremental",outcome="succeeded"}')).toBe(4);
    expect(await m('inventory_mirror_sync_duration_seconds_bucket{le="5",mode="incremental",outcome="succeeded"}')).toBe(1);
    expect(await m("inventory_mirror_skus_not_clean")).toBe(3);
    expect(await m("inventory_mirror_ready")).toBe(1);
    expect(await m('inventory_mirror_sync_running{mode="incremental"}')).toBe(0);
  });

  it("shows the run in progress and includes the default process metrics", async () => {
    const { d, sync, metrics } = setup({ metrics: new DaemonMetrics({ defaultMetrics: true }) });
    await d.start();
    const a = d.tick("full");
    expect(await sample(metrics, 'inventory_mirror_sync_running{mode="full"}')).toBe(1);
    sync.calls[0]!.resolve();
    await a;
    const text = await metrics.text();
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes \d/m);
    expect(text).toContain("# TYPE inventory_mirror_sync_runs_total counter");
    expect(text).toContain("# TYPE inventory_mirror_sync_duration_seconds histogram");
  });
});

describe("Daemon: HTTP endpoint", () => {
  it("serves /healthz, /readyz and /metrics, 404 elsewhere, and closes on stop()", async () => {
    const { d, sync } = setup({ http: { host: "127.0.0.1", port: 0 } });
    await d.start();
    const url = d.address!.url;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const health = await fetch(`${url}/healthz`);
    expect([health.status, await health.text()]).toEqual([200, "ok\n"]);
    const notReady = await fetch(`${url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toMatchObject({ ready: false, reason: "no successful sync yet" });

    const run = d.tick("incremental");
    sync.calls[0]!.resolve();
    await run;
    const ready = await fetch(`${url}/readyz?verbose=1`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ready: true, lastRun: { mode: "incremental", outcome: "succeeded" } });

    const metrics = await fetch(`${url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await metrics.text()).toContain('inventory_mirror_sync_runs_total{mode="incremental",outcome="succeeded"} 1');

    expect((await fetch(`${url}/`)).status).toBe(404);
    expect((await fetch(`${url}/metricsx`)).status).toBe(404);
    const post = await fetch(`${url}/metrics`, { method: "POST" });
    expect([post.status, post.headers.get("allow")]).toEqual([405, "GET, HEAD"]);
    const head = await fetch(`${url}/healthz`, { method: "HEAD" });
    expect(head.status).toBe(200);

    await d.stop();
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });

  it("a port in use is a configuration error", async () => {
    const first = setup({ http: { host: "127.0.0.1", port: 0 } });
    await first.d.start();
    const second = setup({ http: { host: "127.0.0.1", port: first.d.address!.port } });
    await expect(second.d.start()).rejects.toThrow(/cannot listen on 127\.0\.0\.1:\d+: the address is in use; set daemon\.listen/);
  });
});

describe("cronTrigger", () => {
  it("knows the interval of 5- and 6-field schedules, and starts and stops its tasks", () => {
    const t = cronTrigger({ incremental: "*/5 * * * *", full: "*/2 * * * * *" }, logger);
    expect(t.intervalMs("incremental")).toBe(300_000);
    expect(t.intervalMs("full")).toBe(2_000);
    const daily = cronTrigger({ incremental: "*/5 * * * *", full: "17 3 * * *" }, logger);
    expect(daily.intervalMs("full")).toBe(24 * 3600_000);
    const fired: RunMode[] = [];
    t.start((m) => fired.push(m));
    t.stop();
    expect(fired).toEqual([]);
  });
});
