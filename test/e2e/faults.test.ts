/**
 * Faults, each injected into the simulator on 127.0.0.1 while the real CLI syncs:
 * the run ends either equal to ground truth or with the documented failure, nothing
 * lost or duplicated, every backoff journaled, and no request sent before a
 * Retry-After elapsed.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type FaultRule, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";

const KEY = "sim_e2e_fault_1f2e3d4c5b6a79880796a5b4";
let sim: RunningSimulator;
let dir: string;
let n = 0;

beforeAll(async () => {
  sim = await startSimulator({ seed: 9, skus: 80, historyDepth: 20, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-fault-"));
});
afterEach(() => {
  sim.setFaults([]);
  sim.setQuota(null);
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Fast backoffs so bounded retries finish quickly; Retry-After values are still honoured as sent. */
function writeConfig(extra: Record<string, unknown> = {}): string {
  const path = join(dir, `config-${++n}.json`);
  writeFileSync(path, JSON.stringify({ retry: { backoffBaseMs: 20, backoffCapMs: 200, maxRetries: 4 }, ...extra }));
  return path;
}
async function syncWith(faults: FaultRule[], opts: { db?: string; config?: string; args?: string[] } = {}) {
  const db = opts.db ?? join(dir, `run-${++n}.db`);
  sim.setFaults(faults);
  sim.resetStats();
  const r = await runCli(["sync", "--full", "--config", opts.config ?? writeConfig(), ...(opts.args ?? [])], {
    env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db },
  });
  return { ...r, db, stats: sim.stats() };
}
function query<T>(db: string, sql: string, ...params: unknown[]): T[] {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare(sql).all(...params) as T[];
  } finally {
    d.close();
  }
}
const lastRun = (db: string) => query<Record<string, number | string | null>>(db, "SELECT * FROM sync_runs ORDER BY id DESC LIMIT 1")[0]!;

describe("quota and retries", () => {
  it("429 bursts with Retry-After in delta-seconds: every worker pauses, the run ends equal to ground truth, no early request", async () => {
    // The pauses are what this test is about, not the rate learnt from them: with the adaptive rate on, a
    // loaded machine spreads a burst's three 429s over three pauses (each the first request after the last
    // named wait, refused again), which a token bucket explains only below 1 req/s, and the run crawled at
    // 1 req/s past its 110 s timeout (CI, 2026-11-29; the next test shows the look above such bounds that mends
    // part of it). Without it every worker still waits out each Retry-After.
    const r = await syncWith([{ kind: "429", every: 40, burst: 3, retryAfter: "seconds:1", count: 3 }], { config: writeConfig({ rateLimit: { adaptive: false } }) });
    expect(r.code).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
    expect(r.stats.faultsFired["429"]).toBeGreaterThanOrEqual(3);
    expect(r.stats.retryAfterViolations).toEqual([]);
    const run = lastRun(r.db);
    expect(Number(run.responses_429)).toBe(r.stats.byStatus["429"]);
    // Each backoff is journaled with the endpoint template, status, Retry-After as sent and the wait applied.
    const backoffs = query<Record<string, unknown>>(r.db, "SELECT endpoint, status, retry_after, wait_ms FROM sync_journal WHERE kind = 'backoff' AND status = 429");
    expect(backoffs.length).toBeGreaterThanOrEqual(1);
    for (const b of backoffs) {
      expect(b).toMatchObject({ status: 429, retry_after: "1" });
      expect(["workspace", "locations", "list", "detail", "history"]).toContain(b.endpoint);
      expect(Number(b.wait_ms)).toBeGreaterThanOrEqual(1000);
    }
  });

  it("429s not about the rate that refuse the first request after each named wait set bounds under 1.5 req/s; the run then looks above them and sets a rate over 10 req/s, ending equal to ground truth with no early request", async () => {
    // One request in flight: the burst's three 429s come one per pause, each the first request after the last named
    // wait, which a token bucket explains only under 1 req/s. Before the look above, the run went on at ~1 req/s for good.
    const r = await syncWith([{ kind: "429", every: 40, burst: 3, retryAfter: "seconds:1", count: 1 }], { args: ["--concurrency", "1"] });
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
    expect(r.stats.retryAfterViolations).toEqual([]);
    const rates = query<{ message: string }>(r.db, "SELECT message FROM sync_journal WHERE kind = 'rate' ORDER BY id").map(({ message }) => {
      const m = /send rate ([\d.]+) req\/s \(\w+, quota between [\d.]+ and ([\d.?]+) req\/s\)/.exec(message);
      return { rate: m ? Number(m[1]) : null, top: m && m[2] !== "?" ? Number(m[2]) : null };
    });
    const under = rates.findIndex((x) => x.top !== null && x.top < 1.5);
    expect(under, "the three 429s put the bounds' top under 1.5 req/s").toBeGreaterThanOrEqual(0);
    expect(Math.max(...rates.slice(under + 1).map((x) => x.rate ?? 0)), "a rate set after that").toBeGreaterThan(10);
  });

  it("429 with Retry-After as an HTTP-date is honoured too", async () => {
    const r = await syncWith([{ kind: "429", every: 50, retryAfter: "date:2", count: 2 }]);
    expect(r.code).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
    expect(r.stats.retryAfterViolations).toEqual([]);
    const waits = query<{ retry_after: string; wait_ms: number }>(r.db, "SELECT retry_after, wait_ms FROM sync_journal WHERE kind = 'backoff' AND status = 429");
    expect(waits.length).toBe(2);
    for (const w of waits) {
      expect(w.retry_after).toMatch(/GMT$/);
      expect(w.wait_ms).toBeGreaterThan(1000);
    }
  });

  it("garbage in Retry-After still waits the minimum; 0 or a past date names no wait and gets the short backoff of a 429 without one, never a hot retry loop", async () => {
    for (const [raw, named] of [
      ["raw:0", false],
      ["raw:Thu, 01 Jan 1970 00:00:00 GMT", false],
      ["raw:soon-ish", true],
    ] as const) {
      const r = await syncWith([{ kind: "429", every: 60, retryAfter: raw, count: 1 }]);
      expect(r.code).toBe(0);
      const waits = query<{ wait_ms: number }>(r.db, "SELECT wait_ms FROM sync_journal WHERE kind = 'backoff' AND status = 429");
      expect(waits, raw).toHaveLength(1);
      if (named) expect(waits[0]!.wait_ms, raw).toBeGreaterThanOrEqual(1000);
      else {
        // A few token intervals of what the run sent (NO_RETRY_AFTER_TOKENS), 50 ms at least: not the 1 s floor.
        expect(waits[0]!.wait_ms, raw).toBeGreaterThanOrEqual(50);
        expect(waits[0]!.wait_ms, raw).toBeLessThan(1000);
      }
    }
  });

  it("a Retry-After longer than rateLimit.maxWaitSeconds ends the run partial with 'resume after', and the next run resumes after it", async () => {
    const config = writeConfig({ rateLimit: { maxWaitSeconds: 1 } });
    const db = join(dir, "wall.db");
    // 8 s: long enough that the "straight away" run below starts inside the wall even on a loaded machine.
    const first = await syncWith([{ kind: "429", after: 30, count: 1, retryAfter: "seconds:8" }], { db, config });
    expect(first.code).toBe(1);
    expect(first.stderr).toMatch(/asked to wait 8 s.*resume after/);
    const run = lastRun(db);
    expect(run.status).toBe("partial");
    expect(run.resume_after).not.toBeNull();
    expect(query(db, "SELECT 1 FROM sync_journal WHERE kind = 'partial' AND message LIKE 'quota wall: resume after %'")).toHaveLength(1);
    const done = query<{ n: number }>(db, "SELECT count(*) AS n FROM sku_sync WHERE fetched_walk_id IS NOT NULL")[0]!.n;

    // Straight away: the wall is still in force; no request is sent.
    const early = await syncWith([], { db, config });
    expect(early.code).toBe(1);
    expect(early.stats.requests).toBe(0);

    const resumeAt = typeof run.resume_after === "number" ? run.resume_after : Date.parse(String(run.resume_after));
    expect(Number.isFinite(resumeAt)).toBe(true);
    await new Promise((r) => setTimeout(r, Math.max(0, resumeAt - Date.now()) + 200));
    const later = await syncWith([], { db, config });
    expect(later.code).toBe(0);
    expect(lastRun(db).status).toBe("succeeded");
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    // It resumed: SKUs finished before the wall were not fetched again.
    expect(later.stats.byEndpoint.detail).toBe(80 - done);
  });

  it("after thousands of 429s the process has held no more sockets than its pool (the server seeing at most one more: a socket closed by us, still open on its side when the next opens)", async () => {
    // Adaptation off and a 1 ms minimum wait: this test is about sockets, so it wants many 429s fast.
    // At 85% 429s, 50 in a row for one request (the default retry.max429Retries) happens about once
    // in 3,400 requests, so the bound is raised: this test is about sockets, not the retry bound.
    const config = writeConfig({ rateLimit: { adaptive: false }, retry: { minRetryAfterMs: 1, backoffBaseMs: 1, backoffCapMs: 2, maxRetries: 4, max429Retries: 500 } });
    const r = await syncWith([{ kind: "429", probability: 0.85, retryAfter: "raw:0" }], { config, args: ["--concurrency", "4"] });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stats.byStatus["429"]).toBeGreaterThan(1000);
    // A request held at the write (a 429 arrived between its grant and its write) is aborted, and undici closes its
    // socket; the server counts that socket until it reads the close, which can come after the next socket opens
    // (peak 5 in one CI run of many). A leak of sockets, what this test is for, would count dozens.
    expect(r.stats.peakConnections).toBeLessThanOrEqual(4 + 1);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
  });

  it("503s are retried with backoff and the run completes equal to ground truth", async () => {
    const r = await syncWith([{ kind: "503", every: 7, count: 12 }]);
    expect(r.code).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
    expect(Number(lastRun(r.db).responses_503)).toBe(12);
  });

  it("a 503 whose Retry-After names no wait (0) is backed off as one without it: retried, each wait under a second, the run equal to ground truth", async () => {
    const r = await syncWith([{ kind: "503", every: 7, count: 3, retryAfter: "raw:0" }]);
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
    const waits = query<{ retry_after: string; wait_ms: number }>(r.db, "SELECT retry_after, wait_ms FROM sync_journal WHERE kind = 'backoff' AND status = 503");
    expect(waits).toHaveLength(3);
    for (const w of waits) {
      expect(w.retry_after).toBe("0");
      expect(w.wait_ms).toBeLessThan(1000);
    }
  });

  it("a 503 outage (every request for 150 ms, whichever worker sent it) is outlasted by each request's retries and the run completes equal to ground truth", async () => {
    // Equal jitter: this config's 4 retries span at least 20 + 40 + 80 + 100 = 240 ms, longer than the outage.
    const r = await syncWith([{ kind: "503", after: 40, count: 1, forMs: 150 }]);
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
    expect(Number(lastRun(r.db).responses_503)).toBeGreaterThanOrEqual(1);
    expect(r.stats.byStatus["503"]).toBe(Number(lastRun(r.db).responses_503));
  });

  it("a 503 that never ends fails the run with exit 1 and a clear message, within its retry bound", async () => {
    const r = await syncWith([{ kind: "503" }]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/workspace: HTTP 503.*gave up after 5 attempts/);
    expect(r.stats.requests).toBe(5);
  });

  it("slow responses past the response timeout are retried", async () => {
    const config = writeConfig({ http: { responseTimeoutMs: 300 } });
    const r = await syncWith([{ kind: "slow", delayMs: 1_000, every: 25, count: 4 }], { config });
    expect(r.code).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
    expect(query(r.db, "SELECT 1 FROM sync_journal WHERE kind = 'backoff' AND message LIKE '%response timeout (300 ms)%'").length).toBeGreaterThanOrEqual(1);
  });

  it("connection resets are retried", async () => {
    const r = await syncWith([{ kind: "reset", every: 20, count: 6 }]);
    expect(r.code).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
    expect(r.stats.byStatus.reset).toBe(6);
  });
});

describe("bad responses", () => {
  const kinds: FaultRule["kind"][] = ["malformed-json", "truncated", "wrong-content-type", "html", "missing-field", "oversize"];
  for (const kind of kinds) {
    it(`${kind}: a SKU whose detail keeps failing is recorded and retried next run; the others are not affected`, async () => {
      const victim = sim.groundTruth().skus[5]!.item.id;
      const config = writeConfig({ http: { maxResponseBytes: 2_000_000 } });
      const db = join(dir, `bad-${kind}.db`);
      const first = await syncWith([{ kind, endpoint: "detail", skuId: victim, ...(kind === "oversize" ? { bytes: 3_000_000 } : {}) }], { db, config });
      expect(first.code).toBe(1);
      expect(lastRun(db).status).toBe("partial");
      const failed = query<{ sku_id: string; endpoint: string; message: string }>(db, "SELECT sku_id, endpoint, message FROM sync_journal WHERE kind = 'sku_failed'");
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ sku_id: victim, endpoint: "detail" });
      expect(failed[0]!.message).toMatch(/^detail \(SKU [0-9a-f-]+\): /);
      // Not written half: the victim has no leaf rows and no history; every other SKU is complete.
      expect(query(db, "SELECT 1 FROM sku_location_quantities WHERE sku_id = ?", victim)).toHaveLength(0);
      expect(query(db, "SELECT 1 FROM history WHERE sku_id = ?", victim)).toHaveLength(0);
      expect(diffAgainstTruth(db, sim.groundTruth()).filter((d) => !d.includes(victim))).toEqual([]);

      const second = await syncWith([], { db, config });
      expect(second.code).toBe(0);
      expect(second.stats.byEndpoint.detail).toBe(1);
      expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    });
  }

  it("a garbled body that clears on retry costs a retry, not the SKU", async () => {
    const r = await syncWith([
      { kind: "truncated", endpoint: "history", every: 15, count: 3 },
      { kind: "malformed-json", endpoint: "detail", every: 20, count: 2 },
    ]);
    expect(r.code).toBe(0);
    expect(diffAgainstTruth(r.db, sim.groundTruth())).toEqual([]);
  });

  it("a list cursor the server rejects mid-walk restarts the walk from the first page", async () => {
    const small = await startSimulator({ seed: 9, skus: 250, historyDepth: 3, apiKey: KEY });
    try {
      small.setFaults([{ kind: "reject-cursor", endpoint: "list", count: 1 }]);
      const db = join(dir, "cursor.db");
      const r = await runCli(["sync", "--full", "--config", writeConfig()], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: small.baseUrl, INVENTORY_DB: db } });
      expect(r.code).toBe(0);
      expect(small.stats().byEndpoint.list).toBe(3 + 1 + 1); // 3 pages, the rejected request, page one again
      // The run's summary counts the SKUs of the walk that ended, not page one twice (350 before).
      expect(lastRun(db).skus_listed).toBe(250);
      expect(query(db, "SELECT 1 FROM sync_journal WHERE kind = 'retry' AND message LIKE '%rejected a list cursor%'")).toHaveLength(1);
      expect(diffAgainstTruth(db, small.groundTruth())).toEqual([]);
    } finally {
      await small.close();
    }
  });

  it("too many failing SKUs abort the run (sync.maxFailedShare)", async () => {
    const r = await syncWith([{ kind: "html", endpoint: "detail" }]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/SKUs failed \(\d+\.\d% > sync.maxFailedShare 5%\)/);
    expect(lastRun(r.db).status).toBe("failed");
  });
});
