/**
 * The one request scheduler of a process. Every API request goes through `run()`,
 * which enforces, for all workers together:
 * - a concurrency limit (never more requests in flight than the connection pool),
 * - a send rate (a user ceiling, and an adaptive rate learned from 429s),
 * - a global pause: a 429 or 503 pauses every worker until its Retry-After has
 *   elapsed (or a backoff, when there is none), not just the worker that got it,
 * - the retry policy (retry-policy.ts), and the longest wait we will sit through.
 *
 * Adaptive rate (the idea of AWS SDK "adaptive" retry mode, simplified): until the
 * first 429 there is no rate limit of our own. On a 429 we estimate the rate the
 * server accepted since the previous 429 (requests answered / time, pauses
 * included, which cancels out the burst refilled during a pause) and send at
 * BETA of it; then we creep up slowly (GROWTH_PER_S) to find out whether the quota
 * grew. Because Retry-After has one-second granularity, every 429 costs a whole
 * second of silence, so a slow probe beats a fast oscillation.
 */
import type { EndpointName } from "../core/defaults.js";
import { ApiError } from "../core/errors.js";
import { ResponseInfo } from "../client/http.js";
import { actionFor, backoffMs } from "./retry-policy.js";
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
/** Relative growth of the adaptive rate per second of calm (first minute after a 429, then 10x). */
const GROWTH_PER_S = 0.001;
const GROWTH_PER_S_LATER = 0.01;
const MIN_RATE = 0.2;

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
      await this.acquire(signal, endpoint);
      const sentAt = this.clock.now();
      this.count(endpoint);
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
          if (bounded > this.opts.maxRetries) {
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
          const resumeAfter = now + waitMs;
          const msg = `the server asked to wait ${Math.round(waitMs / 1000)} s, longer than rateLimit.maxWaitSeconds (${Math.round(this.opts.maxWaitMs / 1000)} s); resume after ${new Date(resumeAfter).toISOString()}`;
          this.emit({ type: "failure", endpoint, status: err.status, message: msg, attempts: tries });
          throw new ApiError(`${endpoint}: ${msg}`, { kind: "quota-wall", endpoint, status: err.status, resumeAfter, cause: err });
        }
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
    // Requests already in flight when the pause began belong to the same episode.
    if (this.episodeStart !== null && sentAt < this.pausedUntilMs) return;
    const since = this.episodeStart ?? this.firstRequestAt ?? now;
    const windowS = Math.max(1, (now - since) / 1000);
    const estimate = this.acceptedSinceEpisode / windowS;
    let rate = Math.max(MIN_RATE, BETA * estimate);
    if (this.adaptiveRate !== null) rate = Math.min(rate, this.adaptiveRate);
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
    const g = now - this.episodeStart < 60_000 ? GROWTH_PER_S : GROWTH_PER_S_LATER;
    this.adaptiveRate *= 1 + g * dt;
    this.lastGrowthAt = now;
  }

  private firstRequestAt: number | null = null;

  private async acquire(signal: AbortSignal, endpoint: EndpointName): Promise<void> {
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
        if (this.pausedUntilMs - now > this.opts.maxWaitMs) {
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
          const onAbort = () => reject(signal.reason);
          signal.addEventListener("abort", onAbort, { once: true });
          this.waiters.push(() => {
            signal.removeEventListener("abort", onAbort);
            resolve();
          });
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
