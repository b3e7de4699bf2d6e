/**
 * The one request scheduler of a process. Every API request goes through `run()`,
 * which enforces, for all workers together:
 * - a concurrency limit (never more requests in flight than the connection pool),
 * - a send rate (a user ceiling, and an adaptive rate learned from 429s),
 * - a global pause: a 429 or 503 pauses every worker until its Retry-After has
 *   elapsed (or a backoff, when there is none), not just the worker that got it,
 * - the retry policy (retry-policy.ts), and the longest wait we will sit through.
 *
 * Adaptive rate (the idea of AWS SDK "adaptive" retry mode, tuned for Retry-After's
 * one-second granularity, where every 429 costs a whole second of silence):
 * - until the first 429 there is no rate limit of our own;
 * - on a 429 we estimate the rate the server accepted since the previous 429
 *   (requests answered / time, pauses included, which cancels out the burst the
 *   server refills during a pause) and send at BETA of it; one episode at most halves
 *   the rate we were sending at, so 429s that are not about quota cannot spiral it down;
 * - well below the best rate the server has accepted we close the gap in seconds;
 *   near it we creep up slowly (GROWTH_PER_S) to learn whether the quota grew.
 */
import type { EndpointName } from "../core/defaults.js";
import { ApiError } from "../core/errors.js";
import { ResponseInfo } from "../client/http.js";
import { actionFor, backoffMs, INVALID_RESPONSE_RETRIES } from "./retry-policy.js";
import { retryAfterMs } from "./retry-after.js";

export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const realClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const t = setTimeout(done, Math.max(0, ms));
      function done() {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }
      function onAbort() {
        clearTimeout(t);
        reject(signal!.reason);
      }
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

export interface SchedulerOptions {
  concurrency: number;
  /** User ceiling in requests/s; null = none. */
  requestsPerSecond: number | null;
  maxRetries: number;
  max429Retries: number;
  backoffBaseMs: number;
  backoffCapMs: number;
  minRetryAfterMs: number;
  maxWaitMs: number;
  /** Request budget for the run (--max-requests); null = none. Reaching it ends the run as partial. */
  maxRequests?: number | null;
  /** Learn a send rate from 429s (default true). Off: only the user ceiling and Retry-After pauses apply. */
  adaptive?: boolean;
  /** Start paused until this epoch ms (a previous run's resume_after). */
  pausedUntil?: number;
  clock?: Clock;
  random?: () => number;
  onEvent?: (e: SchedulerEvent) => void;
}

export type SchedulerEvent =
  | {
      type: "backoff";
      endpoint: EndpointName;
      status: number | null;
      retryAfter: string | null;
      waitMs: number;
      attempt: number;
      scope: "all" | "one";
      message: string;
    }
  | { type: "failure"; endpoint: EndpointName; status: number | null; message: string; attempts: number }
  | { type: "rate"; requestsPerSecond: number; estimate: number };

export interface SchedulerStats {
  requests: number;
  byEndpoint: Record<string, number>;
  byStatus: Record<string, number>;
  rateLimited: number;
  unavailable: number;
  retries: number;
  /** Wall time during which all workers were paused by a 429/503. */
  waitMs: number;
}

/** Fraction of the estimated accepted rate we send at after a 429. */
const BETA = 0.97;
/** One 429 episode lowers the rate to no less than this share of what we were sending. */
const MAX_DECREASE = 0.5;
/** Relative growth per second of calm near the best accepted rate (first minute after a 429, then faster). */
const GROWTH_PER_S = 0.001;
const GROWTH_PER_S_LATER = 0.02;
/** Below BETA x best, the gap closes at this share per second. */
const RECOVERY_PER_S = 0.5;
const MIN_RATE = 1;
/**
 * Added to every wait a server named with Retry-After. We count the wait from when we read
 * the response; a server counts it from its own clock around the send, which on a loaded
 * machine can be a few milliseconds later (it stamps after writing, and both clocks tick
 * in whole milliseconds). Without a margin a request can land 1 ms before the deadline the
 * server holds us to (seen at 100 req/s against the simulator's ledger). 50 ms costs
 * 5% of the shortest possible (1 s) pause, and nothing when the wait is our own minimum.
 */
const RETRY_AFTER_MARGIN_MS = 50;

export class RequestScheduler {
  readonly stats: SchedulerStats = { requests: 0, byEndpoint: {}, byStatus: {}, rateLimited: 0, unavailable: 0, retries: 0, waitMs: 0 };
  private readonly clock: Clock;
  private readonly random: () => number;
  private inFlight = 0;
  private readonly waiters: Array<() => void> = [];
  private pausedUntilMs = 0;
  private nextSlotMs = 0;
  /** Adaptive rate state. */
  private adaptiveRate: number | null = null;
  private episodeStart: number | null = null;
  private acceptedSinceEpisode = 0;
  private lastGrowthAt = 0;
  /** Best accepted rate estimated in this process (decays when the server accepts less). */
  private bestEstimate = 0;
  /** Send times in the last second, to know the rate we were actually sending at. */
  private readonly recentSends: number[] = [];

  constructor(private readonly opts: SchedulerOptions) {
    this.clock = opts.clock ?? realClock;
    this.random = opts.random ?? Math.random;
    if (opts.pausedUntil) this.pausedUntilMs = opts.pausedUntil;
  }

  /** Epoch ms until which every worker is paused (0 when not paused). */
  get pausedUntil(): number {
    return this.pausedUntilMs > this.clock.now() ? this.pausedUntilMs : 0;
  }
  /** The send rate in force (requests/s), or null when unlimited. */
  get currentRate(): number | null {
    const a = this.adaptiveRate;
    const c = this.opts.requestsPerSecond;
    if (a == null) return c;
    return c == null ? a : Math.min(a, c);
  }

  /**
   * Run one logical request: `attempt` is called once per try, inside a concurrency
   * slot, after pause and rate allow it. Retries per RETRY_POLICY.
   */
  async run<T>(endpoint: EndpointName, attempt: () => Promise<T>, signal: AbortSignal): Promise<T> {
    let bounded = 0;
    let rateLimited = 0;
    for (let tries = 1; ; tries++) {
      // acquire() counts the request as it grants the slot, so the budget check and the count
      // are one synchronous step: workers resuming in the same turn cannot overspend it.
      await this.acquire(signal, endpoint);
      const sentAt = this.clock.now();
      try {
        const result = await attempt();
        this.countStatus("2xx");
        this.acceptedSinceEpisode++;
        return result;
      } catch (err) {
        if (!(err instanceof ApiError) || signal.aborted) throw err;
        this.countStatus(err.status == null ? err.kind : String(err.status));
        const action = actionFor(err);
        const now = this.clock.now();
        const raHeader = err.cause instanceof ResponseInfo ? err.cause.headers.get("retry-after") : null;
        const ra = retryAfterMs(raHeader, now, this.opts.minRetryAfterMs);
        // Only a wait the server actually named (0, a past date or garbage name none: no deadline to miss).
        const named = retryAfterMs(raHeader, now, 0);
        const margin = named !== null && named > 0 ? RETRY_AFTER_MARGIN_MS : 0;
        let waitMs: number;
        let scope: "all" | "one";
        if (action === "fail") {
          this.emit({ type: "failure", endpoint, status: err.status, message: err.message, attempts: tries });
          throw err;
        } else if (action === "pause-all-and-retry") {
          this.stats.rateLimited++;
          rateLimited++;
          if (rateLimited > this.opts.max429Retries) {
            this.emit({ type: "failure", endpoint, status: err.status, message: `gave up after ${rateLimited} rate-limited attempts`, attempts: tries });
            throw err;
          }
          this.adaptDown(sentAt, now);
          waitMs = ra ?? backoffMs(rateLimited, this.opts.backoffBaseMs, this.opts.backoffCapMs, this.random);
          scope = "all";
        } else {
          if (err.status === 503) this.stats.unavailable++;
          bounded++;
          const limit = action === "backoff-and-retry-twice" ? Math.min(INVALID_RESPONSE_RETRIES, this.opts.maxRetries) : this.opts.maxRetries;
          if (bounded > limit) {
            this.emit({ type: "failure", endpoint, status: err.status, message: `gave up after ${tries} attempts: ${err.message}`, attempts: tries });
            throw new ApiError(`${err.message} (gave up after ${tries} attempts)`, {
              kind: err.kind,
              endpoint,
              status: err.status,
              code: err.code,
              cause: err,
            });
          }
          waitMs = ra ?? backoffMs(bounded, this.opts.backoffBaseMs, this.opts.backoffCapMs, this.random);
          scope = action === "pause-all-and-retry-bounded" ? "all" : "one";
        }
        if (waitMs > this.opts.maxWaitMs) {
          const resumeAfter = now + waitMs + margin;
          const msg = `the server asked to wait ${Math.round(waitMs / 1000)} s, longer than rateLimit.maxWaitSeconds (${Math.round(this.opts.maxWaitMs / 1000)} s); resume after ${new Date(resumeAfter).toISOString()}`;
          this.emit({ type: "failure", endpoint, status: err.status, message: msg, attempts: tries });
          throw new ApiError(`${endpoint}: ${msg}`, { kind: "quota-wall", endpoint, status: err.status, resumeAfter, cause: err });
        }
        waitMs += margin;
        this.stats.retries++;
        this.emit({ type: "backoff", endpoint, status: err.status, retryAfter: raHeader, waitMs, attempt: tries, scope, message: err.message });
        if (scope === "all") this.pauseUntil(now + waitMs);
        else await this.clock.sleep(waitMs, signal);
      } finally {
        this.release();
      }
    }
  }

  private emit(e: SchedulerEvent): void {
    this.opts.onEvent?.(e);
  }
  private count(endpoint: EndpointName): void {
    this.stats.requests++;
    this.stats.byEndpoint[endpoint] = (this.stats.byEndpoint[endpoint] ?? 0) + 1;
  }
  private countStatus(key: string): void {
    this.stats.byStatus[key] = (this.stats.byStatus[key] ?? 0) + 1;
  }

  private pauseUntil(until: number): void {
    const now = this.clock.now();
    const from = Math.max(now, this.pausedUntilMs);
    if (until > from) {
      this.stats.waitMs += until - from;
      this.pausedUntilMs = until;
    }
  }

  private adaptDown(sentAt: number, now: number): void {
    if (this.opts.adaptive === false) return;
    // Requests already in flight when the pause began belong to the same episode.
    if (this.episodeStart !== null && sentAt < this.pausedUntilMs) return;
    const since = this.episodeStart ?? this.firstRequestAt ?? now;
    const windowS = Math.max(1, (now - since) / 1000);
    const estimate = this.acceptedSinceEpisode / windowS;
    const sending = this.adaptiveRate ?? Math.max(MIN_RATE, this.sendRate(now));
    const rate = Math.max(MIN_RATE, Math.min(sending, Math.max(BETA * estimate, MAX_DECREASE * sending)));
    this.bestEstimate = Math.max(estimate, this.bestEstimate * 0.9);
    this.adaptiveRate = rate;
    this.episodeStart = now;
    this.lastGrowthAt = now;
    this.acceptedSinceEpisode = 0;
    this.emit({ type: "rate", requestsPerSecond: rate, estimate });
  }

  private grow(now: number): void {
    if (this.adaptiveRate === null || this.episodeStart === null) return;
    const dt = (now - this.lastGrowthAt) / 1000;
    if (dt <= 0) return;
    const target = BETA * this.bestEstimate;
    if (this.adaptiveRate < target) {
      this.adaptiveRate += (target - this.adaptiveRate) * Math.min(1, RECOVERY_PER_S * dt);
    } else {
      const g = now - this.episodeStart < 60_000 ? GROWTH_PER_S : GROWTH_PER_S_LATER;
      this.adaptiveRate *= 1 + g * dt;
    }
    this.lastGrowthAt = now;
  }

  private sendRate(now: number): number {
    while (this.recentSends.length && now - this.recentSends[0]! > 1000) this.recentSends.shift();
    return this.recentSends.length;
  }

  private firstRequestAt: number | null = null;

  private async acquire(signal: AbortSignal, endpoint: EndpointName): Promise<void> {
    try {
      await this.acquireSlot(signal, endpoint);
    } catch (err) {
      // A waiter woken by release() that then fails (budget spent, quota wall, abort) passes the
      // wake-up on, or the next waiter would wait for a slot that is already free.
      if (this.inFlight < this.opts.concurrency) this.waiters.shift()?.();
      throw err;
    }
  }

  private async acquireSlot(signal: AbortSignal, endpoint: EndpointName): Promise<void> {
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const now = this.clock.now();
      if (this.opts.maxRequests != null && this.stats.requests >= this.opts.maxRequests) {
        throw new ApiError(`${endpoint}: the request budget of ${this.opts.maxRequests} for this run is spent (--max-requests / sync.maxRequests); the next run continues`, {
          kind: "budget",
          endpoint,
        });
      }
      if (this.pausedUntilMs > now) {
        if (this.pausedUntilMs - now > this.opts.maxWaitMs + RETRY_AFTER_MARGIN_MS) {
          throw new ApiError(`${endpoint}: paused by the server until ${new Date(this.pausedUntilMs).toISOString()}, longer than rateLimit.maxWaitSeconds`, {
            kind: "quota-wall",
            endpoint,
            resumeAfter: this.pausedUntilMs,
          });
        }
        await this.clock.sleep(this.pausedUntilMs - now, signal);
        continue;
      }
      if (this.inFlight >= this.opts.concurrency) {
        await new Promise<void>((resolve, reject) => {
          const wake = () => {
            signal.removeEventListener("abort", onAbort);
            resolve();
          };
          const onAbort = () => {
            // Out of the line, so a later release() wakes a waiter that can still use the slot.
            const i = this.waiters.indexOf(wake);
            if (i >= 0) this.waiters.splice(i, 1);
            reject(signal.reason);
          };
          signal.addEventListener("abort", onAbort, { once: true });
          this.waiters.push(wake);
        });
        continue;
      }
      this.grow(now);
      const rate = this.currentRate;
      if (rate !== null) {
        const interval = 1000 / rate;
        if (this.nextSlotMs > now) {
          await this.clock.sleep(this.nextSlotMs - now, signal);
          continue;
        }
        this.nextSlotMs = Math.max(this.nextSlotMs, now - interval) + interval;
      }
      if (this.firstRequestAt === null) this.firstRequestAt = now;
      this.count(endpoint);
      this.recentSends.push(now);
      if (this.recentSends.length > 4096) this.recentSends.splice(0, 2048);
      this.inFlight++;
      return;
    }
  }

  private release(): void {
    this.inFlight--;
    const next = this.waiters.shift();
    if (next) next();
  }
}
