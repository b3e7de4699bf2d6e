/**
 * The request scheduler on a fake clock: no sleeping, no HTTP. Time moves only when every
 * worker is waiting on the clock, so each assertion is about what the scheduler decided,
 * not about how fast this machine happens to be.
 */
import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/core/errors.js";
import { RequestScheduler, type Clock, type SchedulerOptions } from "../../src/scheduler/scheduler.js";

/** A clock whose sleeps resolve in time order when `advance` is called. */
class FakeClock implements Clock {
  t = 1_800_000_000_000;
  private sleepers: Array<{ at: number; resolve: () => void }> = [];
  now(): number {
    return this.t;
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      this.sleepers.push({ at: this.t + Math.max(0, ms), resolve });
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
  }
  /** Let pending promises settle, then jump to the next sleeper's time; false when nobody sleeps. */
  async step(): Promise<boolean> {
    for (let i = 0; i < 20; i++) await Promise.resolve();
    if (this.sleepers.length === 0) return false;
    this.sleepers.sort((a, b) => a.at - b.at);
    const next = this.sleepers.shift()!;
    this.t = Math.max(this.t, next.at);
    next.resolve();
    return true;
  }
}

function scheduler(clock: FakeClock, extra: Partial<SchedulerOptions> = {}): RequestScheduler {
  return new RequestScheduler({
    concurrency: 4,
    requestsPerSecond: null,
    maxRetries: 3,
    max429Retries: 50,
    backoffBaseMs: 100,
    backoffCapMs: 1_000,
    minRetryAfterMs: 1_000,
    maxWaitMs: 60_000,
    clock,
    random: () => 0.5,
    ...extra,
  });
}

const http429 = (retryAfter: string | null) =>
  new ApiError("list: HTTP 429", {
    kind: "http",
    endpoint: "list",
    status: 429,
    retryAfter,
  });

/** Run `n` logical requests at once and drive the fake clock until all settle. */
async function drive<T>(clock: FakeClock, tasks: Array<Promise<T>>): Promise<Array<PromiseSettledResult<T>>> {
  let settled = false;
  const all = Promise.allSettled(tasks).then((r) => {
    settled = true;
    return r;
  });
  while (!settled) {
    if (!(await clock.step())) await Promise.resolve();
  }
  return all;
}

describe("request scheduler", () => {
  it("never spends more than the request budget, even with many workers resuming together", async () => {
    const clock = new FakeClock();
    const s = scheduler(clock, { concurrency: 8, maxRequests: 40 });
    let attempts = 0;
    const signal = new AbortController().signal;
    const tasks = Array.from({ length: 100 }, () =>
      s.run(
        "detail",
        async () => {
          attempts++;
          await clock.sleep(10);
          return 1;
        },
        signal,
      ),
    );
    const results = await drive(clock, tasks);
    expect(attempts).toBe(40);
    expect(s.stats.requests).toBe(40);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(40);
    const rejected = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(rejected).toHaveLength(60);
    for (const r of rejected) expect((r.reason as ApiError).kind).toBe("budget");
  });

  it("no request is granted between a 429's status arriving and its Retry-After being handled", async () => {
    // The connection that carried the 429 is free once its body is read; a request granted
    // before the Retry-After is known would go out on it early (a violation on that socket).
    const clock = new FakeClock();
    const s = scheduler(clock, { concurrency: 2, adaptive: false });
    const signal = new AbortController().signal;
    let releaseBody!: () => void;
    const bodyRead = new Promise<void>((r) => (releaseBody = r));
    const sendsAt: number[] = [];
    let throttledOnce = false;
    const throttled = s.run(
      "detail",
      async (onStatus) => {
        sendsAt.push(clock.t);
        if (throttledOnce) return "retried";
        throttledOnce = true;
        onStatus(429);
        await bodyRead;
        throw http429("1");
      },
      signal,
    );
    const other = s.run(
      "detail",
      async () => {
        sendsAt.push(clock.t);
        return "ok";
      },
      signal,
    );
    for (let i = 0; i < 20; i++) await Promise.resolve();
    // Both started (two slots). A third waits behind the open 429 though a slot is free.
    const third = s.run(
      "detail",
      async () => {
        sendsAt.push(clock.t);
        return "third";
      },
      signal,
    );
    await other;
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(sendsAt).toHaveLength(2);
    const readAt = clock.t;
    releaseBody();
    const results = await drive(clock, [throttled, third]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
    // Everything after the first two went out only after the Retry-After (1 s) had elapsed.
    expect(sendsAt).toHaveLength(4);
    for (const t of sendsAt.slice(2)) expect(t).toBeGreaterThanOrEqual(readAt + 1_000);
  });

  it("a request granted before a 429 arrived but written after it is kept from going, is not counted, and goes once the Retry-After has elapsed", async () => {
    // The grant and the write are turns apart (the transport writes once a socket is ready); the transport
    // asks mayWrite right before writing and, told no, rejects with kind "not-sent" (transport.ts, http.ts).
    const clock = new FakeClock();
    const s = scheduler(clock, { concurrency: 2, adaptive: false, maxRetries: 0 });
    const signal = new AbortController().signal;
    let releaseBody!: () => void;
    const bodyRead = new Promise<void>((r) => (releaseBody = r));
    let statusArrived!: () => void;
    const arrived = new Promise<void>((r) => (statusArrived = r));
    let firstAsked!: () => void;
    const asked1 = new Promise<void>((r) => (firstAsked = r));
    let throttledOnce = false;
    let readAt = 0;
    const throttled = s.run(
      "detail",
      async (onStatus) => {
        if (throttledOnce) return "retried";
        throttledOnce = true;
        await asked1;
        onStatus(429);
        statusArrived();
        await bodyRead;
        readAt = clock.t;
        throw http429("1");
      },
      signal,
    );
    const asked: Array<{ at: number; may: boolean }> = [];
    const writtenAt: number[] = [];
    const late = s.run(
      "detail",
      async (_onStatus, mayWrite) => {
        // Granted with the other; its socket is ready only after the other's 429 has arrived.
        if (asked.length === 0) {
          asked.push({ at: clock.t, may: mayWrite() });
          firstAsked();
          await arrived;
        }
        const may = mayWrite();
        asked.push({ at: clock.t, may });
        if (!may) throw new ApiError("detail: not sent", { kind: "not-sent", endpoint: "detail" });
        writtenAt.push(clock.t);
        return "ok";
      },
      signal,
    );
    for (let i = 0; i < 20; i++) await Promise.resolve();
    releaseBody();
    const results = await drive(clock, [throttled, late]);
    expect(results.map((r) => (r.status === "fulfilled" ? r.value : String(r.reason)))).toEqual(["retried", "ok"]);
    // Free to go before the 429; held when its socket was ready after it; written once the wait was over.
    expect(asked.map((a) => a.may)).toEqual([true, false, true]);
    expect(writtenAt).toHaveLength(1);
    expect(writtenAt[0]!).toBeGreaterThanOrEqual(readAt + 1_000);
    // Not a try (maxRetries 0 did not fail it), not a request: the 429, its retry and the one written.
    expect(s.stats.requests).toBe(3);
    expect(s.stats.byEndpoint.detail).toBe(3);
    expect(s.stats.heldAtWrite).toBe(1);
  });

  it("a 429 pauses every worker until its Retry-After has elapsed", async () => {
    const clock = new FakeClock();
    const s = scheduler(clock, { adaptive: false });
    const signal = new AbortController().signal;
    const sends: number[] = [];
    let first = true;
    const start = clock.t;
    const tasks = Array.from({ length: 4 }, (_, i) =>
      s.run(
        "detail",
        async () => {
          sends.push(clock.t - start);
          if (i === 0 && first) {
            first = false;
            throw http429("2");
          }
          await clock.sleep(5);
          return i;
        },
        signal,
      ),
    );
    // The other three are in flight when the 429 arrives; send more after it.
    await Promise.resolve();
    const later = Array.from({ length: 3 }, () =>
      s.run(
        "detail",
        async () => {
          sends.push(clock.t - start);
          return 0;
        },
        signal,
      ),
    );
    const results = await drive(clock, [...tasks, ...later]);
    expect(results.every((r) => r.status === "fulfilled")).toBe(true);
    // Four sent at once (one got the 429); everything after waited the 2 s the server named.
    expect(sends.slice(0, 4)).toEqual([0, 0, 0, 0]);
    for (const t of sends.slice(4)) expect(t).toBeGreaterThanOrEqual(2_000);
    expect(s.stats.responses429).toBe(1);
    expect(s.stats.waitMs).toBeGreaterThanOrEqual(2_000);
  });

  it("Retry-After: 0 still waits the minimum, and a Retry-After beyond maxWaitSeconds ends with a quota wall", async () => {
    const clock = new FakeClock();
    const s = scheduler(clock, { adaptive: false, maxWaitMs: 10_000 });
    const signal = new AbortController().signal;
    const start = clock.t;
    const sends: number[] = [];
    let n = 0;
    const zero = s.run(
      "list",
      async () => {
        sends.push(clock.t - start);
        if (n++ === 0) throw http429("0");
        return "ok";
      },
      signal,
    );
    const [r] = await drive(clock, [zero]);
    expect(r!.status).toBe("fulfilled");
    expect(sends[1]! - sends[0]!).toBeGreaterThanOrEqual(1_000);

    const wall = s.run("list", async () => Promise.reject(http429("120")), signal);
    const [w] = await drive(clock, [wall]);
    expect(w!.status).toBe("rejected");
    const err = (w as PromiseRejectedResult).reason as ApiError;
    expect(err.kind).toBe("quota-wall");
    expect(err.resumeAfter).toBeGreaterThanOrEqual(clock.t + 119_000);
  });

  it("a request backing off alone (a 503 without Retry-After) frees its in-flight slot while it waits", async () => {
    // With the slot held, a burst of 503s (one per slot) would stop every worker for a backoff.
    const clock = new FakeClock();
    const s = scheduler(clock, { concurrency: 1, backoffBaseMs: 1_000, backoffCapMs: 1_000 });
    const signal = new AbortController().signal;
    const events: string[] = [];
    let failedOnce = false;
    const failing = s.run(
      "detail",
      async () => {
        events.push(`failing sent at ${clock.t}`);
        if (failedOnce) return "retried";
        failedOnce = true;
        throw new ApiError("detail: HTTP 503", { kind: "http", endpoint: "detail", status: 503, retryAfter: null });
      },
      signal,
    );
    const other = s.run(
      "detail",
      async () => {
        events.push(`other sent at ${clock.t}`);
        return "ok";
      },
      signal,
    );
    const t0 = clock.t;
    // Counted as waiting alone while it waits (the sync lets one more SKU into workers' hands for it), and no longer after.
    const waitingSeen: number[] = [];
    void failing.finally(() => waitingSeen.push(s.requestsWaitingAlone));
    void other.finally(() => waitingSeen.push(s.requestsWaitingAlone));
    const results = await drive(clock, [failing, other]);
    expect(waitingSeen).toEqual([1, 0]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
    // One slot: the other request went out during the backoff (at once), not after it (the backoff is 750 ms: equal jitter, half of 1 s and random 0.5 of the other half).
    expect(events).toEqual([`failing sent at ${t0}`, `other sent at ${t0}`, `failing sent at ${t0 + 750}`]);
  });

  it("counts the time the in-flight ceiling was full (stats.ceilingHeldMs), and none while fewer are in flight", async () => {
    const clock = new FakeClock();
    const signal = new AbortController().signal;
    const work = (s: RequestScheduler, n: number) =>
      Array.from({ length: n }, () =>
        s.run(
          "detail",
          async () => {
            await clock.sleep(100);
            return 0;
          },
          signal,
        ),
      );
    // Six requests of 100 ms through a ceiling of two: three rounds, each with both slots taken.
    const full = scheduler(clock, { concurrency: 2, adaptive: false });
    await drive(clock, work(full, 6));
    expect(full.stats.ceilingHeldMs).toBe(300);
    expect(full.ceilingReport()).toMatchObject({ ceiling: 2, heldMs: 300, sendingMs: 300, roundTripMs: 100 });
    // Three through a ceiling of four: never full.
    const roomy = scheduler(clock, { concurrency: 4, adaptive: false });
    await drive(clock, work(roomy, 3));
    expect(roomy.stats.ceilingHeldMs).toBe(0);
  });

  it("counts the time the in-flight count sized before any quota is known was all taken (stats.unpacedHeldMs), and reports none after a 429", async () => {
    const clock = new FakeClock();
    const signal = new AbortController().signal;
    const work = (s: RequestScheduler, n: number, fail429 = false) =>
      Array.from({ length: n }, (_, i) =>
        s.run(
          "detail",
          async () => {
            await clock.sleep(100);
            if (fail429 && i === 0 && s.stats.responses429 === 0) throw new ApiError("HTTP 429", { kind: "http", endpoint: "detail", status: 429, retryAfter: "1" });
            return 0;
          },
          signal,
        ),
      );
    // 100 ms away the limit grows from 4 by one a pass up to 200 req/s × 0.1 s + 2 = 22, below the ceiling of 32:
    // 200 requests keep it full from the first request to the last round (10 rounds of 100 ms at most).
    const far = scheduler(clock, { concurrency: 32 });
    await drive(clock, work(far, 200));
    const report = far.ceilingReport();
    expect(far.stats.ceilingHeldMs).toBe(0);
    expect(report.unpaced).toMatchObject({ limit: 22, sizedForRps: 200 });
    expect(report.unpaced!.heldMs).toBeGreaterThanOrEqual(report.sendingMs - 200);
    expect(report.unpaced!.heldMs).toBeLessThanOrEqual(report.sendingMs);
    // Three requests never fill it.
    const few = scheduler(clock, { concurrency: 32 });
    await drive(clock, work(few, 3));
    expect(few.ceilingReport().unpaced!.heldMs).toBe(0);
    // After a 429 the rate is the quota's business: nothing to report.
    const refused = scheduler(clock, { concurrency: 32 });
    await drive(clock, work(refused, 20, true));
    expect(refused.ceilingReport().unpaced).toBeNull();
  });
});

/** A fake clock whose answers can arrive unread: `arrived` are read (run) before the grants that wait for them (Clock.afterArrived). */
class ArrivingClock extends FakeClock {
  arrived: Array<() => void> = [];
  private afterwards: Array<() => void> = [];
  afterArrived(fn: () => void): void {
    this.afterwards.push(fn);
  }
  /** The event loop's poll then its check phase: the answers that arrived are read, then what waited for them runs. */
  async turn(): Promise<void> {
    for (const read of this.arrived.splice(0)) read();
    for (let i = 0; i < 20; i++) await Promise.resolve();
    for (const fn of this.afterwards.splice(0)) fn();
  }
  override async step(): Promise<boolean> {
    await this.turn();
    return super.step();
  }
}

/**
 * An attempt whose first answer is a 429 naming 1 s, handed to `arrive` to be read later (the answer arrived,
 * unread), and whose retry passes; `tries` counts the attempts.
 */
function refusedOnceUnread(arrive: (read: () => void) => void): { attempt: Parameters<RequestScheduler["run"]>[1]; tries: () => number } {
  let tries = 0;
  const attempt = (onStatus: (status: number) => void) =>
    tries++ === 0
      ? new Promise<string>((_, reject) =>
          arrive(() => {
            onStatus(429);
            reject(http429("1"));
          }),
        )
      : Promise.resolve("retried");
  return { attempt: attempt as never, tries: () => tries };
}

/** An attempt that passes at once, remembering when it was sent (null until then). */
function sentAtRecorder(clock: FakeClock): { attempt: () => Promise<string>; sentAt: () => number | null } {
  let at: number | null = null;
  return {
    attempt: async () => {
      at = clock.now();
      return "sent";
    },
    sentAt: () => at,
  };
}

describe("grants wait for the answers already arrived", () => {
  it("a 429 that arrived while a grant was being decided holds that grant for its Retry-After (sent then, a server counts the request inside it)", async () => {
    const clock = new ArrivingClock();
    const s = scheduler(clock, { concurrency: 2 });
    const signal = new AbortController().signal;
    const t0 = clock.now();
    // A is in flight; its answer, a 429 naming 1 s, has arrived but is not read yet.
    const a = s.run("list", refusedOnceUnread((read) => clock.arrived.push(read)).attempt, signal);
    for (let i = 0; i < 20; i++) await Promise.resolve();
    // B asks for a slot now: one is free, but the 429 is already here.
    const bSent = sentAtRecorder(clock);
    const b = s.run("list", bSent.attempt, signal);
    const results = await drive(clock, [a, b]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
    expect(bSent.sentAt()).not.toBeNull();
    expect(bSent.sentAt()! - t0).toBeGreaterThanOrEqual(1_000);
  });

  it("paced, a timer that fires late (the event loop stalled) grants only after the answers that arrived meanwhile are read: a 429 among them holds the grant", async () => {
    const clock = new ArrivingClock();
    const s = scheduler(clock, { concurrency: 2, requestsPerSecond: 10, adaptive: false });
    const signal = new AbortController().signal;
    const t0 = clock.now();
    // A goes at the pacer's first token (100 ms); its answer, a 429 naming 1 s, will arrive unread.
    const refused = refusedOnceUnread((read) => clock.arrived.push(read));
    const a = s.run("list", refused.attempt, signal);
    const bSent = sentAtRecorder(clock);
    const b = s.run("list", bSent.attempt, signal);
    await clock.step();
    expect(refused.tries()).toBe(1);
    // B's token is due at 200 ms; the loop stalls until 500 ms, and its timer fires (timers phase) before the 429 is read (poll phase).
    clock.t = t0 + 500;
    await FakeClock.prototype.step.call(clock);
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(bSent.sentAt()).toBeNull();
    const results = await drive(clock, [a, b]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
    // The 429 read at 500 ms named 1 s: B went after it.
    expect(bSent.sentAt()! - t0).toBeGreaterThanOrEqual(1_500);
  });

  it("paced, the first answer read after a stall grants nothing before the others that arrived meanwhile are read: a 429 among them holds it", async () => {
    const clock = new ArrivingClock();
    const s = scheduler(clock, { concurrency: 2, requestsPerSecond: 100, adaptive: false });
    const signal = new AbortController().signal;
    const t0 = clock.now();
    const reads: Array<() => void> = [];
    // A and B in flight (slots full, so no timer is armed); A's answer is a 2xx, B's a 429 naming 1 s; both arrive during a stall.
    const a = s.run("list", () => new Promise<string>((resolve) => reads.push(() => resolve("a"))), signal);
    const b = s.run("list", refusedOnceUnread((read) => reads.push(read)).attempt, signal);
    const cSent = sentAtRecorder(clock);
    const c = s.run("list", cSent.attempt, signal);
    while (reads.length < 2) await clock.step();
    clock.t = t0 + 400;
    // The poll phase reads A first, and its release runs before B's 429 is read.
    reads[0]!();
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(cSent.sentAt()).toBeNull();
    clock.arrived.push(reads[1]!);
    const results = await drive(clock, [a, b, c]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
    expect(cSent.sentAt()! - t0).toBeGreaterThanOrEqual(1_400);
  });

  it("with nothing in flight a grant is made at once (no answer can be waiting to be read)", async () => {
    const clock = new ArrivingClock();
    const s = scheduler(clock);
    let sent = false;
    const r = s.run(
      "list",
      async () => {
        sent = true;
        return 1;
      },
      new AbortController().signal,
    );
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(sent).toBe(true);
    await r;
  });
});
