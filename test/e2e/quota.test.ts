/**
 * A full sync against the simulator's workspace quota (a token bucket, 50 requests/s):
 * the adaptive send rate keeps 429s rare, every Retry-After is honoured, and the mirror
 * ends equal to ground truth. A reduced form of issue 3's "done when" (2,000 SKUs at
 * 50 requests/s), which takes 80 s by construction; this one sends ~1,000 requests (at ~600, the
 * requests in flight when the bucket first runs dry, up to 16 on a loaded machine, were 2.1 % in a CI run).
 * And a fixed window (100 requests per 3 s): its allowance goes out as each window opens; and one
 * whose 429s name no wait, which the rate climbs back to. And a sliding window (100 in any 4 s),
 * which no clock aligns.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";

const KEY = "sim_e2e_quota_4d3c2b1a0f9e8d7c6b5a4938";
const QUOTA_RPS = 50;
let sim: RunningSimulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 13, skus: 500, apiKey: KEY, quota: { requestsPerSecond: QUOTA_RPS } });
  dir = mkdtempSync(join(tmpdir(), "im-quota-"));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A full sync into `name` against `server` from fresh counters: the CLI's result and the server's counters. */
async function fullSync(server: RunningSimulator, name: string, timeoutMs?: number) {
  const db = join(dir, name);
  server.resetStats();
  const r = await runCli(["sync", "--full", "--no-progress"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: server.baseUrl, INVENTORY_DB: db }, timeoutMs });
  const stats = server.stats();
  expect(r.code, r.stderr).toBe(0);
  expect(diffAgainstTruth(db, server.groundTruth())).toEqual([]);
  expect(stats.retryAfterViolations).toEqual([]);
  return { db, stats };
}

describe("workspace quota", () => {
  it(`a full sync of 500 SKUs under a ${QUOTA_RPS} requests/s quota ends equal to ground truth, with under 2% of requests answered 429 and no Retry-After violated`, async () => {
    const { db, stats } = await fullSync(sim, "quota.db");

    const r429 = stats.byStatus["429"] ?? 0;
    // The quota was reached (the client sends unthrottled until its first 429), so the rate had to adapt.
    expect(r429).toBeGreaterThan(0);
    expect(stats.rateLimited).toBe(r429);
    expect(r429 / stats.requests).toBeLessThan(0.02);

    // The run's own accounting agrees with the server's.
    const d = new Database(db, { readonly: true });
    try {
      const run = d.prepare("SELECT status, requests, responses_429 FROM sync_runs ORDER BY id DESC LIMIT 1").get();
      expect(run).toEqual({ status: "succeeded", requests: stats.requests, responses_429: r429 });
    } finally {
      d.close();
    }
  });
});

describe("the quota a run learned, for the next run", () => {
  it("a full sync keeps what it learned of the quota for this server (no key in it); the next run starts there, held at that rate from its first request, and its journal says where the rate came from", async () => {
    const { db } = await fullSync(sim, "learned.db");
    const read = <T>(sql: string) => {
      const d = new Database(db, { readonly: true });
      try {
        return d.prepare(sql).all() as T[];
      } finally {
        d.close();
      }
    };
    const kept = read<{ server: string; low: number; high: number; run_id: number }>("SELECT server, low, high, run_id FROM learned_quota");
    expect(kept).toHaveLength(1);
    // The server is its origin and path prefix: a second server (another port) starts afresh.
    expect(kept[0]!.server).toBe(sim.baseUrl.replace(/\/+$/, ""));
    // Found: not the rate the old estimator settled at (a third of it). Near the quota, not within 1 %: the
    // bounds are counted by the client's send times, and a loaded machine delaying the server's arrivals by
    // 100 ms over a span of seconds moves them a few percent (51.5 for 50 req/s in one full-suite run). How
    // close the scheduler comes is measured in virtual time (test/scheduler/) and by the bench.
    expect(kept[0]!.low).toBeGreaterThan(QUOTA_RPS * 0.6);
    expect(kept[0]!.low).toBeLessThanOrEqual(QUOTA_RPS * 1.1);
    expect(kept[0]!.high).toBeGreaterThanOrEqual(kept[0]!.low);
    expect(JSON.stringify(read("SELECT * FROM learned_quota"))).not.toContain(KEY);

    const r = await runCli(["sync", "--no-progress"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
    expect(r.code, r.stderr).toBe(0);
    const rates = read<{ message: string }>("SELECT message FROM sync_journal WHERE kind = 'rate' AND run_id = (SELECT max(id) FROM sync_runs) ORDER BY id");
    expect(rates.length, "the starting line and the hold it sets").toBeGreaterThanOrEqual(2);
    expect(rates[0]!.message).toMatch(new RegExp(`^starting at ${kept[0]!.low.toFixed(1)} req/s: the quota run ${kept[0]!.run_id} learned \\d+ min ago`));
    // The pacer is set before the first request: held at the rate kept (less the hold's margin), not unpaced.
    const held = /^send rate ([\d.]+) req\/s \(hold,/.exec(rates[1]!.message);
    expect(held, rates[1]!.message).not.toBeNull();
    expect(Number(held![1])).toBeGreaterThanOrEqual(kept[0]!.low * 0.98);
    // The line rounds the rate to 0.1 req/s: a hold at 48.951 reads "49.0" (one CI run).
    expect(Number(held![1])).toBeLessThanOrEqual(kept[0]!.low * 1.001 + 0.05);
  });
});

describe("workspace quota as a fixed window", () => {
  // The window opens as the quota is set, just before the sync. Its first 429 then names an end at least 2 s
  // away (the CLI starts in well under 8 s), which the scheduler reads as a window's. A window already under
  // way may name an end under 2 s away, which reads as a token bucket's next token: then the in-flight
  // requests of the second window's close are refused too (12 x 429 more with a 3 s window opened at the
  // simulator's start on a loaded machine; 14 more with 5 s windows in one full-suite run, where the CLI
  // took over 3 s to start; docs/server-variance.md).
  const WINDOW = { kind: "fixed-window", requests: 100, windowSeconds: 10 } as const;
  let win: RunningSimulator;
  beforeAll(async () => {
    win = await startSimulator({ seed: 14, skus: 150, apiKey: KEY, quota: WINDOW });
  });
  afterAll(async () => {
    await win?.close();
  });

  it("a full sync under 100 requests per 10 s window ends equal to ground truth; the scheduler takes the window for one (its journal says so), no Retry-After violated, at most one 429 per window beyond the first window's in-flight ones", async () => {
    win.setQuota(WINDOW);
    const { db, stats } = await fullSync(win, "window.db");
    const windows = Math.ceil(stats.requests / 100);
    expect(stats.rateLimited).toBeGreaterThan(0);
    const d = new Database(db, { readonly: true });
    try {
      const rates = d.prepare("SELECT message FROM sync_journal WHERE kind = 'rate'").pluck().all() as string[];
      expect(rates.some((m) => m.includes("window's allowance goes out at once"))).toBe(true);
      // The first window's 429s are the requests in flight when it closed: they come back before its pause ends
      // (how many depends on the in-flight limit, which follows the measured round trips: 4 on a quiet loopback,
      // more on a loaded machine). Beyond them, at most one 429 per window.
      const backoffs = d.prepare("SELECT at, wait_ms AS waitMs FROM sync_journal WHERE kind = 'backoff' AND status = 429 ORDER BY id").all() as Array<{ at: string; waitMs: number }>;
      expect(backoffs.length).toBe(stats.rateLimited);
      const firstEnds = Date.parse(backoffs[0]!.at) + backoffs[0]!.waitMs;
      const inFlightAtFirst = backoffs.filter((b) => Date.parse(b.at) < firstEnds).length;
      expect(inFlightAtFirst).toBeLessThanOrEqual(16); // the default concurrency ceiling
      expect(stats.rateLimited - inFlightAtFirst).toBeLessThanOrEqual(windows - 1);
    } finally {
      d.close();
    }
  });
});

describe("workspace quota as a fixed window whose Retry-After is an ISO 8601 moment", () => {
  // Outside RFC 9110, but what a server that writes dates the JavaScript way (toISOString) sends. Read as
  // garbage (the 1 s floor), no 429 named a window's end: the window was replayed as a token bucket and the
  // run held at 0.5-0.6 req/s (300 per 10 s, 600 SKUs: not done in 14 minutes where 40 s do; BENCHMARKS.md).
  const WINDOW = { kind: "fixed-window", requests: 100, windowSeconds: 10, retryAfter: "date-iso" } as const;
  let win: RunningSimulator;
  beforeAll(async () => {
    win = await startSimulator({ seed: 31, skus: 60, apiKey: KEY, quota: WINDOW });
  });
  afterAll(async () => {
    await win?.close();
  });

  it("a full sync under 100 requests per 10 s window ends equal to ground truth with no Retry-After violated, and the scheduler takes the window for one (its journal says so)", async () => {
    win.setQuota(WINDOW);
    const { db, stats } = await fullSync(win, "window-iso.db");
    expect(stats.rateLimited).toBeGreaterThan(0);
    const d = new Database(db, { readonly: true });
    try {
      const rates = d.prepare("SELECT message FROM sync_journal WHERE kind = 'rate'").pluck().all() as string[];
      expect(rates.some((m) => m.includes("window's allowance goes out at once"))).toBe(true);
      const named = d.prepare("SELECT retry_after FROM sync_journal WHERE kind = 'backoff' AND status = 429").pluck().all() as string[];
      // Every 429 the server sent is in the journal, each with the moment as sent.
      expect(named).toHaveLength(stats.rateLimited);
      for (const ra of named) expect(ra).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    } finally {
      d.close();
    }
  });
});

describe("workspace quota as a fixed window whose 429s name no wait", () => {
  let win: RunningSimulator;
  beforeAll(async () => {
    win = await startSimulator({ seed: 15, skus: 150, apiKey: KEY, quota: { kind: "fixed-window", requests: 100, windowSeconds: 2, retryAfter: "none" } });
  });
  afterAll(async () => {
    await win?.close();
  });

  it("a full sync under 100 requests per 2 s window without Retry-After ends equal to ground truth, and after the lowest send rate it set, either one above 40 req/s is set again or each window's allowance goes out at once (read as a token bucket, the refusals held it under 4 req/s for minutes)", async () => {
    const { db, stats } = await fullSync(win, "window-no-ra.db");
    expect(stats.rateLimited).toBeGreaterThan(0);
    const d = new Database(db, { readonly: true });
    try {
      const messages = d.prepare("SELECT message FROM sync_journal WHERE kind = 'rate' ORDER BY id").pluck().all() as string[];
      // A rate per message (the window's unpaced sending counts as above any rate).
      const rates = messages.map((m) => (m.startsWith("send unpaced (a fixed window") ? Infinity : Number(/send rate ([\d.]+) req\/s/.exec(m)?.[1] ?? Number.NaN)));
      // The ramp before the first refusals went over 40 too: what counts is what comes after the lowest rate set.
      const known = rates.filter((r) => !Number.isNaN(r));
      const lowest = known.indexOf(Math.min(...known));
      expect(Math.max(...known.slice(lowest))).toBeGreaterThan(40);
    } finally {
      d.close();
    }
  });
});

describe("workspace quota as a sliding window (a log of admissions)", () => {
  // At most 100 requests in any 4 s, counted from each admission: nothing is aligned to a clock, and a
  // refusal names the moment the oldest admission leaves the log (whole seconds, rounded up).
  const SLIDING = { kind: "sliding-window", requests: 100, windowSeconds: 4 } as const;
  let log: RunningSimulator;
  beforeAll(async () => {
    log = await startSimulator({ seed: 16, skus: 120, apiKey: KEY, quota: SLIDING });
  });
  afterAll(async () => {
    await log?.close();
  });

  it("a full sync under 100 requests in any 4 s ends equal to ground truth with no Retry-After violated", async () => {
    const { stats } = await fullSync(log, "sliding.db");
    expect(stats.rateLimited).toBeGreaterThan(0); // the log was reached: the run had to wait it out
    expect(stats.accepted).toBeGreaterThan(2 * SLIDING.requests); // three windows' worth at least
  });
});

describe("workspace quota as a token bucket of one token behind latency", () => {
  // 40 req/s without burst, every response 20 ± 2 ms late: two requests that reach the server within 25 ms
  // of each other are a 429 and a second's pause for every worker. The matrix cells of this shape are the
  // bench's (BENCHMARKS.md: how close to the quota); this is the real CLI's correctness under it.
  let slow: RunningSimulator;
  beforeAll(async () => {
    slow = await startSimulator({ seed: 17, skus: 30, apiKey: KEY, quota: { requestsPerSecond: 40, burst: 1 }, latencyMs: 20, latencyJitterMs: 2 });
  });
  afterAll(async () => {
    await slow?.close();
  });

  it("a full sync under 40 requests/s without burst, 20 ms away, ends equal to ground truth with no Retry-After violated, and a rerun adds no history row", async () => {
    const { db, stats } = await fullSync(slow, "one-token.db");
    expect(stats.requests).toBeGreaterThan(60); // detail and history of 30 SKUs, and the list
    const rerun = await runCli(["sync", "--full", "--no-progress", "--json"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: slow.baseUrl, INVENTORY_DB: db } });
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(JSON.parse(rerun.stdout.trim().split("\n").at(-1)!)).toMatchObject({ status: "succeeded", historyRowsAdded: 0 });
    expect(slow.stats().retryAfterViolations).toEqual([]);
    expect(diffAgainstTruth(db, slow.groundTruth())).toEqual([]);
  });
});

describe("a server that serves at most 4 requests at once (a limit on concurrency, not rate)", () => {
  // Every response 40 ± 20 ms late, at most 4 being answered at once, one more a 429 naming 1 s: no rate is too
  // fast for it, only too many in flight. How close to it runs is the bench's (BENCHMARKS.md); this is the real
  // CLI's correctness under it, and the limit its journal names once found.
  let narrow: RunningSimulator;
  beforeAll(async () => {
    narrow = await startSimulator({ seed: 18, skus: 150, apiKey: KEY, concurrencyLimit: { maxInFlight: 4 }, latencyMs: 40, latencyJitterMs: 20 });
  });
  afterAll(async () => {
    await narrow?.close();
  });

  it("a full sync ends equal to ground truth with no Retry-After violated, and any limit on in flight its journal names is 4 (none lower, none higher)", async () => {
    const { db, stats } = await fullSync(narrow, "in-flight.db");
    expect(stats.rateLimited).toBeGreaterThan(0); // the limit was reached
    const d = new Database(db, { readonly: true });
    try {
      const found = (d.prepare("SELECT message FROM sync_journal WHERE kind = 'rate'").pluck().all() as string[]).filter((m) => m.includes("a limit on requests in flight"));
      for (const m of found) expect(m).toMatch(/^send unpaced, up to 4 in flight/);
    } finally {
      d.close();
    }
  });
});

describe("workspace quota whose Retry-After is cut down to whole seconds", () => {
  // A server that writes Math.floor of its wait names "0" for every token bucket's next token (milliseconds
  // away): no wait. Held to the 1 s floor each 429 cost a second (40/s burst 10, 600 SKUs: 1.100-1.104x its
  // least time, against 1.010-1.015x read as none; BENCHMARKS.md).
  let floor: RunningSimulator;
  beforeAll(async () => {
    floor = await startSimulator({ seed: 29, skus: 60, apiKey: KEY, quota: { requestsPerSecond: 40, burst: 5, retryAfter: "seconds-floor" } });
  });
  afterAll(async () => {
    await floor?.close();
  });

  it('a full sync under 40 requests/s (burst 5) whose 429s say "Retry-After: 0" ends equal to ground truth with no Retry-After violated, and waits out none of them for the 1 s floor', async () => {
    const { db, stats } = await fullSync(floor, "seconds-floor.db");
    expect(stats.byStatus["429"] ?? 0).toBeGreaterThan(0);
    const d = new Database(db, { readonly: true });
    try {
      const waits = d.prepare("SELECT retry_after, wait_ms FROM sync_journal WHERE kind = 'backoff' AND status = 429").all() as { retry_after: string; wait_ms: number }[];
      expect(waits.length).toBeGreaterThan(0);
      for (const w of waits) {
        expect(w.retry_after).toBe("0");
        expect(w.wait_ms).toBeLessThan(1_000);
      }
    } finally {
      d.close();
    }
  });
});

describe("workspace quota of a server whose clock is not ours, its Retry-After an HTTP-date", () => {
  // A date names a moment on the server's clock. Read on ours, a server 30 s behind named moments that looked
  // past (no wait: back while it still refused, Retry-After violated), and one 30 s ahead waits of 31 s for each
  // 429 meant as 1 s. Read on its own clock (its Date header, server-clock.ts), each is waited as meant.
  const QUOTA = { requestsPerSecond: 40, burst: 5, retryAfter: "date" } as const;
  for (const skewMs of [-30_000, 30_000]) {
    const way = skewMs < 0 ? "behind" : "ahead of";
    it(`a full sync under 40 requests/s (burst 5) whose server's clock is 30 s ${way} ours ends equal to ground truth with no Retry-After violated, each 429 waited about as long as it meant (not 30 s more or less), and the journal says the clocks differ`, async () => {
      const skewed = await startSimulator({ seed: 33, skus: 60, apiKey: KEY, quota: QUOTA, clockSkewMs: skewMs });
      try {
        const { db, stats } = await fullSync(skewed, `clock-${skewMs}.db`);
        expect(stats.byStatus["429"] ?? 0).toBeGreaterThan(0);
        const d = new Database(db, { readonly: true });
        try {
          const waits = d.prepare("SELECT wait_ms FROM sync_journal WHERE kind = 'backoff' AND status = 429").pluck().all() as number[];
          expect(waits.length).toBeGreaterThan(0);
          // A date rounded up to its second names at most a second ahead; read on the server's clock, up to a second
          // more and the answer's way back (30 s more or less on our clock).
          for (const w of waits) expect(w).toBeLessThan(3_000);
          const said = d.prepare("SELECT message FROM sync_journal WHERE kind = 'suspicious'").pluck().all() as string[];
          const by = said.map((m) => new RegExp(`reads ([\\d.]+) s ${way} ours`).exec(m)?.[1]).filter((x) => x !== undefined);
          expect(by.length).toBeGreaterThan(0);
          // A Date header is cut to its second: the difference is known to within a second (and the answer's way
          // back) until stamps cross one.
          for (const s of by) expect(Math.abs(Number(s) - 30)).toBeLessThanOrEqual(1.5);
        } finally {
          d.close();
        }
      } finally {
        await skewed.close();
      }
    });
  }
});

describe("workspace quota behind latency on the way in as well as the way back", () => {
  // Where a server spends its latency relative to its quota's decision is not shown. Half of it here
  // comes before the decision, each way jittered apart: requests sent in one order can be decided in
  // another, and a wait counted from an answer no longer ends a fixed time after the server decided.
  let split: RunningSimulator;
  beforeAll(async () => {
    split = await startSimulator({ seed: 19, skus: 30, apiKey: KEY, quota: { requestsPerSecond: 40, burst: 4 }, latencyMs: 20, latencyJitterMs: 8, latencyInboundShare: 0.5 });
  });
  afterAll(async () => {
    await split?.close();
  });

  it("a full sync under 40 requests/s (burst 4), 20 ± 8 ms away half of it before the quota decides, ends equal to ground truth with no Retry-After violated", async () => {
    const { stats } = await fullSync(split, "split-latency.db");
    expect(stats.requests).toBeGreaterThan(60);
  });
});

describe("workspace quota of a server that stalls", () => {
  // A busy server holds what arrives in its own stall and decides it all at once at its end (stalls of up
  // to 30 ms here about every 200 ms): the tokens of that batch are taken together, not when we sent them.
  let stalling: RunningSimulator;
  beforeAll(async () => {
    stalling = await startSimulator({ seed: 26, skus: 60, apiKey: KEY, quota: { requestsPerSecond: 100, burst: 5 }, stall: { everyMs: 200, ms: 30 } });
  });
  afterAll(async () => {
    await stalling?.close();
  });

  it("a full sync under 100 requests/s (burst 5) whose server stalls ends equal to ground truth with no Retry-After violated, and requests were held in stalls", async () => {
    const { stats } = await fullSync(stalling, "stalls.db");
    expect(stats.requests).toBeGreaterThan(120);
    expect(stats.stalled).toBeGreaterThan(0);
  });
});

describe("workspace window behind a limit before authentication", () => {
  // The document names both: a quota per workspace and a limit before authentication. A window's allowance
  // sent at once meets the per-client bucket in front of it; each of that bucket's 429s (a second's wait) was
  // taken for the window's end, and 29 % of requests were refused (real, 200 per 10 s behind 50/s burst 5: 2.7x).
  // 250 per 25 s: the bucket's rate is learnt within about 6 s and held, the first window's allowance is out
  // within about 11 s, and the 429 that ends it names a window's end seconds away after a hold of many passes
  // (a window's, not a bucket's; with 100 per 15 s the learning's last pause came too close to the window's end
  // for that, and the run went on as a bucket's, which it also is).
  const WINDOW = { kind: "fixed-window", requests: 250, windowSeconds: 25 } as const;
  let pre: RunningSimulator;
  beforeAll(async () => {
    pre = await startSimulator({ seed: 24, skus: 150, apiKey: KEY, quota: WINDOW, preAuthLimit: { requestsPerSecond: 25, burst: 5 } });
  });
  afterAll(async () => {
    await pre?.close();
  });

  it("a full sync under 250 requests per 25 s behind 25 requests/s (burst 5) before authentication ends equal to ground truth with no Retry-After violated, and under 10% of requests are refused", async () => {
    pre.setQuota(WINDOW);
    pre.setPreAuthLimit({ requestsPerSecond: 25, burst: 5 });
    const { stats } = await fullSync(pre, "window-behind-preauth.db");
    expect(stats.preAuthLimited).toBeGreaterThan(0);
    // Not which reading the run took (a window paced within, or a bucket's): that depends on when the window's
    // allowance runs out. In one CI run on a loaded machine the learning's pauses made it run out near the
    // window's end (or not in the first window at all), and the run went on as a bucket's, correct and within
    // the share. The paced window is asserted in virtual time (quota-shapes.test.ts, a window behind a bucket).
    expect(stats.rateLimited / stats.requests).toBeLessThan(0.1);
  });
});

describe("a window before authentication in front of a workspace token bucket", () => {
  // The other way round from the describe above: the limit before authentication is a fixed window (the
  // document gives neither limit's shape), the workspace quota a bucket whose burst is under the window's
  // allowance. Each window's allowance sent at once meets the bucket; the two limits' 429s name different
  // waits in different words. Real CLI, by hand (one run each): window 200 per 5 s before 100/s burst 20,
  // 1.03x its least time, 1.2 % 429s; 600 per 30 s before 50/s burst 10, 1.02x, 0.9 %; a log of 100 in any
  // 2 s before 80/s burst 80, 1.14x, 6.4 % (BENCHMARKS.md). Here the window (50 per 3 s, under 17/s) is the
  // tighter limit, so it must refuse before the run can end: with 100 per 3 s it was barely met (1 refusal in
  // each of 3 runs by hand) and a CI run on a loaded machine, slowed by the bucket's pauses, never met it.
  // 50 per 3 s by hand: 3 of its refusals in each of 3 runs, 1.01x its least time (15 s).
  const PRE_WINDOW = { kind: "fixed-window", requests: 50, windowSeconds: 3 } as const;
  const BUCKET = { requestsPerSecond: 60, burst: 10 } as const;
  let pre: RunningSimulator;
  beforeAll(async () => {
    pre = await startSimulator({ seed: 25, skus: 120, apiKey: KEY, quota: BUCKET, preAuthLimit: PRE_WINDOW });
  });
  afterAll(async () => {
    await pre?.close();
  });

  it("a full sync under 50 requests per 3 s before authentication and 60 requests/s (burst 10) behind it ends equal to ground truth with no Retry-After violated; the window before authentication refused", async () => {
    pre.setQuota(BUCKET);
    pre.setPreAuthLimit(PRE_WINDOW);
    const { stats } = await fullSync(pre, "bucket-behind-preauth-window.db");
    // The window before authentication was met (the run's ~250 requests cannot go under 17/s without learning it
    // from its refusals, and the bucket never bounds the rate that low); whether the bucket refused too depends
    // on how fast a cold process sends its first requests.
    expect(stats.preAuthLimited).toBeGreaterThan(0);
  });
});

describe("workspace quota shared with another client of the workspace", () => {
  // The mirror runs beside an application that spends the same quota: some of our 429s come from its
  // requests taking the token, at a rate the counts had proved. Retried, and honoured, like any other.
  // What this asserts is the mirror's correctness, not its pace: a 429 early in the ramp that the other
  // client drew sets the bounds' top low (by hand, 1 run in 8 of this test's shape: 21 s against 7 s, held
  // at 3.5-4 req/s of the 25 left). Usually 11-14 s for 80 SKUs here; in one CI dry run on a loaded machine
  // such a 429 left the rate at 1 req/s and the CLI ran out of its 110 s with 51 of 80 SKUs done (the
  // ratchet that later 429s added is mended: a contested quota follows AIMD). So 40 SKUs, and time for that pace.
  let shared: RunningSimulator;
  beforeAll(async () => {
    shared = await startSimulator({ seed: 23, skus: 40, apiKey: KEY, quota: { requestsPerSecond: 40, burst: 4, otherClientRps: 15 } });
  });
  afterAll(async () => {
    await shared?.close();
  });

  it("a full sync under 40 requests/s (burst 4) that another client spends at 15 requests/s ends equal to ground truth with no Retry-After violated", { timeout: 260_000 }, async () => {
    const { stats } = await fullSync(shared, "shared-quota.db", 240_000);
    // The quota really was shared: the other client's requests took some of it.
    const other = stats.otherClient!;
    expect(other.requests - other.refused).toBeGreaterThan(0);
    expect(stats.requests).toBeGreaterThan(80); // detail and history of 40 SKUs, and the list
  });
});
