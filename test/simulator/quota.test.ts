/**
 * The workspace quota (token bucket, 429 + Retry-After) and the Retry-After ledger that
 * records clients coming back too early.
 */
import { afterEach, describe, expect, it } from "vitest";
import { RETRY_AFTER_GRACE_MS, RetryAfterLedger, retryAfterDeadline, TokenBucket } from "../../src/simulator/quota.js";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { API, get, sleep } from "./helpers.js";

describe("TokenBucket (fake clock)", () => {
  it("allows a burst, then one request per 1/rate, and names the wait in whole seconds ≥ 1", () => {
    let now = 0;
    const b = new TokenBucket({ requestsPerSecond: 2, burst: 3 }, () => now);
    expect([b.take(), b.take(), b.take()].every((r) => r.ok)).toBe(true);
    expect(b.take()).toEqual({ ok: false, retryAfterSeconds: 1 });
    now += 499;
    expect(b.take().ok).toBe(false);
    now += 2;
    expect(b.take().ok).toBe(true);
    const slow = new TokenBucket({ requestsPerSecond: 0.1 }, () => now);
    expect(slow.capacity).toBe(1);
    expect(slow.take().ok).toBe(true);
    expect(slow.take()).toEqual({ ok: false, retryAfterSeconds: 10 });
    now += 4000;
    expect(slow.take()).toEqual({ ok: false, retryAfterSeconds: 6 });
    expect(new TokenBucket({ requestsPerSecond: 50 }, () => now).capacity).toBe(50);
    expect(() => new TokenBucket({ requestsPerSecond: 0 })).toThrow(RangeError);
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
