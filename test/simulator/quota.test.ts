/**
 * The workspace quota (token bucket, 429 + Retry-After) and the Retry-After ledger that
 * records clients coming back too early.
 */
import { afterEach, describe, expect, it } from "vitest";
import { request, Agent } from "node:http";
import {
  ConcurrencyLimit,
  createQuota,
  FixedWindow,
  quotaRetryAfter,
  RETRY_AFTER_GRACE_MS,
  RetryAfterLedger,
  retryAfterDeadline,
  type SharedQuota,
  SlidingWindow,
  TokenBucket,
} from "../../src/simulator/quota.js";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { createRng } from "../../src/simulator/prng.js";
import { latencyLegs } from "../../src/simulator/server.js";
import { profileOptions } from "../../src/simulator/profiles.js";
import { QUOTA_PROFILES } from "../../src/simulator/quota-profiles.js";
import { API, get, sleep } from "./helpers.js";

describe("SharedQuota: another client spends the same quota (fake clock)", () => {
  it("its arrivals take from the bucket as they fall, replayed before each of ours; together never past the quota; the same arrivals each time", () => {
    const run = () => {
      let now = 0;
      const q = createQuota({ requestsPerSecond: 10, burst: 10, otherClientRps: 5 }, () => now) as SharedQuota;
      let ours = 0;
      for (; now <= 10_000; now += 50) if (q.take().ok) ours++;
      return { ours, other: q.otherRequests, otherAdmitted: q.otherRequests - q.otherRefused };
    };
    const a = run();
    expect(a.other).toBeGreaterThan(30); // Poisson at 5/s over 10 s: about 50
    expect(a.other).toBeLessThan(70);
    expect(a.ours + a.otherAdmitted).toBeLessThanOrEqual(10 + 10 * 10);
    expect(a.ours + a.otherAdmitted).toBeGreaterThan(10 * 10 - 5); // we asked for 20/s: the bucket was kept busy
    expect(a.otherAdmitted).toBeGreaterThan(0); // some of the bucket went to it, not to us
    expect(run()).toEqual(a);
  });

  it("an idle spell of ours still sees the other client's requests: a fast one empties the bucket meanwhile", () => {
    let now = 0;
    const q = createQuota({ requestsPerSecond: 10, burst: 10, otherClientRps: 200 }, () => now) as SharedQuota;
    now = 1_000;
    expect(q.take().ok).toBe(false);
    expect(q.otherRequests).toBeGreaterThan(100);
    expect(() => createQuota({ requestsPerSecond: 10, otherClientRps: 0 })).toThrow(/otherClientRps/);
  });
});

describe("TokenBucket (fake clock)", () => {
  it("allows a burst, then one request per 1/rate, and names the wait in whole seconds ≥ 1", () => {
    let now = 0;
    const b = new TokenBucket({ requestsPerSecond: 2, burst: 3 }, () => now);
    expect([b.take(), b.take(), b.take()].every((r) => r.ok)).toBe(true);
    expect(b.take()).toEqual({ ok: false, retryAfterSeconds: 1, waitMs: 500 });
    now += 499;
    expect(b.take().ok).toBe(false);
    now += 2;
    expect(b.take().ok).toBe(true);
    const slow = new TokenBucket({ requestsPerSecond: 0.1 }, () => now);
    expect(slow.capacity).toBe(1);
    expect(slow.take().ok).toBe(true);
    expect(slow.take()).toMatchObject({ ok: false, retryAfterSeconds: 10 });
    now += 4000;
    expect(slow.take()).toMatchObject({ ok: false, retryAfterSeconds: 6 });
    expect(new TokenBucket({ requestsPerSecond: 50 }, () => now).capacity).toBe(50);
    expect(() => new TokenBucket({ requestsPerSecond: 0 })).toThrow(RangeError);
  });
});

describe("TokenBucket counting cost per endpoint (fake clock)", () => {
  it("takes each endpoint's tokens, refuses a request its cost does not fit, and names the wait until it does", () => {
    let now = 0;
    const b = new TokenBucket({ requestsPerSecond: 10, burst: 10, costs: { history: 3 } }, () => now);
    expect([b.take("history"), b.take("history"), b.take("history")].every((r) => r.ok)).toBe(true);
    // 1 token left: a detail (cost 1) passes, a history page (3) waits until 3 are there.
    expect(b.take("history")).toEqual({ ok: false, retryAfterSeconds: 1, waitMs: 200 });
    expect(b.take("detail").ok).toBe(true);
    expect(b.take("history")).toMatchObject({ ok: false, waitMs: 300 });
    now += 300;
    expect(b.take("history").ok).toBe(true);
    expect(() => new TokenBucket({ requestsPerSecond: 10, burst: 2, costs: { history: 3 } })).toThrow(RangeError);
  });
});

describe("ConcurrencyLimit", () => {
  it("admits up to maxInFlight requests being answered, refuses one more for retryAfterMs, and frees a place at each release", () => {
    const c = new ConcurrencyLimit({ maxInFlight: 2 });
    expect([c.take().ok, c.take().ok]).toEqual([true, true]);
    expect(c.take()).toEqual({ ok: false, retryAfterSeconds: 1, waitMs: 1_000 });
    c.release();
    expect(c.take().ok).toBe(true);
    expect(new ConcurrencyLimit({ maxInFlight: 1, retryAfterMs: 250 }).take()).toMatchObject({ ok: true });
    expect(() => new ConcurrencyLimit({ maxInFlight: 0 })).toThrow(RangeError);
  });
});

describe("ConcurrencyLimit over HTTP", () => {
  let sim: RunningSimulator | undefined;
  afterEach(async () => {
    await sim?.close();
    sim = undefined;
  });

  it("of three requests at once answered 400 ms later, the third is refused with Retry-After; the next, after them, passes", async () => {
    // 400 ms: the three must all arrive while the first two are still being answered, on a loaded machine too.
    sim = await startSimulator({ seed: 3, skus: 5, historyDepth: 2, concurrencyLimit: { maxInFlight: 2 }, latencyMs: 400 });
    const s = sim;
    const answers = await Promise.all([0, 1, 2].map(() => get(s, `${API}/workspace`)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 429]);
    expect(answers.find((a) => a.status === 429)!.headers.get("retry-after")).toBe("1");
    expect((await get(s, `${API}/workspace`)).status).toBe(200);
  });
});

describe("TokenBucket with no burst (fake clock)", () => {
  it("admits one request per 1/rate from the start, and the exact wait is below the whole seconds it names", () => {
    let now = 1_000;
    const b = new TokenBucket({ requestsPerSecond: 5, burst: 1 }, () => now);
    expect(b.take().ok).toBe(true);
    expect(b.take()).toEqual({ ok: false, retryAfterSeconds: 1, waitMs: 200 });
    now += 150;
    const r = b.take();
    expect(r.ok).toBe(false);
    expect(r.ok ? 0 : r.waitMs).toBeCloseTo(50, 6);
    now += 50;
    expect(b.take().ok).toBe(true);
    // A long pause refills one token only: no burst to spend.
    now += 10_000;
    expect([b.take().ok, b.take().ok]).toEqual([true, false]);
  });
});

describe("TokenBucket part empty at the first request (fake clock)", () => {
  it("holds startTokens when the first request comes, however long after the quota was set, then refills at its rate", () => {
    let now = 0;
    const b = new TokenBucket({ requestsPerSecond: 40, burst: 10, startTokens: 0 }, () => now);
    now = 5_000; // a client's start-up: nothing refilled meanwhile
    expect(b.take().ok).toBe(false);
    now += 25; // one token at 40/s
    expect(b.take().ok).toBe(true);
    expect(b.take().ok).toBe(false);
    now += 1_000; // full again, capped at the burst
    for (let i = 0; i < 10; i++) expect(b.take().ok).toBe(true);
    expect(b.take().ok).toBe(false);
  });
  it("refuses a start level outside 0..burst", () => {
    expect(() => new TokenBucket({ requestsPerSecond: 40, burst: 10, startTokens: 11 })).toThrow(RangeError);
    expect(() => new TokenBucket({ requestsPerSecond: 40, burst: 10, startTokens: -1 })).toThrow(RangeError);
  });
});

describe("FixedWindow (fake clock)", () => {
  it("admits N per window aligned to the quota's start, and points a refusal at the window's end", () => {
    let now = 5_000;
    const w = new FixedWindow({ kind: "fixed-window", requests: 3, windowSeconds: 10 }, () => now);
    now += 7_250; // first request late in the first window: windows do not start at the first request
    expect([w.take().ok, w.take().ok, w.take().ok]).toEqual([true, true, true]);
    expect(w.take()).toEqual({ ok: false, waitMs: 2_750, retryAfterSeconds: 3 });
    now += 2_749;
    expect(w.take()).toEqual({ ok: false, waitMs: 1, retryAfterSeconds: 1 });
    now += 1; // 10 s after the start: a new window
    expect([w.take().ok, w.take().ok, w.take().ok, w.take().ok]).toEqual([true, true, true, false]);
    now += 25_000; // windows skipped while idle do not carry over
    expect([w.take().ok, w.take().ok, w.take().ok, w.take().ok]).toEqual([true, true, true, false]);
    expect(w.take()).toEqual({ ok: false, waitMs: 5_000, retryAfterSeconds: 5 });
  });

  it("refuses bad shapes", () => {
    expect(() => createQuota({ kind: "fixed-window", requests: 0, windowSeconds: 1 })).toThrow(RangeError);
    expect(() => createQuota({ kind: "fixed-window", requests: 2.5, windowSeconds: 1 })).toThrow(RangeError);
    expect(() => createQuota({ kind: "fixed-window", requests: 2, windowSeconds: 0 })).toThrow(RangeError);
    expect(() => createQuota({ kind: "leaky" as never, requestsPerSecond: 1 })).toThrow(RangeError);
    expect(() => createQuota({ requestsPerSecond: 1, retryAfter: "minutes" as never })).toThrow(RangeError);
    expect(createQuota({ kind: "fixed-window", requests: 2, windowSeconds: 1 })).toBeInstanceOf(FixedWindow);
    expect(createQuota({ requestsPerSecond: 1 })).toBeInstanceOf(TokenBucket);
  });
});

describe("SlidingWindow (fake clock)", () => {
  it("admits at most N in any W seconds from the first request on, and points a refusal at the oldest admission's leaving", () => {
    let now = 5_000;
    const w = new SlidingWindow({ kind: "sliding-window", requests: 3, windowSeconds: 10 }, () => now);
    now += 7_250; // unlike a fixed window, nothing is aligned to the quota's start
    expect(w.take().ok).toBe(true); // at 12.25 s
    now += 1_000;
    expect([w.take().ok, w.take().ok]).toEqual([true, true]); // at 13.25 s
    expect(w.take()).toEqual({ ok: false, waitMs: 9_000, retryAfterSeconds: 9 });
    now += 9_000; // 22.25 s: the first admission leaves the log, one slot frees
    expect([w.take().ok, w.take().ok]).toEqual([true, false]);
    expect(w.take()).toEqual({ ok: false, waitMs: 1_000, retryAfterSeconds: 1 });
    now += 1_000; // 23.25 s: the two of 13.25 s leave
    expect([w.take().ok, w.take().ok, w.take().ok]).toEqual([true, true, false]);
    now += 60_000; // idle: the log empties, a whole allowance at once
    expect([w.take().ok, w.take().ok, w.take().ok, w.take().ok]).toEqual([true, true, true, false]);
  });

  it("refuses bad shapes and is what createQuota builds for its kind", () => {
    expect(() => createQuota({ kind: "sliding-window", requests: 0, windowSeconds: 1 })).toThrow(RangeError);
    expect(() => createQuota({ kind: "sliding-window", requests: 2, windowSeconds: -1 })).toThrow(RangeError);
    expect(createQuota({ kind: "sliding-window", requests: 2, windowSeconds: 1 })).toBeInstanceOf(SlidingWindow);
  });
});

describe("quotaRetryAfter: the header a quota 429 carries", () => {
  const refused = { retryAfterSeconds: 3, waitMs: 2_100 };
  it("seconds (default): the whole seconds, rounded up", () => {
    expect(quotaRetryAfter(undefined, refused, 0)).toBe("3");
    expect(quotaRetryAfter("seconds", refused, 0)).toBe("3");
  });
  it("date: an HTTP-date rounded up to the whole second, never before the quota admits again", () => {
    const now = Date.UTC(2026, 0, 2, 3, 4, 5, 600);
    const ra = quotaRetryAfter("date", refused, now)!;
    expect(ra).toBe("Fri, 02 Jan 2026 03:04:08 GMT"); // 05.600 + 2.100 = 07.700 → 08
    expect(retryAfterDeadline(ra, now)).toBe(Date.UTC(2026, 0, 2, 3, 4, 8));
    expect(retryAfterDeadline(ra, now)!).toBeGreaterThanOrEqual(now + refused.waitMs);
    const exact = quotaRetryAfter("date", { retryAfterSeconds: 1, waitMs: 400 }, Date.UTC(2026, 0, 2, 3, 4, 5, 600))!;
    expect(exact).toBe("Fri, 02 Jan 2026 03:04:06 GMT");
  });
  it("date-floor: the moment cut to its second, up to a second before the quota admits again", () => {
    const now = Date.UTC(2026, 0, 2, 3, 4, 5, 600);
    const ra = quotaRetryAfter("date-floor", refused, now)!;
    expect(ra).toBe("Fri, 02 Jan 2026 03:04:07 GMT"); // 05.600 + 2.100 = 07.700 → 07
    expect(retryAfterDeadline(ra, now)!).toBeLessThan(now + refused.waitMs);
  });
  it("seconds-floor: whole seconds cut down, 0 for a wait under a second", () => {
    expect(quotaRetryAfter("seconds-floor", refused, 0)).toBe("2"); // 2.100 s → 2
    expect(quotaRetryAfter("seconds-floor", { retryAfterSeconds: 1, waitMs: 25 }, 0)).toBe("0");
  });
  it("seconds-round: to the nearest second, 0 under half a second", () => {
    expect(quotaRetryAfter("seconds-round", refused, 0)).toBe("2"); // 2.100 s → 2
    expect(quotaRetryAfter("seconds-round", { retryAfterSeconds: 1, waitMs: 499 }, 0)).toBe("0");
    expect(quotaRetryAfter("seconds-round", { retryAfterSeconds: 1, waitMs: 600 }, 0)).toBe("1");
  });
  it("date-iso: the moment to the millisecond as ISO 8601, and the ledger holds clients to it", () => {
    const now = Date.UTC(2026, 0, 2, 3, 4, 5, 600);
    const ra = quotaRetryAfter("date-iso", refused, now)!;
    expect(ra).toBe("2026-01-02T03:04:07.700Z");
    expect(retryAfterDeadline(ra, now)).toBe(now + refused.waitMs);
  });
  it("none: no header", () => {
    expect(quotaRetryAfter("none", refused, 0)).toBeNull();
  });
});

describe("RetryAfterLedger", () => {
  it("flags requests after the grace and before the deadline, and nothing else", () => {
    const l = new RetryAfterLedger();
    l.record(1000, 2000);
    expect(l.check(1000 + RETRY_AFTER_GRACE_MS - 10, "/a")).toBeNull(); // in flight when the 429 went out
    expect(l.check(1300, "/b")).toEqual({ at: 1300, path: "/b", earlyByMs: 700 });
    expect(l.check(1999, "/c")?.earlyByMs).toBe(1);
    expect(l.check(2000, "/d")).toBeNull();
    expect(l.violations.map((v) => v.path)).toEqual(["/b", "/c"]);
    l.record(3000, 3000); // Retry-After: 0 cannot be violated
    expect(l.check(3100, "/e")).toBeNull();
  });

  it("has no grace on the connection that carried the 429: the next request on it was sent after the response", () => {
    const l = new RetryAfterLedger();
    const socketA = {};
    const socketB = {};
    l.record(1000, 2000, socketA);
    expect(l.check(1010, "/other-connection", socketB)).toBeNull();
    expect(l.check(1010, "/same-connection", socketA)).toEqual({ at: 1010, path: "/same-connection", earlyByMs: 990 });
    expect(l.check(2000, "/after", socketA)).toBeNull();
  });

  it("reads delta-seconds and HTTP-dates; unparsable values set no deadline", () => {
    expect(retryAfterDeadline("3", 1000)).toBe(4000);
    expect(retryAfterDeadline("Sun, 06 Nov 1994 08:49:37 GMT", 0)).toBe(Date.UTC(1994, 10, 6, 8, 49, 37));
    expect(retryAfterDeadline("garbage", 1000)).toBeNull();
    expect(retryAfterDeadline("-1", 1000)).toBeNull();
  });

  it("reads decimal seconds and the obsolete date forms (asctime as GMT whatever the machine's zone)", () => {
    expect(retryAfterDeadline("2.5", 1000)).toBe(3500);
    expect(retryAfterDeadline("Sunday, 06-Nov-94 08:49:37 GMT", 0)).toBe(Date.UTC(1994, 10, 6, 8, 49, 37));
    const zone = process.env.TZ;
    process.env.TZ = "Asia/Tokyo";
    try {
      expect(retryAfterDeadline("Sun Nov  6 08:49:37 1994", 0)).toBe(Date.UTC(1994, 10, 6, 8, 49, 37));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });
});

describe("quota over HTTP", () => {
  let sim: RunningSimulator | undefined;
  afterEach(async () => {
    await sim?.close();
    sim = undefined;
  });

  it("answers 429 rate_limited with Retry-After, counts it, and records an early retry", async () => {
    sim = await startSimulator({ seed: 1, skus: 20, quota: { requestsPerSecond: 1, burst: 2 } });
    expect((await get(sim, `${API}/workspace`)).status).toBe(200);
    expect((await get(sim, `${API}/locations`)).status).toBe(200);
    const limited = await get(sim, `${API}/inventory-status`);
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe("rate_limited");
    const ra = limited.headers.get("retry-after");
    expect(ra).toMatch(/^\d+$/);
    expect(Number(ra)).toBeGreaterThanOrEqual(1);
    expect(sim.stats().rateLimited).toBe(1);
    expect(sim.stats().retryAfterViolations).toEqual([]);

    await sleep(150); // past the grace, well before the deadline: on purpose
    const early = await get(sim, `${API}/workspace`);
    const v = sim.stats().retryAfterViolations;
    expect(v).toHaveLength(1);
    expect(v[0]!.path).toBe("/v1/external/workspace");
    expect(v[0]!.earlyByMs).toBeGreaterThan(500);
    expect(v[0]!.earlyByMs).toBeLessThanOrEqual(Number(ra) * 1000 - 150);
    expect(early.status).toBe(429); // the bucket is still empty, too

    // honour the latest Retry-After and the request goes through, with no new violation
    await sleep(Number(early.headers.get("retry-after")) * 1000 + 50);
    expect((await get(sim, `${API}/workspace`)).status).toBe(200);
    expect(sim.stats().retryAfterViolations).toHaveLength(1);
    expect(sim.stats().rateLimited).toBe(2);
    expect(sim.stats().byStatus).toEqual({ "200": 3, "429": 2 });
  });

  it("checks auth before the quota, and setQuota changes it at run time", async () => {
    sim = await startSimulator({ seed: 1, skus: 20, quota: { requestsPerSecond: 1 } });
    expect((await get(sim, `${API}/workspace`)).status).toBe(200);
    expect((await get(sim, `${API}/workspace`, {}, { key: "wrong" })).status).toBe(401);
    expect((await get(sim, `${API}/workspace`)).status).toBe(429);
    sim.setQuota(null);
    for (let i = 0; i < 20; i++) expect((await get(sim, `${API}/workspace`)).status).toBe(200);
    sim.setQuota({ requestsPerSecond: 0.5, burst: 5 }); // refills slowly: timing-proof
    const statuses = await Promise.all(Array.from({ length: 8 }, () => get(sim!, `${API}/workspace`).then((r) => r.status)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(3);
  });

  it("a 429 fault can send the HTTP-date form, and an early request against it is recorded", async () => {
    sim = await startSimulator({ seed: 1, skus: 20, faults: [{ kind: "429", count: 1, retryAfter: "date:2" }] });
    const sentBefore = Date.now();
    const r = await get(sim, `${API}/workspace`);
    expect(r.status).toBe(429);
    const ra = r.headers.get("retry-after")!;
    expect(ra).toMatch(/^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$/);
    const deadline = Date.parse(ra);
    expect(deadline).toBeGreaterThanOrEqual(sentBefore + 2000 - 1000);
    expect(deadline % 1000).toBe(0);
    await sleep(100);
    expect((await get(sim, `${API}/workspace`)).status).toBe(200); // count=1: the fault is spent
    expect(sim.stats().retryAfterViolations).toHaveLength(1);
    expect(sim.stats().rateLimited).toBe(0); // fault 429s are not quota 429s
    expect(sim.stats().faultsFired["429"]).toBe(1);
  });
});

/** GET on one kept-alive socket (maxSockets 1): the ledger allows no grace on the connection that carried the 429. */
function oneSocket(sim: RunningSimulator): { get(path: string): Promise<{ status: number; retryAfter: string | null }>; close(): void } {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  return {
    get: (path) =>
      new Promise((resolve, reject) => {
        const req = request(`${sim.baseUrl}${path}`, { agent, headers: { authorization: `Bearer ${sim.apiKey}` } }, (res) => {
          res.resume();
          res.on("end", () => resolve({ status: res.statusCode!, retryAfter: (res.headers["retry-after"] as string | undefined) ?? null }));
        });
        req.on("error", reject);
        req.end();
      }),
    close: () => agent.destroy(),
  };
}

describe("quota shapes over HTTP (no sleeps: the windows are far longer than the test)", () => {
  let sim: RunningSimulator | undefined;
  let conn: ReturnType<typeof oneSocket> | undefined;
  afterEach(async () => {
    conn?.close();
    await sim?.close();
    sim = conn = undefined;
  });

  it("fixed window with an HTTP-date: the ledger holds the client to exactly the date it reads", async () => {
    sim = await startSimulator({ seed: 1, skus: 20, quota: { kind: "fixed-window", requests: 2, windowSeconds: 600, retryAfter: "date" } });
    conn = oneSocket(sim);
    expect((await conn.get(`${API}/workspace`)).status).toBe(200);
    expect((await conn.get(`${API}/locations`)).status).toBe(200);
    const limited = await conn.get(`${API}/workspace`);
    expect(limited.status).toBe(429);
    expect(limited.retryAfter).toMatch(/^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$/);
    const date = Date.parse(limited.retryAfter!);
    expect(date % 1000).toBe(0);
    expect(date).toBeGreaterThan(Date.now());
    expect((await conn.get(`${API}/workspace`)).status).toBe(429); // same socket, long before the date
    const [v] = sim.stats().retryAfterViolations;
    expect(v).toBeDefined();
    expect(v!.at + v!.earlyByMs).toBe(date);
    expect(sim.stats()).toMatchObject({ requests: 4, accepted: 2, rateLimited: 2 });
  });

  it("a quota 429 with no Retry-After sends no header and records no deadline", async () => {
    sim = await startSimulator({ seed: 1, skus: 20, quota: { requestsPerSecond: 0.001, burst: 1, retryAfter: "none" } });
    conn = oneSocket(sim);
    expect((await conn.get(`${API}/workspace`)).status).toBe(200);
    const limited = await conn.get(`${API}/workspace`);
    expect(limited).toEqual({ status: 429, retryAfter: null });
    expect((await conn.get(`${API}/workspace`)).status).toBe(429);
    expect(sim.stats()).toMatchObject({ requests: 3, accepted: 1, rateLimited: 2, retryAfterViolations: [] });
  });

  it("seconds form on a fixed window names the window's end rounded up; accepted counts admitted requests only", async () => {
    sim = await startSimulator({ seed: 1, skus: 20, quota: { kind: "fixed-window", requests: 1, windowSeconds: 300 } });
    conn = oneSocket(sim);
    expect((await conn.get(`${API}/workspace`)).status).toBe(200);
    const limited = await conn.get(`${API}/workspace`);
    expect(limited.status).toBe(429);
    expect(Number(limited.retryAfter)).toBeGreaterThan(250); // the window's end, not one second
    expect(Number(limited.retryAfter)).toBeLessThanOrEqual(300);
    const s = sim.stats();
    expect(s).toMatchObject({ requests: 2, accepted: 1, rateLimited: 1 });
    expect(s.firstRequestAt).not.toBeNull();
    expect(s.lastResponseAt!).toBeGreaterThanOrEqual(s.firstRequestAt!);
  });

  it("latency: every response still comes, the quota decides on arrival, and stats count as without it", async () => {
    sim = await startSimulator({ seed: 1, skus: 20, latencyMs: 30, latencyJitterMs: 10, quota: { requestsPerSecond: 0.001, burst: 2 } });
    // Three requests in flight at once: all arrive before any response leaves, so the bucket
    // (burst 2) must already have refused the third when the first answer is sent.
    const rs = await Promise.all([1, 2, 3].map(() => get(sim!, `${API}/workspace`)));
    expect(rs.map((r) => r.status).sort()).toEqual([200, 200, 429]);
    expect(sim.stats()).toMatchObject({ requests: 3, accepted: 2, rateLimited: 1 });
    await expect(startSimulator({ latencyMs: -1 })).rejects.toThrow();
  });

  it("latency with an inbound share: the quota decides after the way in, so a request given up before then is never decided", async () => {
    sim = await startSimulator({ seed: 1, skus: 20, latencyMs: 60_000, latencyInboundShare: 1, quota: { requestsPerSecond: 0.001, burst: 2 } });
    const gaveUp = new AbortController();
    const answer = get(sim, `${API}/workspace`, {}, { signal: gaveUp.signal }).catch(() => "aborted");
    while (sim.stats().requests < 1) await sleep(5); // it reached the socket: the way in (a minute) has begun
    gaveUp.abort();
    expect(await answer).toBe("aborted");
    while (!sim.stats().byStatus.reset) await sleep(5);
    // Decided on arrival (inbound share 0, the test above), the bucket would have taken it.
    expect(sim.stats()).toMatchObject({ requests: 1, accepted: 0, rateLimited: 0 });
    await expect(startSimulator({ latencyMs: 10, latencyInboundShare: 1.5 })).rejects.toThrow(/inbound share/);
  });

  it("latencyLegs: each way gets its share of the latency and of the jitter, drawn apart", () => {
    const rng = createRng(7, "legs");
    const split = Array.from({ length: 200 }, () => latencyLegs({ ms: 100, jitterMs: 20, inboundShare: 0.5, rng }));
    for (const { inMs, outMs } of split) {
      expect(inMs).toBeGreaterThanOrEqual(40);
      expect(inMs).toBeLessThanOrEqual(60);
      expect(outMs).toBeGreaterThanOrEqual(40);
      expect(outMs).toBeLessThanOrEqual(60);
    }
    expect(split.some(({ inMs, outMs }) => inMs !== outMs)).toBe(true);
    expect(latencyLegs({ ms: 100, jitterMs: 20, inboundShare: 0, rng }).inMs).toBe(0);
    expect(latencyLegs({ ms: 100, jitterMs: 20, inboundShare: 1, rng }).outMs).toBe(0);
  });
});

describe("quota profiles", () => {
  it("every quota profile is a valid simulator configuration, and they combine", async () => {
    for (const name of Object.keys(QUOTA_PROFILES)) {
      const sim = await startSimulator({ seed: 1, skus: 5, ...profileOptions([name]) });
      await sim.close();
    }
    const both = profileOptions(["quota-small-burst", "quota-503-bursts"]);
    expect(both.quota).toEqual({ requestsPerSecond: 40, burst: 10 });
    expect(both.faults).toEqual([{ kind: "503", probability: 0.01, burst: 4 }]);
    const behind = profileOptions(["quota-small-burst", "quota-preauth"]);
    expect(behind.quota).toEqual({ requestsPerSecond: 40, burst: 10 });
    expect(behind.preAuthLimit).toEqual({ requestsPerSecond: 30, burst: 3 });
  });
});
