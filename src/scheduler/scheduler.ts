/**
 * The one request scheduler of a process. Every API request goes through `run()`,
 * which enforces, for all workers together:
 * - a concurrency limit (never more requests in flight than the connection pool),
 * - a send rate (a user ceiling, and an adaptive rate learned from 429s),
 * - a global pause: a 429 or 503 pauses every worker until its Retry-After has
 *   elapsed (or a backoff, when there is none), not just the worker that got it,
 * - the retry policy (retry-policy.ts), and the longest wait we will sit through.
 *
 * Adaptive rate and concurrency (rate-control.ts, pacer.ts, concurrency.ts): what passed and
 * what drew a 429, counted over spans of at least a tenth of a second, bounds the quota's rate
 * from both sides; the send rate probes between the bounds and holds just below the lower
 * one once they meet. Our own pacer copies the server's bucket (its burst used after a
 * pause), and Little's law sets how many requests may be in flight to reach the rate at the
 * measured latency. A 429 episode (the 429s of requests that were already in flight when
 * the first came back) counts once.
 * 503s are not about the quota: they pause (with Retry-After) or back off one request, and
 * never lower the rate.
 */
import { setMaxListeners } from "node:events";
import { DEFAULTS, type EndpointName } from "../core/defaults.js";
import { ApiError } from "../core/errors.js";
import { actionFor, backoffMs, INVALID_RESPONSE_RETRIES } from "./retry-policy.js";
import { retryAfterBeyondCap, retryAfterIsHttpDate, retryAfterMs, retryAfterNamesNoWait } from "./retry-after.js";
import { ServerClock } from "./server-clock.js";
import { carryAtRate, RateControl, type LearnedQuota, type QuotaLesson, type RatePhase, type RateSetting } from "./rate-control.js";
import { Pacer } from "./pacer.js";
import { ConcurrencyLimit, UNPACED_RPS } from "./concurrency.js";
import { InFlightEvidence, type InFlightVerdict } from "./in-flight-evidence.js";

export interface Clock {
  now(): number;
  /** `precise`: end within a fraction of a millisecond of `ms`, not the millisecond or two late a timer may be (realClock). */
  sleep(ms: number, signal?: AbortSignal, precise?: boolean): Promise<void>;
  /**
   * Run `fn` once the answers already arrived are read (realClock: setImmediate, after the event loop's poll for
   * I/O); absent, at once. Grants wait for it: see Scheduler.pump.
   */
  afterArrived?(fn: () => void): void;
}

/** performance.now() less the epoch time it stands for (wallClockNow). */
let wallOffset: number | null = null;

/**
 * Epoch ms to a fraction of a millisecond: performance.now() anchored to Date.now(), and anchored
 * again whenever it leaves the wall clock's millisecond (the wall clock was stepped, or the two drift
 * apart over a long run), so Retry-After dates keep their meaning. Date.now() alone counts whole
 * milliseconds, and a round trip on loopback (1-3 ms) measured with it is off by up to one: spaced
 * from answers (rate-control.ts, spacedExtraMs), that error went into every token interval.
 */
function wallClockNow(): number {
  const p = performance.now();
  const wall = Date.now();
  if (wallOffset === null || p - wallOffset < wall || p - wallOffset >= wall + 1) wallOffset = p - wall;
  return p - wallOffset;
}

/**
 * A precise wait (Clock.sleep) takes its timer this much short of the end and blocks the thread for
 * the rest (Atomics.wait: no CPU spent, at most this long). Node's timers fire on whole milliseconds
 * and late: spaced from answers, a bucket of one token waited 0.68 ms past each grant at the median
 * (100 req/s, real CLI), time no grant could use, since the probe finds the fastest spacing at which
 * the closest grants pass and the rest go later by the timer's spread. Blocked instead: 100/s without
 * burst found by probing 1.356-1.369x against 1.409-1.429x (real CLI, four runs each, alternating),
 * steady share 0.82 against 0.78-0.79; 5/s and 60/s 20 ms away (paced by answers) unchanged. A wait
 * to a setImmediate loop instead cost 60 % more CPU. In that mode nothing of ours is in flight while it
 * blocks (the next grant waits for the last answer); what it delays is a store write queued meanwhile,
 * by under a millisecond.
 */
const PRECISE_BLOCK_MS = 1;
const blocker = new Int32Array(new SharedArrayBuffer(4));

function blockUntil(end: number): void {
  const left = end - performance.now();
  if (left > 0) Atomics.wait(blocker, 0, 0, Math.min(left, PRECISE_BLOCK_MS));
}

const realClock: Clock = {
  now: wallClockNow,
  // Two turns: the first ends the poll phase in course (answers read while it ran were not polled for), the
  // second polls afresh. With one turn a request still went 7-8 ms after the 429 had arrived (it came while the store worked).
  afterArrived: (fn) => setImmediate(() => setImmediate(fn)),
  sleep: (ms, signal, precise = false) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const end = performance.now() + ms;
      // A precise wait shorter than the block is blocked at once (after this turn): a timer of under a millisecond fires a millisecond or more on.
      let t: NodeJS.Timeout | undefined;
      if (!precise) t = setTimeout(done, Math.max(0, ms));
      else if (ms > PRECISE_BLOCK_MS) t = setTimeout(preciseDone, ms - PRECISE_BLOCK_MS);
      else queueMicrotask(preciseDone);
      function preciseDone() {
        if (signal?.aborted) return;
        blockUntil(end);
        done();
      }
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

/**
 * Told the status of an answer as soon as its headers are in, before its body is read: a
 * 429/503 stops new grants at once (see `holds`). With its Date header (null: none), which
 * tells the server's clock (server-clock.ts).
 */
export type StatusListener = (status: number, serverDate?: string | null) => void;

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
  /** The server's origin, for saying which server is unreachable (never a URL with a key). */
  server?: string;
  /** Start paused until this epoch ms (a previous run's resume_after). */
  pausedUntil?: number;
  /** Start from what an earlier run against this server proved of its quota (RateControl.startFrom); ignored when not adaptive. */
  startFrom?: LearnedQuota;
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
  /** The server named a wait beyond DEFAULTS.maxServerWaitMs (a day): honoured as that, and worth a look. */
  | { type: "suspicious"; endpoint: EndpointName; status: number | null; retryAfter: string; message: string }
  | {
      type: "rate";
      /** Our send rate (req/s), null when unpaced. */
      requestsPerSecond: number | null;
      phase: RatePhase;
      /** The quota's rate as fitted so far: [low, high] req/s (high Infinity while unbounded). */
      fitLow: number | null;
      fitHigh: number | null;
      /** Requests allowed in flight. */
      inFlightLimit: number;
      /** A limit on requests in flight is in force: 429s came only with inFlightLimit or more of ours in flight, so it is sent unpaced up to it (in-flight-evidence.ts). */
      inFlightFound?: boolean;
      /** The limit on requests in flight found was refuted (a 429 under it): the rate paces again, for the rest of the run. */
      inFlightRefuted?: boolean;
    };

/** What held a run's sending back by its own counts, not the server's (sync/ceiling-hint.ts words it). */
export interface CeilingReport {
  /** The configured ceiling (`concurrency`). */
  ceiling: number;
  /** How long it was full outside pauses. */
  heldMs: number;
  /** From the run's first request to its end. */
  sendingMs: number;
  /** The median round trip at the end of the run. */
  roundTripMs: number;
  /** With no 429 in the run: how long the in-flight limit sized for a quota not yet known was full, that limit, and the rate it is sized for (null after a 429). */
  unpaced: { heldMs: number; limit: number; sizedForRps: number } | null;
}

export interface SchedulerStats {
  requests: number;
  byEndpoint: Record<string, number>;
  byStatus: Record<string, number>;
  /** Answers 429 (the quota), every attempt counted. */
  responses429: number;
  unavailable: number;
  retries: number;
  /** Wall time during which all workers were paused by a 429/503. */
  waitMs: number;
  /**
   * Wall time, outside pauses, with the in-flight ceiling (`concurrency`) full: the run then went
   * only as fast as that many requests in flight at the server's round trip allow (Little's law).
   */
  ceilingHeldMs: number;
  /**
   * Wall time, outside pauses and before any 429, with the in-flight limit full where it was below the
   * ceiling and sized for a quota not yet known (UNPACED_RPS, concurrency.ts): a quota above it was never
   * reached, since only a 429 sets a rate to size for.
   */
  unpacedHeldMs: number;
  /**
   * Requests granted, then kept from going at the write (mayWrite): a 429 arrived between the grant and the
   * moment a socket was ready for them. Not in `requests`; each went again after the pause.
   */
  heldAtWrite: number;
}

/**
 * Added to every wait a server named with Retry-After. We count the wait from when we read
 * the response; a server counts it from its own clock around the send, which on a loaded
 * machine can be a few milliseconds later (it stamps after writing, and both clocks tick
 * in whole milliseconds). Without a margin a request can land 1 ms before the deadline the
 * server holds us to (seen at 100 req/s against the simulator's ledger). 50 ms costs
 * 5% of the shortest possible (1 s) pause, and nothing when the wait is our own minimum.
 */
const RETRY_AFTER_MARGIN_MS = 50;

/**
 * A timer of ours that fires this much later than it was armed for, or a pump this long after the last,
 * says the event loop may have stalled (a large store write, GC, a busy machine): answers may have arrived
 * meanwhile and wait unread, and the timers phase comes before the poll phase that reads them (and among
 * the answers read, a 2xx may come before a 429). A paced grant then waits for them (Clock.afterArrived),
 * as an unpaced grant always does, and so does every pump until then: a 429 among them holds the grant.
 * A paced grant goes at once otherwise (pump says why). Seen in the suite on a loaded machine: two requests
 * 305 ms after a 429 (the simulator's grace is 250 ms). Timers fire 1-4 ms late on a busy run (p99 4.3 ms,
 * 2,000 SKUs at 200/s), and from 20 req/s up pumps come closer than the gap: either costs a turn only now and then.
 */
const LATE_TIMER_MS = 10;
const STALL_GAP_MS = 50;

/** In-flight floor: enough for loopback and LAN at any quota we expect. */
const MIN_IN_FLIGHT = 4;
/**
 * A 429 without Retry-After: we choose the wait. A few of the quota's token intervals lets
 * a token or three back into the server's bucket (bounded to 50 ms–1 s), doubling while the
 * 429s repeat without a request passing in between.
 */
const NO_RETRY_AFTER_TOKENS = 3;
const NO_RETRY_AFTER_MIN_MS = 50;
const NO_RETRY_AFTER_MAX_MS = 1_000;
/**
 * A 429 whose Retry-After names no wait ("0", a date not ahead: retryAfterNamesNoWait) is taken as one
 * without Retry-After, not held to the 1 s floor: a server that cuts its wait down (Math.floor, or a date
 * formatted without rounding up) says so for every token bucket's next token. Harness, 40/s burst 10:
 * 1.117x -> 1.011x; real CLI 1.100-1.104x -> 1.010-1.015x. Not once the server has named a wait longer than
 * this in the run, or inside a window: there the waits are a window's end, and a "0" near it read as no wait
 * broke the window's reading (harness, 50 per second with dates cut down: 1.316x -> 2.871x; 300 per 10 s
 * with seconds cut down: 1.043x -> 1.476x). A bucket's next token is at most this far away from 4 req/s up.
 */
const NO_WAIT_UNTIL_NAMED_MS = 250;
/**
 * The server is unreachable when every attempt for this long failed to connect (refused, no
 * route, no such host, connect timeout), at least UNREACHABLE_FAILURES of them, with no
 * answer at all in between: the run stops instead of failing unit after unit for minutes.
 * 3 s is a few backoffs of one request; a restart of the server behind a load balancer
 * that takes longer ends the run (resumable), which the next run picks up.
 */
const UNREACHABLE_AFTER_MS = 3_000;
const UNREACHABLE_FAILURES = 3;
/** Error codes that say nothing answered at all (the socket never connected). */
const CONNECT_FAILURE_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "ECONNRESET"]);
/** The rate the server accepted is counted over this window before a 429 (where a ramp starts). */
const ACCEPTED_WINDOW_MS = 1_000;
/** Requests sent within this of one another (a wave granted in one turn) may reach the server in any order (sentTogetherAfter). */
const SENT_TOGETHER_MS = 2;
/** The rate phases in which a limit on in flight may be found (inFlightAnswered). */
const IN_FLIGHT_FINDING_PHASES: ReadonlySet<RatePhase> = new Set(["probe", "hold", "contested"]);
/** Send times kept for that (a wave is at most `concurrency` requests). */
const RECENT_SENDS_KEPT = 512;
/**
 * An answer this many token intervals later than the median round trip (and later than the usual spread
 * under it) was held by the server before its decision (decidedLate): a stall of the server's process
 * decides every request that arrived meanwhile at once, at its end, and the pacer, which counted their
 * tokens when it sent them and refilled through the stall, would let a burst go into a bucket that batch
 * just spent. So each such answer takes the pacer's token again (Pacer.takeAgain). A 200/s bucket of 5 on
 * this machine drew 429s at 178-185 req/s and then measured its capacity again (real CLI, two runs of four
 * at 1.64-1.86x; seven runs each with and without: 1.23-1.31x, median 1.296, against 1.24-1.64x, median
 * 1.308); the harness's server stalls (quota-harness.ts serverStall, 30 ms every 0.3-1 s) 1.38-1.79x
 * -> 1.21-1.51x. At 2 intervals the harness's 100/s buckets of 2 with stalls drew a 429 more (1.22 -> 1.27x);
 * at 6 no stall of 30 ms at 200/s counts.
 */
const DECIDED_LATE_INTERVALS = 3;
/** ...and a millisecond more (whole-millisecond clocks). */
const DECIDED_LATE_MARGIN_MS = 1;
/** ...once this many round trips are measured (the median before says nothing). */
const DECIDED_LATE_MIN_SAMPLES = 4;

interface Waiter {
  endpoint: EndpointName;
  signal: AbortSignal;
  resolve: (sentAt: number) => void;
  reject: (err: unknown) => void;
  onAbort: () => void;
}

export class RequestScheduler {
  readonly stats: SchedulerStats = { requests: 0, byEndpoint: {}, byStatus: {}, responses429: 0, unavailable: 0, retries: 0, waitMs: 0, ceilingHeldMs: 0, unpacedHeldMs: 0, heldAtWrite: 0 };
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly queue: Waiter[] = [];
  private inFlight = 0;
  /** Requests waiting out a backoff of their own (a 503 without Retry-After, a network error), their slots freed meanwhile. */
  private waitingAlone = 0;
  /**
   * Answers seen to be 429/503 whose handling has not finished. No grant while any is open:
   * the connection that carried it is back in the pool as soon as its body is read, before
   * its Retry-After is known here, and a request granted in between would go out on it early.
   */
  private holds = 0;
  /** Since when every attempt failed to connect (null: something answered since), and how many did. */
  private connectFailingSince: number | null = null;
  private connectFailures = 0;
  /** Set once the server is found unreachable: every request from then on fails with it. */
  private unreachable: ApiError | null = null;
  private pausedUntilMs = 0;
  /** The end of the pause an answer (a 429 or 503, or a failure every worker waits out) began: what mayWrite holds writes back for. */
  private answerPausedUntilMs = 0;
  private readonly control: RateControl;
  private readonly concurrency: ConcurrencyLimit;
  /** Requests sent whose answer's status has not come yet (the `k` each request goes with: in-flight-evidence.ts). */
  private awaitingStatus = 0;
  /** Send times of the latest requests (noteSend), the first being send number recentSendsBase. */
  private readonly recentSends: number[] = [];
  private recentSendsBase = 0;
  /** A server limit on requests in flight, not on rate, as the answers show it (in-flight-evidence.ts). */
  private readonly inFlightEvidence = new InFlightEvidence();
  /** The index of the first send under the limit on in flight found (noteSend). */
  private inFlightFoundAtSend = Infinity;
  private pacer: Pacer | null = null;
  /** When the current 429 episode began (its first 429 was read). */
  private episodeAt = -Infinity;
  private episodeAccepted = 0;
  /** A 429 named a wait over NO_WAIT_UNTIL_NAMED_MS this run: its "0"s keep the floor from then on. */
  private namedLongWait = false;
  /** The server's clock as its Date headers show it: Retry-After dates are moments on it. */
  private readonly serverClock = new ServerClock();
  /** When pumpNow last ran (mayHaveStalled). */
  private lastPumpAt = -Infinity;
  /** A pump waits for the answers already arrived to be read (pump). */
  private pumpQueued = false;
  /** The difference between the clocks the journal last gave (0: none, or agreeing). */
  private reportedClockOffsetMs = 0;
  /** A pause began since the last grant: the next grant starts a new segment (rate-control.ts). */
  private pausedSinceGrant = false;
  /**
   * A pause for a 503's Retry-After (not a 429's) is under way, this long (ms): when it ends, the requests
   * the server's bucket surely refilled meanwhile go at once (rate-control.ts refilledDuring), even in an
   * evidence probe, whose pacer holds one token. One at a time, every 503 of a burst that answers the
   * next requests was a pause of its own: 40/s burst 10 with bursts of three 503s naming 1 s, 20 ms
   * away, and a probe that the pauses kept from its 429 (they refill the bucket) ran to the end at one
   * token: up to three pauses a burst (real CLI, 600 SKUs and every server variance: 2.02x its least time).
   */
  private unavailablePauseMs = 0;
  /** Answer times of requests that passed the quota, over the last ACCEPTED_WINDOW_MS. */
  private readonly passTimes: number[] = [];
  /** When the last request in flight was answered (or began a wait of its own). */
  private lastAnswerAt = 0;
  /** When the last request was granted (sent). */
  private lastGrantAt = 0;
  /** 429 episodes without Retry-After since a request last passed. */
  private noRetryAfterStreak = 0;
  private timer: { at: number; ac: AbortController; precise: boolean } | null = null;
  private firstSentAt: number | null = null;
  /** Since when the in-flight ceiling has been full outside a pause (null: it is not), for stats.ceilingHeldMs. */
  private ceilingFullSince: number | null = null;
  /** Since when the unpaced in-flight limit has been full (stats.unpacedHeldMs), null: it is not. */
  private unpacedFullSince: number | null = null;
  private readonly widenedSignals = new WeakSet<AbortSignal>();

  constructor(private readonly opts: SchedulerOptions) {
    this.clock = opts.clock ?? realClock;
    this.random = opts.random ?? Math.random;
    this.concurrency = new ConcurrencyLimit(MIN_IN_FLIGHT, opts.concurrency);
    this.control = new RateControl(this.concurrency);
    if (opts.pausedUntil) this.pausedUntilMs = opts.pausedUntil;
    const now = this.clock.now();
    if (opts.startFrom && opts.adaptive !== false) {
      const before = this.control.current;
      this.control.startFrom(opts.startFrom, now);
      this.rateChanged(before, now);
      // The server's bucket has refilled since the last run: the first request goes at once, not a token interval in (0.6 s at 1.7 req/s).
      this.pacer?.atLeast(1, now);
    } else this.applyRate(now);
  }

  /** What this run leaves the next against this server (RateControl.lesson): nothing when it drew no 429 or is not adaptive. */
  quotaLesson(): QuotaLesson {
    if (this.opts.adaptive === false || this.stats.responses429 === 0) return { kind: "nothing" };
    return this.control.lesson();
  }

  /** Epoch ms until which every worker is paused (0 when not paused). */
  get pausedUntil(): number {
    return this.pausedUntilMs > this.clock.now() ? this.pausedUntilMs : 0;
  }
  /** The send rate in force (requests/s), or null when unpaced. */
  get currentRate(): number | null {
    return this.pacer?.requestsPerSecond ?? null;
  }
  /** Requests allowed in flight now. */
  get inFlightLimit(): number {
    const found = this.inFlightEvidence.limit;
    if (found !== null) return Math.min(found, this.opts.concurrency);
    if (this.control.spacedFromAnswer) return 1;
    return this.concurrency.limit(this.currentRate);
  }

  /**
   * The in-flight ceiling (`concurrency`) and what it cost: how long it was full outside pauses
   * (stats.ceilingHeldMs) of the time since the first request, and the median round trip that
   * made it the limit (at most ceiling ÷ round trip requests per second go out).
   */
  ceilingReport(): CeilingReport {
    const sendingMs = this.firstSentAt === null ? 0 : Math.max(0, this.clock.now() - this.firstSentAt);
    return {
      ceiling: this.opts.concurrency,
      heldMs: this.stats.ceilingHeldMs,
      sendingMs,
      roundTripMs: this.concurrency.latencyMs,
      unpaced: this.stats.responses429 === 0 ? { heldMs: this.stats.unpacedHeldMs, limit: this.concurrency.limit(null), sizedForRps: UNPACED_RPS } : null,
    };
  }

  /** Requests waiting out a backoff of their own now: they hold no in-flight slot, but their callers' work stays in hand. */
  get requestsWaitingAlone(): number {
    return this.waitingAlone;
  }

  /** The caller expects about `requests` more requests in this run (null: unknown): whether finding the quota more closely is worth a 429's pause. */
  expectRemaining(requests: number | null): void {
    this.control.expectRemaining(requests);
  }

  /**
   * May a granted request be written now? Not once a 429 or 503 has arrived (its body still being read:
   * `holds`) or while a pause is in force. Asked by the transport right before the request's bytes go
   * (transport.ts WriteGate): a grant is a promise resolved in one turn, the write happens turns later,
   * once a socket is ready, and a 429 read in between names a wait that request would break. Against a
   * clean-room server counting requests decided over 25 ms after a 429 it sent: 100/s burst 5, 1,200 SKUs,
   * 1-5 such requests in 6 of 16 runs, written 7-36 ms after the 429 was read, all granted before it; 0 in 7 after.
   * Only an answer's pause counts: a window's allowance granted before we paused for the next window's opening is that window's.
   */
  private readonly mayWrite = (): boolean => this.holds === 0 && this.answerPausedUntilMs <= this.clock.now();

  /**
   * Run one logical request: `attempt` is called once per try, inside a concurrency
   * slot, after pause and rate allow it. Retries per RETRY_POLICY. A try kept from going at the
   * write (mayWrite) is no try: it waits for the pause and goes again.
   */
  async run<T>(endpoint: EndpointName, attempt: (onStatus: StatusListener, mayWrite: () => boolean) => Promise<T>, signal: AbortSignal): Promise<T> {
    const tries = { all: 0, bounded: 0, rateLimited: 0 };
    for (;;) {
      tries.all++;
      // The grant counts the request and starts it in one synchronous step: workers resuming
      // in the same turn cannot overspend the budget or the pacer.
      const sentAt = await this.acquire(signal, endpoint);
      // This attempt holds an in-flight slot until it is answered (or, when it waits alone, until it starts waiting).
      let slot = true;
      let held = false;
      let unsent = false;
      const awaiting = this.awaitStatus(sentAt);
      const onStatus: StatusListener = (status, serverDate = null) => {
        awaiting.seen();
        this.serverClock.observe(serverDate, sentAt, this.clock.now());
        if (held || (status !== 429 && status !== 503)) return;
        held = true;
        this.holds++;
      };
      try {
        const result = await attempt(onStatus, this.mayWrite);
        awaiting.seen();
        this.control.settled(sentAt);
        this.inFlightAnswered(awaiting.others, awaiting.index, true);
        this.reached();
        this.answered(sentAt, true);
        this.countStatus("2xx");
        return result;
      } catch (err) {
        awaiting.seen();
        this.control.settled(sentAt);
        if (!(err instanceof ApiError) || signal.aborted) throw err;
        const refutedInFlight = err.status === 429 && this.inFlightAnswered(awaiting.others + this.sentTogetherAfter(awaiting.index, sentAt), awaiting.index, false) === "refuted";
        if (err.kind === "not-sent") {
          unsent = true;
          this.heldAtWrite(endpoint);
          tries.all--;
          continue;
        }
        const waitMs = this.afterFailure(endpoint, err, sentAt, tries, refutedInFlight);
        if (waitMs.scope === "all") {
          if (err.status === 503) this.unavailablePauseMs = Math.max(this.unavailablePauseMs, waitMs.ms);
          this.control.pausing(waitMs.ms);
          this.pauseUntil(this.clock.now() + waitMs.ms);
          this.answerPausedUntilMs = Math.max(this.answerPausedUntilMs, this.pausedUntilMs);
        } else {
          // The wait is this request's alone: the others go on while it sleeps, in its slot too
          // (a burst of 503s backing off in every slot would otherwise stop all sending for a backoff).
          if (held) {
            held = false;
            this.holds--;
          }
          this.control.stalled();
          slot = false;
          this.inFlight--;
          this.lastAnswerAt = this.clock.now();
          this.waitingAlone++;
          this.pump();
          try {
            await this.clock.sleep(waitMs.ms, signal);
          } finally {
            this.waitingAlone--;
          }
        }
      } finally {
        awaiting.seen();
        if (slot) {
          this.inFlight--;
          if (!unsent) this.lastAnswerAt = this.clock.now();
        }
        if (held) this.holds--;
        this.pump();
      }
    }
  }

  /**
   * An answer for the in-flight evidence: a request sent with `others` of ours awaiting their status `passed`, or was
   * refused (429). A limit on in flight found becomes the ceiling, sent unpaced; refuted, the rate control's pacing
   * comes back. Found only while the rate control probes or holds: a ramp's 429s fall at its most in flight, and a
   * limit found there would be tested against a rate the control has not bounded yet. Not in a window (its 429s
   * fall at its end, whatever is in flight).
   */
  private inFlightAnswered(others: number, sendIndex: number, passed: boolean): InFlightVerdict {
    if (this.opts.adaptive === false || this.control.current.phase === "window") return null;
    const mayFind = IN_FLIGHT_FINDING_PHASES.has(this.control.current.phase);
    const verdict = passed ? this.inFlightEvidence.passed(others, mayFind) : this.inFlightEvidence.refused(others, mayFind, sendIndex >= this.inFlightFoundAtSend);
    if (verdict === null) return null;
    // Requests sent from now on go under the limit found (noteSend's next index).
    if (verdict === "found") this.inFlightFoundAtSend = this.recentSendsBase + this.recentSends.length;
    this.applyRate(this.clock.now());
    this.emitRate(verdict === "refuted" ? { inFlightRefuted: true } : {});
    return verdict;
  }

  /**
   * A request sent at `sentAt` awaits its answer's status: how many of ours did when it went (`others`, the in-flight
   * evidence's `k`), its send's index (noteSend), and `seen`, called when the status came (or the attempt ended without one).
   */
  private awaitStatus(sentAt: number): { others: number; index: number; seen: () => void } {
    const others = this.awaitingStatus++;
    let seen = false;
    const done = () => {
      if (seen) return;
      seen = true;
      this.awaitingStatus--;
    };
    return { others, index: this.noteSend(sentAt), seen: done };
  }

  /** Remember a send's time (sentTogetherAfter); its index. */
  private noteSend(at: number): number {
    if (this.recentSends.length >= RECENT_SENDS_KEPT) {
      this.recentSendsBase += this.recentSends.length / 2;
      this.recentSends.splice(0, this.recentSends.length / 2);
    }
    this.recentSends.push(at);
    return this.recentSendsBase + this.recentSends.length - 1;
  }

  /**
   * Sends after send `index` (at `at`) and within SENT_TOGETHER_MS of it: sent in one wave, they reach the server in
   * any order, and each may have been served before it (a refusal's `k` for the in-flight evidence counts them).
   */
  private sentTogetherAfter(index: number, at: number): number {
    let n = 0;
    for (let i = Math.max(0, index + 1 - this.recentSendsBase); i < this.recentSends.length && this.recentSends[i]! <= at + SENT_TOGETHER_MS; i++) n++;
    return n;
  }

  /** A granted request that was not written (mayWrite): not a request sent, nor one the window's allowance or the rate counts. */
  private heldAtWrite(endpoint: EndpointName): void {
    this.stats.heldAtWrite++;
    this.stats.requests--;
    this.stats.byEndpoint[endpoint] = (this.stats.byEndpoint[endpoint] ?? 1) - 1;
    this.control.unsent();
  }

  /** Classify a failed attempt: throw when it is final, else say how long to wait and who waits. */
  private afterFailure(
    endpoint: EndpointName,
    err: ApiError,
    sentAt: number,
    tries: { all: number; bounded: number; rateLimited: number },
    refutedInFlight = false,
  ): { ms: number; scope: "all" | "one" } {
    this.countStatus(err.status == null ? err.kind : String(err.status));
    const now = this.clock.now();
    if (err.status !== null) this.reached();
    else if (isConnectFailure(err)) this.failedToConnect(endpoint, err, now);
    if (err.status !== null && err.status !== 429) this.answered(sentAt, err.status < 500 && err.status !== 401);
    // A 503 may have spent a token (a server decides that after the quota): an upper bound counts it.
    if (err.status === 503) this.control.spent(sentAt);
    const action = actionFor(err);
    // A date in Retry-After names a moment on the server's clock: read against it (server-clock.ts).
    const serverNow = this.readServerClock(endpoint, err, now);
    const raHeader = this.namesNoWait(err, serverNow) ? null : err.retryAfter;
    if (retryAfterBeyondCap(raHeader, serverNow)) {
      const capH = DEFAULTS.maxServerWaitMs / 3_600_000;
      this.emit({
        type: "suspicious",
        endpoint,
        status: err.status,
        retryAfter: raHeader!,
        message: `${endpoint}: the server asked to wait beyond ${capH} h (Retry-After: ${raHeader!.slice(0, 64)}); no server may impose more than ${capH} h, so ${capH} h it is`,
      });
    }
    const ra = retryAfterMs(raHeader, serverNow, this.opts.minRetryAfterMs);
    // Only a wait the server actually named (0, a past date or garbage name none: no deadline to miss).
    const named = retryAfterMs(raHeader, serverNow, 0);
    if (err.status === 429 && named !== null && named > NO_WAIT_UNTIL_NAMED_MS) this.namedLongWait = true;
    const margin = named !== null && named > 0 ? RETRY_AFTER_MARGIN_MS : 0;
    let waitMs: number;
    let scope: "all" | "one";
    if (action === "fail") {
      this.emit({ type: "failure", endpoint, status: err.status, message: err.message, attempts: tries.all });
      throw err;
    } else if (action === "pause-all-and-retry") {
      this.stats.responses429++;
      tries.rateLimited++;
      if (tries.rateLimited > this.opts.max429Retries) {
        this.emit({ type: "failure", endpoint, status: err.status, message: `gave up after ${tries.rateLimited} rate-limited attempts`, attempts: tries.all });
        throw err;
      }
      const newEpisode = this.throttled(sentAt, now, ra, retryAfterIsHttpDate(raHeader), !refutedInFlight);
      waitMs = ra ?? (newEpisode ? this.noRetryAfterWait() : Math.max(0, this.pausedUntilMs - now));
      scope = "all";
    } else {
      if (err.status === 503) this.stats.unavailable++;
      tries.bounded++;
      const limit = action === "backoff-and-retry-twice" ? Math.min(INVALID_RESPONSE_RETRIES, this.opts.maxRetries) : this.opts.maxRetries;
      if (tries.bounded > limit) {
        this.emit({ type: "failure", endpoint, status: err.status, message: `gave up after ${tries.all} attempts: ${err.message}`, attempts: tries.all });
        throw new ApiError(`${err.message} (gave up after ${tries.all} attempts)`, {
          kind: err.kind,
          endpoint,
          status: err.status,
          code: err.code,
          skuId: err.skuId,
          retryAfter: err.retryAfter,
          cause: err,
        });
      }
      waitMs = ra ?? backoffMs(tries.bounded, this.opts.backoffBaseMs, this.opts.backoffCapMs, this.random);
      // A wait the server named holds for every worker; without one, only this request backs off
      // (a 503 without Retry-After is about this request, not the quota).
      scope = action === "pause-all-and-retry-bounded" && ra !== null ? "all" : "one";
    }
    if (waitMs > this.opts.maxWaitMs) {
      const resumeAfter = Math.ceil(now + waitMs + margin);
      const msg = `the server asked to wait ${Math.round(waitMs / 1000)} s, longer than rateLimit.maxWaitSeconds (${Math.round(this.opts.maxWaitMs / 1000)} s); resume after ${new Date(resumeAfter).toISOString()}`;
      this.emit({ type: "failure", endpoint, status: err.status, message: msg, attempts: tries.all });
      throw new ApiError(`${endpoint}: ${msg}`, { kind: "quota-wall", endpoint, status: err.status, resumeAfter, cause: err });
    }
    waitMs += margin;
    this.stats.retries++;
    this.emit({ type: "backoff", endpoint, status: err.status, retryAfter: err.retryAfter, waitMs, attempt: tries.all, scope, message: err.message });
    return { ms: waitMs, scope };
  }

  /** An answer that says something about the quota: `passed` it, or not (429s go through throttled()). */
  private answered(sentAt: number, passed: boolean): void {
    const now = this.clock.now();
    const late = this.pacer !== null && this.decidedLate(sentAt, now);
    if (late) this.pacer?.takeAgain(now);
    this.concurrency.answer(sentAt, now);
    if (!passed) return;
    this.concurrency.passed();
    const before = this.control.current;
    this.control.passed(sentAt, late);
    // A pass can say a window opened again (429s naming no wait, rate-control.ts refusalEnded).
    if (this.control.current !== before) this.rateChanged(before, now);
    this.noRetryAfterStreak = 0;
    this.passTimes.push(now);
    while (this.passTimes.length && this.passTimes[0]! < now - ACCEPTED_WINDOW_MS) this.passTimes.shift();
  }

  /**
   * The answer to a request sent at `sentAt` came so late that the server may have held it before deciding
   * (DECIDED_LATE_INTERVALS): a stall of the server's process decides every request that arrived meanwhile
   * at once, at its end, and they took their tokens then, not when we sent them and the pacer counted them.
   */
  private decidedLate(sentAt: number, now: number): boolean {
    const rate = this.pacer?.requestsPerSecond;
    if (!rate || this.concurrency.samples < DECIDED_LATE_MIN_SAMPLES) return false;
    const median = this.concurrency.latencyMs;
    // Later than the median by more than the round trips' usual spread under it (jitter on the way, not a stall).
    const usual = median - this.concurrency.shortestMs;
    return now - sentAt > median + Math.max(DECIDED_LATE_INTERVALS * (1000 / rate), usual) + DECIDED_LATE_MARGIN_MS;
  }

  /**
   * `now` on the server's clock, as the answers' Date headers show it (server-clock.ts; each observed with its
   * status, `onStatus` in run, this one's too). The first time it is found not to agree with ours (and each time
   * the difference moves by a second more), the journal says so.
   */
  private readServerClock(endpoint: EndpointName, err: ApiError, now: number): number {
    const offset = this.serverClock.offsetMs;
    if (Math.abs(offset - this.reportedClockOffsetMs) >= 1_000 && err.retryAfter !== null) {
      this.reportedClockOffsetMs = offset;
      const by = `${(Math.abs(offset) / 1000).toFixed(1)} s ${offset < 0 ? "behind" : "ahead of"} ours`;
      const message = offset === 0 ? "the server's clock agrees with ours again" : `the server's clock (its Date header) reads ${by}: the dates its Retry-After names are read on its clock`;
      this.emit({ type: "suspicious", endpoint, status: err.status, retryAfter: err.retryAfter, message });
    }
    return now + offset;
  }

  /** `err`'s Retry-After names no wait and is read as none (NO_WAIT_UNTIL_NAMED_MS). */
  private namesNoWait(err: ApiError, now: number): boolean {
    if (this.namedLongWait || this.control.current.phase === "window") return false;
    return retryAfterNamesNoWait(err.retryAfter, now);
  }

  /** A 429: true when it begins a new episode (it was sent after the last episode began). */
  private throttled(sentAt: number, now: number, waitMs: number | null, namedAsDate = false, toControl = true): boolean {
    this.concurrency.answer(sentAt, now);
    if (sentAt <= this.episodeAt) return false;
    this.episodeAt = now;
    if (this.opts.adaptive === false) return true;
    // A 429 that refuted a limit on in flight came at a rate the rate control never set: it goes on from where it was.
    if (toControl) {
      // Over a whole second even at the start: the first 429 comes right after the bucket's burst,
      // and the burst over the few milliseconds it took would read as a rate the quota never had.
      this.episodeAccepted = this.passTimes.filter((t) => t >= now - ACCEPTED_WINDOW_MS).length / (ACCEPTED_WINDOW_MS / 1000);
      const before = this.control.current;
      this.control.throttled(sentAt, now, this.episodeAccepted, waitMs, namedAsDate);
      this.rateChanged(before, now);
    }
    this.pacer?.empty(now);
    // The bucket is empty now: what the pause refills is the pacer's to count, at its rate.
    this.unavailablePauseMs = 0;
    return true;
  }

  /** Something answered: the server is there. */
  private reached(): void {
    this.connectFailingSince = null;
    this.connectFailures = 0;
  }

  /** An attempt never connected; after enough of them, for long enough, the server is unreachable and every request stops. */
  private failedToConnect(endpoint: EndpointName, err: ApiError, now: number): void {
    this.connectFailingSince ??= now;
    this.connectFailures++;
    if (this.connectFailures < UNREACHABLE_FAILURES || now - this.connectFailingSince < UNREACHABLE_AFTER_MS) return;
    const seconds = ((now - this.connectFailingSince) / 1000).toFixed(1);
    const where = this.opts.server ? `the server at ${this.opts.server}` : "the server";
    this.unreachable = new ApiError(
      `${endpoint}: ${where} is unreachable: ${this.connectFailures} attempts in ${seconds} s failed to connect (${connectCode(err) ?? err.kind}); check that it is up and that --base-url is right`,
      {
        kind: "unreachable",
        endpoint,
        cause: err,
      },
    );
    this.emit({ type: "failure", endpoint, status: null, message: this.unreachable.message, attempts: this.connectFailures });
    const e = this.unreachable;
    this.rejectAll(() => e);
    throw e;
  }

  private noRetryAfterWait(): number {
    this.noRetryAfterStreak++;
    // Polling for a window's opening (429s naming no wait, rate-control.ts): from the shortest wait, pollCapMs bounds the rest.
    const rate = this.control.current.phase === "window" ? Infinity : (this.currentRate ?? Math.max(1, this.episodeAccepted));
    const base = Math.min(NO_RETRY_AFTER_MAX_MS, Math.max(NO_RETRY_AFTER_MIN_MS, (NO_RETRY_AFTER_TOKENS * 1000) / rate));
    // Refused for long (a window that went unnamed), poll at a share of the refusal so far instead of doubling.
    const polled = Math.max(base, this.control.pollCapMs(this.clock.now()));
    return Math.min(this.opts.backoffCapMs, polled, base * 2 ** (this.noRetryAfterStreak - 1));
  }

  /** Set the pacer from the rate control and say so when the rate or phase moved. */
  private rateChanged(before: RateSetting, now: number): void {
    const after = this.control.current;
    this.applyRate(now);
    // Unpaced or a window's, both without a rate: nothing moved (a window polled for without Retry-After sets it at each 429).
    const moved = before.phase !== after.phase || (before.rate === null ? after.rate !== null : Math.abs((after.rate ?? 0) / before.rate - 1) > 0.02);
    if (!moved) return;
    this.emitRate();
  }

  /** The rate event for what is in force now (the pacer, the bounds, in flight, and a limit on in flight found). */
  private emitRate(extra: { inFlightRefuted?: true } = {}): void {
    const b = this.control.bounds;
    this.emit({
      type: "rate",
      requestsPerSecond: this.currentRate,
      phase: this.control.current.phase,
      fitLow: b.low,
      fitHigh: Number.isFinite(b.high) ? b.high : null,
      inFlightLimit: this.inFlightLimit,
      ...(this.inFlightEvidence.limit !== null ? { inFlightFound: true } : {}),
      ...extra,
    });
  }

  /** The pacer follows the adaptive rate and the user's ceiling, whichever is lower. */
  private applyRate(now: number): void {
    const adaptive = this.control.current;
    const ceiling = this.opts.requestsPerSecond;
    // Under a limit on requests in flight found (in-flight-evidence.ts) the ceiling on in flight paces, not a rate.
    const adaptiveRate = this.inFlightEvidence.limit !== null ? null : adaptive.rate;
    const rate = Math.min(adaptiveRate ?? Infinity, ceiling ?? Infinity);
    if (!Number.isFinite(rate)) {
      this.pacer = null;
      return;
    }
    const own = adaptiveRate !== null && adaptiveRate <= rate;
    const burst = own ? adaptive.burst : 1;
    const carry = own ? adaptive.carry : carryAtRate(rate);
    if (this.pacer) this.pacer.configure(rate, burst, now, carry);
    // The adaptive rate's first setting (the ramp's start after the first 429) goes without its carry, as it
    // always has: with it (as dcf4741 had it), the harness's generous buckets 100 ms away ran 1.1239 ->
    // 1.1269x on average (150/75: 1.187 -> 1.238x). The user's ceiling keeps its carry from the start.
    else this.pacer = new Pacer(rate, burst, now, own ? 0 : carry);
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
      this.pausedSinceGrant = true;
      this.stats.waitMs += until - from;
      this.pausedUntilMs = until;
    }
  }

  /** Wait in line for a grant: resolves with the send time, once pause, in-flight limit and pacer allow. */
  private acquire(signal: AbortSignal, endpoint: EndpointName): Promise<number> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.unreachable) return Promise.reject(this.unreachable);
    // Every waiter listens on the run's one signal: up to `concurrency` of them, beyond Node's default warning at 10.
    if (!this.widenedSignals.has(signal)) {
      setMaxListeners(this.opts.concurrency + 16, signal);
      this.widenedSignals.add(signal);
    }
    return new Promise<number>((resolve, reject) => {
      const w: Waiter = {
        endpoint,
        signal,
        resolve,
        reject,
        onAbort: () => {
          const i = this.queue.indexOf(w);
          if (i >= 0) this.queue.splice(i, 1);
          reject(signal.reason);
          this.pump();
        },
      };
      signal.addEventListener("abort", w.onAbort, { once: true });
      this.queue.push(w);
      this.pump();
    });
  }

  /**
   * Grant what can go now, in line order; arm one timer for the moment the next may go
   * (a pause's end or the pacer's next token). Releases call it too.
   *
   * Unpaced, with requests in flight: not at once, but once the answers that already arrived are read
   * (Clock.afterArrived). A 429 can sit read-ready on its socket while the event loop does the work after
   * other answers (their store writes): a grant made meanwhile went out after the 429 had arrived, before
   * we knew of it, and a server counts that request as sent inside its Retry-After. Real CLI, 200/s burst 5,
   * 600 SKUs, three runs: 5, 5 and 1 requests sent 2-34 ms after the server sent a 429 (most at the run's
   * first, unpaced, the sync busy with its first pages); read first, 0, 1 and 1, 3 ms after (100/s burst 20
   * and 40/s burst 10, three runs each: none). The 429 then holds every grant (`holds`). It costs about 4 %
   * of raw throughput without a quota (3,000 SKUs: 8.32-8.43 s -> 8.51-8.84 s).
   */
  private pump(lateMs = 0): void {
    // Nothing in flight, nothing to read first. Paced, the pacer's own time: a grant behind the store's work
    // after other answers went out late, and a late grant is time lost (200/s burst 5: steady share 0.89 -> 0.82).
    // Unless the loop may have stalled (our timer fired late, or nothing pumped for a while): what arrived meanwhile is read first (LATE_TIMER_MS).
    if (this.pumpQueued) return;
    if (!this.clock.afterArrived || this.inFlight === 0 || (this.pacer !== null && !this.mayHaveStalled(lateMs))) return this.pumpNow();
    this.pumpQueued = true;
    this.clock.afterArrived(() => {
      this.pumpQueued = false;
      this.pumpNow();
    });
  }

  /** Answers may wait unread: our timer fired `lateMs` late, or nothing pumped for a while (LATE_TIMER_MS). */
  private mayHaveStalled(lateMs: number): boolean {
    return lateMs > LATE_TIMER_MS || this.clock.now() - this.lastPumpAt > STALL_GAP_MS;
  }

  private pumpNow(): void {
    const now = this.clock.now();
    this.lastPumpAt = now;
    this.countCeilingHeld(now);
    try {
      this.grantWhatCan(now);
    } finally {
      if (this.inFlight >= this.opts.concurrency && this.pausedUntilMs <= now) this.ceilingFullSince = now;
      else if (this.heldByUnpacedLimit(now)) this.unpacedFullSince = now;
    }
  }

  /** The in-flight limit sized for a quota not yet known is what holds the run now (stats.unpacedHeldMs). */
  private heldByUnpacedLimit(now: number): boolean {
    if (this.currentRate !== null || this.stats.responses429 > 0 || this.pausedUntilMs > now) return false;
    const limit = this.inFlightLimit;
    return limit < this.opts.concurrency && this.inFlight >= limit && this.queue.length > 0;
  }

  /** The time since the ceiling was last found full goes to stats.ceilingHeldMs (every change of the in-flight count calls pump). */
  private countCeilingHeld(now: number): void {
    if (this.unpacedFullSince !== null) this.stats.unpacedHeldMs += Math.max(0, now - this.unpacedFullSince);
    this.unpacedFullSince = null;
    if (this.ceilingFullSince === null) return;
    this.stats.ceilingHeldMs += Math.max(0, now - this.ceilingFullSince);
    this.ceilingFullSince = null;
  }

  /** pump's body: grant in line order while pause, budget, in-flight limit and pacer allow. */
  private grantWhatCan(now: number): void {
    while (this.queue.length) {
      if (this.opts.maxRequests != null && this.stats.requests >= this.opts.maxRequests) {
        const max = this.opts.maxRequests;
        return this.rejectAll(
          (w) =>
            new ApiError(`${w.endpoint}: the request budget of ${max} for this run is spent (--max-requests / sync.maxRequests); the next run continues`, { kind: "budget", endpoint: w.endpoint }),
        );
      }
      if (this.pausedUntilMs > now) {
        if (this.pausedUntilMs - now > this.opts.maxWaitMs + RETRY_AFTER_MARGIN_MS) {
          const until = Math.ceil(this.pausedUntilMs);
          return this.rejectAll(
            (w) =>
              new ApiError(`${w.endpoint}: paused by the server until ${new Date(until).toISOString()}, longer than rateLimit.maxWaitSeconds`, {
                kind: "quota-wall",
                endpoint: w.endpoint,
                resumeAfter: until,
              }),
          );
        }
        return this.arm(this.pausedUntilMs);
      }
      const before = this.control.current;
      if (this.opts.adaptive !== false && this.control.tick(now)) this.rateChanged(before, now);
      if (this.inFlight >= this.inFlightLimit || this.holds > 0) return;
      if (this.control.windowSpent) {
        // The window's allowance is out: wait for the next window when its length is known, else find its end with one request.
        const opens = this.control.enterNextWindow();
        if (opens !== null) {
          this.pauseUntil(opens + RETRY_AFTER_MARGIN_MS);
          continue;
        }
        if (this.inFlight > 0) return;
      }
      // A window we took as open on our own goes one request at a time until one passes (rate-control.ts).
      if (this.control.windowOpening && this.inFlight > 0) return;
      if (this.pacer && this.unavailablePauseMs > 0 && this.pausedSinceGrant) this.pacer.atLeast(this.control.refilledDuring(this.unavailablePauseMs), now);
      this.unavailablePauseMs = 0;
      // A bucket of one token is spaced to a fraction of a millisecond (PRECISE_BLOCK_MS): its pacer's timer as well as the spacing's.
      const spaced = this.pacer !== null && this.control.spacedFromAnswer;
      if (this.pacer && !this.pacer.ready(now)) return this.arm(this.pacer.nextTokenAt(now), spaced);
      // A bucket of one token: after the last answer, and a token interval after the last send and more (rate-control.ts, SPACED_MARGIN_MS).
      if (this.pacer && spaced) {
        const extra = this.control.spacedExtraMs(this.lastAnswerAt - this.lastGrantAt);
        const spacedAt = Math.max(this.lastAnswerAt, this.lastGrantAt + 1000 / this.pacer.requestsPerSecond + extra);
        if (now < spacedAt) return this.arm(spacedAt, true);
      }
      const w = this.queue.shift()!;
      w.signal.removeEventListener("abort", w.onAbort);
      this.pacer?.take(now);
      this.lastGrantAt = now;
      this.firstSentAt ??= now;
      this.control.sent(now, this.pausedSinceGrant);
      this.pausedSinceGrant = false;
      this.count(w.endpoint);
      this.inFlight++;
      w.resolve(now);
    }
    this.disarm();
  }

  private rejectAll(errorFor: (w: Waiter) => Error): void {
    for (const w of this.queue.splice(0)) {
      w.signal.removeEventListener("abort", w.onAbort);
      w.reject(errorFor(w));
    }
    this.disarm();
  }

  /** Pump again at `at`; `precise`: at it to a fraction of a millisecond (Clock.sleep), for a bucket of one token's spacing. */
  private arm(at: number, precise = false): void {
    // An earlier timer pumps first and arms again; one at the same time stands unless this one is to be precise and it is not.
    if (this.timer && (this.timer.at < at || (this.timer.at === at && (this.timer.precise || !precise)))) return;
    this.disarm();
    const ac = new AbortController();
    this.timer = { at, ac, precise };
    this.clock.sleep(Math.max(0, at - this.clock.now()), ac.signal, precise).then(
      () => {
        if (this.timer?.ac === ac) this.timer = null;
        this.pump(this.clock.now() - at);
      },
      () => {},
    );
  }

  private disarm(): void {
    this.timer?.ac.abort();
    this.timer = null;
  }
}

/** The connect-level error code under an ApiError (undici puts it on the cause, or the cause's cause). */
function connectCode(err: ApiError): string | null {
  const c = err.cause as { code?: unknown; cause?: { code?: unknown } } | undefined;
  const code = c?.cause?.code ?? c?.code;
  return typeof code === "string" ? code : null;
}

function isConnectFailure(err: ApiError): boolean {
  if (err.kind !== "network" && err.kind !== "timeout") return false;
  const code = connectCode(err);
  return code !== null && CONNECT_FAILURE_CODES.has(code);
}
