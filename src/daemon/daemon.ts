/**
 * The daemon: a thin scheduler around `runSync()`, the same function `sync` calls.
 *
 *   trigger (node-cron) --tick(mode)--> Daemon --runSync({ mode, signal })--> database
 *                                          |
 *   HTTP /healthz /readyz /metrics <-------+ (readiness and metrics from run results)
 *
 * One loop per concern, one AbortController for the daemon's lifetime: `start()`
 * starts the HTTP endpoint, the trigger and (when due) a catch-up run; `stop()`
 * stops the trigger, aborts the controller (the run in hand finishes the
 * transaction in hand and records itself 'interrupted'; the next run resumes its
 * walk), waits for that run, closes the HTTP endpoint, and closes the database last
 * with a connection that removes -wal and -shm (store/wal-files.ts).
 *
 * Rules:
 * - Runs never overlap. A tick that finds a run in progress (any mode) is skipped,
 *   logged, counted (ticks_skipped_total{reason="overlap"}) and journaled against
 *   the run in progress (sync_journal kind 'tick_skipped', see state.ts). A run that
 *   outlasts its slot simply continues.
 * - Catch-up on start: an incremental run starts at once when the database has no
 *   successful run, or the last one ended longer ago than the incremental
 *   schedule's interval (the gap between its next two ticks).
 * - A run that fails does not stop the daemon: it is logged and counted, and the
 *   next tick tries again. /readyz turns 503 once the last success is older than
 *   daemon.readyMaxAgeSeconds.
 * - Key refused (401) or wrong workspace (exit codes 3 and 4 of `sync`): retrying
 *   sooner cannot help, restarting cannot either, so the daemon keeps running and
 *   ticking (one workspace request per tick, nothing written), logs an error each
 *   time, and /readyz is 503 at once until a run gets past the workspace check.
 *   The key is read again for every run, so a rotated secret file
 *   (INVENTORY_API_KEY_FILE) is picked up without a restart.
 * - Quota wall (a run ended partial with a resume time): ticks before that time are
 *   skipped (reason "quota"), so the daemon does not knock on a closed door.
 * - Another process holds the writer lock (a manual `sync`): the tick is skipped
 *   (reason "locked"). The daemon never holds the lock between runs.
 * - publish.postgres.enabled: after each run that ended with a result, the mirror is
 *   published into PostgreSQL (publisher.ts), inside the tick, so the next run waits for
 *   it; a failed publish is logged and counted and never fails the run.
 */
import { createTask, type ScheduledTask } from "node-cron";
import type { ResolvedConfig } from "../core/config.js";
import { DEFAULTS } from "../core/defaults.js";
import { ApiError, ConfigError, describeError, StoreError, SyncError, WorkspaceMismatchError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { redactSecrets, type Secret } from "../core/secret.js";
import type { RunMode } from "../store/store.js";
import { releaseWalFiles } from "../store/wal-files.js";
import { LogProgress, type ProgressSink, type ProgressUpdate } from "../sync/progress.js";
import { runSync, type SyncOptions, type SyncResult } from "../sync/sync.js";
import { FeedEndpoint } from "./feed.js";
import { startHttp, type DaemonHttp, type Readiness } from "./http.js";
import { DaemonMetrics, type ErrorKind, type SkipReason } from "./metrics.js";
import { ContinuousPublisher, type PublishFunction } from "./publisher.js";
import { dbStateReader, DbTickJournal, type StateReader, type TickJournal } from "./state.js";

/** What the daemon calls for a run: `runSync` or a test double. */
export type SyncFunction = (opts: SyncOptions) => Promise<SyncResult>;

/** Fires ticks. The default is node-cron on config.schedule; tests use `manualTrigger()` and call `tick()`. */
export interface Trigger {
  start(fire: (mode: RunMode) => void): void;
  stop(): void;
  /** Typical time between two ticks of `mode` (ms), or null when unknown. */
  intervalMs(mode: RunMode): number | null;
}

/** Only `now()` is used: readiness age, catch-up and quota-wall decisions. */
export interface DaemonClock {
  now(): number;
}

export interface DaemonOptions {
  config: ResolvedConfig;
  /** The key, or a function that reads it (called once per run, so a rotated key file is picked up). */
  key: Secret | (() => Secret);
  logger: Logger;
  sync?: SyncFunction;
  trigger?: Trigger;
  clock?: DaemonClock;
  state?: StateReader;
  journal?: TickJournal;
  metrics?: DaemonMetrics;
  /** The bearer token GET /changes requires (feed.serve); null or absent: none (loopback only). */
  feedToken?: Secret | null;
  /** Where /healthz, /readyz and /metrics listen; default config.daemon.listen; false: no HTTP endpoint. */
  http?: { host: string; port: number } | false;
  /** Run the catch-up incremental sync on start when due (default true). */
  catchUp?: boolean;
  /** publish.postgres.enabled: where to publish after each run that ended with a result (publisher.ts); `publish` for tests. */
  postgres?: { url: Secret; publish?: PublishFunction } | null;
}

export type TickSource = "schedule" | "startup" | "manual";

export type TickOutcome = { kind: "ran"; result: SyncResult } | { kind: "failed"; error: Error; errorKind: ErrorKind } | { kind: "skipped"; reason: SkipReason; message: string } | { kind: "stopped" };

interface InHand {
  mode: RunMode;
  source: TickSource;
  startedAt: number;
  promise: Promise<TickOutcome>;
}

/** Errors that a retry cannot fix: the daemon stays up but is not ready until a run gets past the workspace check. */
const BLOCKING: ReadonlySet<ErrorKind> = new Set(["auth", "workspace", "config"]);

export class Daemon {
  readonly metrics: DaemonMetrics;
  private readonly ac = new AbortController();
  private readonly config: ResolvedConfig;
  private readonly logger: Logger;
  private readonly sync: SyncFunction;
  private readonly trigger: Trigger;
  private readonly clock: DaemonClock;
  private readonly state: StateReader;
  private readonly journal: TickJournal;
  private readonly keySource: Secret | (() => Secret);
  private readonly httpAt: { host: string; port: number } | false;
  private readonly catchUp: boolean;
  private readonly publisher: ContinuousPublisher | null;

  private started = false;
  private stopping: Promise<void> | null = null;
  private http: DaemonHttp | null = null;
  private feed: FeedEndpoint | null = null;
  private readonly feedToken: Secret | null;
  private current: InHand | null = null;
  private lastSuccessMs: number | null = null;
  private lastRun: Readiness["lastRun"] = null;
  private blocked: { kind: ErrorKind; message: string } | null = null;
  private resumeAfterMs: number | null = null;
  /** The wall in resumeAfterMs is also the database's (a finished run's resume_after), so clearing it there clears it here. */
  private wallStored = false;

  constructor(opts: DaemonOptions) {
    this.config = opts.config;
    this.logger = opts.logger;
    this.keySource = opts.key;
    this.sync = opts.sync ?? runSync;
    this.clock = opts.clock ?? { now: () => Date.now() };
    this.state = opts.state ?? dbStateReader(opts.config.db);
    this.journal = opts.journal ?? new DbTickJournal(opts.config.db, opts.logger);
    this.trigger = opts.trigger ?? cronTrigger(opts.config.schedule, opts.logger);
    this.httpAt = opts.http ?? opts.config.daemon.listen;
    this.catchUp = opts.catchUp ?? true;
    this.feedToken = opts.feedToken ?? null;
    this.metrics =
      opts.metrics ??
      new DaemonMetrics({
        ready: () => this.readiness().ready,
        skusNotClean: () => this.state.skusNotClean(),
        feedLatest: () => this.state.feedLatest?.() ?? null,
      });
    const pgTarget = opts.postgres;
    this.publisher = pgTarget ? new ContinuousPublisher({ config: this.config, url: pgTarget.url, logger: this.logger, metrics: this.metrics, publish: pgTarget.publish }) : null;
  }

  /** Aborted by `stop()`; every run gets it. */
  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** The HTTP endpoint's address once started (null without one). */
  get address(): { host: string; port: number; url: string } | null {
    return this.http ? { host: this.http.host, port: this.http.port, url: this.http.url } : null;
  }

  /** Mode and start of the run in progress, if any. */
  get inProgress(): { mode: RunMode; startedAt: number } | null {
    return this.current ? { mode: this.current.mode, startedAt: this.current.startedAt } : null;
  }

  async start(): Promise<void> {
    if (this.started || this.ac.signal.aborted) return;
    this.started = true;
    this.lastSuccessMs = this.readSafely(() => this.state.lastSuccess(), null);
    if (this.lastSuccessMs !== null) this.metrics.lastSuccess.set(this.lastSuccessMs / 1000);
    const wall = this.readSafely(() => this.state.resumeAfter(), null);
    if (wall !== null && wall > this.clock.now()) {
      this.resumeAfterMs = wall;
      this.wallStored = true;
    }
    if (this.httpAt) {
      const feed = this.config.feed.serve ? new FeedEndpoint({ dbPath: this.config.db, token: this.feedToken, longPollMs: this.config.feed.longPollSeconds * 1000, host: this.httpAt.host }) : null;
      this.feed = feed;
      this.http = await startHttp({
        host: this.httpAt.host,
        port: this.httpAt.port,
        metrics: this.metrics,
        readiness: () => this.readiness(),
        logger: this.logger,
        ...(feed ? { changes: (req, res) => feed.handle(req, res) } : {}),
      });
      this.logger.info({ url: this.http.url, address: this.http.host, port: this.http.port }, `daemon listening on ${this.http.url} (/healthz, /readyz, /metrics)`);
    }
    if (this.ac.signal.aborted) {
      // stop() was called while the endpoint was starting.
      this.feed?.close();
      this.feed = null;
      await this.http?.close();
      this.http = null;
      return;
    }
    this.trigger.start((mode) => void this.tick(mode, "schedule"));
    this.logger.info({ schedule: this.config.schedule, db: this.config.db }, "daemon started");

    const interval = this.trigger.intervalMs("incremental");
    const age = this.lastSuccessMs === null ? null : this.clock.now() - this.lastSuccessMs;
    if (this.catchUp && (age === null || interval === null || age > interval)) {
      this.logger.info(
        { lastSuccessAgeSeconds: age === null ? null : Math.round(age / 1000) },
        age === null ? "no successful run in the database: starting an incremental sync now" : "the last successful run is older than the incremental interval: starting an incremental sync now",
      );
      void this.tick("incremental", "startup");
    }
  }

  /**
   * Stop scheduling, interrupt the run in hand (it ends after the transaction in hand,
   * recorded 'interrupted'), wait for it, close the HTTP endpoint, and leave no -wal/-shm
   * beside the database. Idempotent.
   */
  stop(reason: unknown = new Error("daemon stopping")): Promise<void> {
    if (this.stopping) return this.stopping;
    this.stopping = (async () => {
      this.trigger.stop();
      this.ac.abort(reason);
      const inHand = this.current;
      if (inHand) {
        this.logger.info({ mode: inHand.mode }, "stopping: interrupting the run in hand after its current transaction");
        await inHand.promise;
      }
      this.feed?.close();
      this.feed = null;
      await this.http?.close();
      this.http = null;
      this.releaseDatabase();
      this.logger.info("daemon stopped");
    })();
    return this.stopping;
  }

  /** Resolves when the run in progress (if any) has ended. */
  async idle(): Promise<void> {
    while (this.current) await this.current.promise;
  }

  /** One tick: start a run of `mode`, unless one is in progress (skip) or the daemon is stopped. */
  tick(mode: RunMode, source: TickSource = "manual"): Promise<TickOutcome> {
    if (!this.started || this.ac.signal.aborted) return Promise.resolve({ kind: "stopped" });
    const now = this.clock.now();
    const inHand = this.current;
    if (inHand) {
      const message = `${mode} tick (${source}) skipped: the ${inHand.mode} run started ${new Date(inHand.startedAt).toISOString()} is still in progress`;
      this.metrics.ticksSkipped.labels(mode, "overlap").inc();
      this.logger.info({ mode, running: inHand.mode }, message);
      this.journal.skipped({ mode, at: now, message });
      return Promise.resolve({ kind: "skipped", reason: "overlap", message });
    }
    // A stored wall cleared meanwhile (a `sync --ignore-quota-wall` that finished) no longer holds this daemon back.
    if (this.wallStored && this.resumeAfterMs !== null && now < this.resumeAfterMs && this.readSafely(() => this.state.resumeAfter(), this.resumeAfterMs) === null) this.resumeAfterMs = null;
    if (this.resumeAfterMs !== null && now < this.resumeAfterMs) {
      const message = `${mode} tick (${source}) skipped: waiting for the quota, resume after ${new Date(this.resumeAfterMs).toISOString()}`;
      this.metrics.ticksSkipped.labels(mode, "quota").inc();
      this.logger.info({ mode }, message);
      return Promise.resolve({ kind: "skipped", reason: "quota", message });
    }
    // execute() handles every error of the run; this catch is for bugs in that handling, so a tick never rejects.
    const run = this.execute(mode, now).catch((err: unknown): TickOutcome => {
      const error = err instanceof Error ? err : new Error(String(err));
      this.logger.error({ err: error }, "daemon tick failed unexpectedly");
      return { kind: "failed", error, errorKind: "other" };
    });
    const hand: InHand = { mode, source, startedAt: now, promise: run };
    hand.promise = run.finally(() => {
      if (this.current === hand) this.current = null;
    });
    this.current = hand;
    return hand.promise;
  }

  /** The /readyz rule. */
  readiness(): Readiness {
    const now = this.clock.now();
    const maxAge = this.config.daemon.readyMaxAgeSeconds;
    const ageMs = this.lastSuccessMs === null ? null : Math.max(0, now - this.lastSuccessMs);
    let ready: boolean;
    let reason: string;
    if (this.blocked) {
      ready = false;
      reason = `runs cannot proceed (${this.blocked.kind}): ${this.blocked.message}`;
    } else if (ageMs === null) {
      ready = false;
      reason = "no successful sync yet";
    } else if (ageMs < maxAge * 1000) {
      ready = true;
      reason = `last successful sync ${Math.round(ageMs / 1000)} s ago (limit ${maxAge} s)`;
    } else {
      ready = false;
      reason = `last successful sync ${Math.round(ageMs / 1000)} s ago, older than daemon.readyMaxAgeSeconds (${maxAge} s)`;
    }
    return {
      ready,
      reason,
      lastSuccessAt: this.lastSuccessMs === null ? null : new Date(this.lastSuccessMs).toISOString(),
      ageSeconds: ageMs === null ? null : Math.round(ageMs / 1000),
      maxAgeSeconds: maxAge,
      running: this.current ? { mode: this.current.mode, since: new Date(this.current.startedAt).toISOString() } : null,
      lastRun: this.lastRun,
      resumeAfter: this.resumeAfterMs !== null && this.resumeAfterMs > now ? new Date(this.resumeAfterMs).toISOString() : null,
    };
  }

  private async execute(mode: RunMode, startedAt: number): Promise<TickOutcome> {
    const progress = this.progressSink();
    this.metrics.running.labels(mode).set(1);
    try {
      const key = typeof this.keySource === "function" ? this.keySource() : this.keySource;
      const result = await this.sync({ mode, config: this.config, key, logger: this.logger, signal: this.ac.signal, progress });
      const outcome = this.recordResult(mode, result);
      // Whatever the run committed goes on to PostgreSQL; a stop does not wait for a publish to start.
      if (this.publisher && !this.ac.signal.aborted) await this.publisher.afterRun(result.runId, this.ac.signal);
      return outcome;
    } catch (err) {
      return this.recordError(mode, startedAt, err instanceof Error ? err : new Error(String(err)));
    } finally {
      progress.finish();
      this.metrics.running.labels(mode).set(0);
    }
  }

  /** Progress as log lines; each report also writes the ticks skipped meanwhile (the run's row exists by then). */
  private progressSink(): ProgressSink {
    const log = new LogProgress(this.logger, DEFAULTS.progressIntervalMs);
    const journal = this.journal;
    return {
      update(p: ProgressUpdate) {
        log.update(p);
        journal.flush();
      },
      finish: () => log.finish(),
    };
  }

  /** A run that ended with a result (any status): metrics, readiness, the quota wall, one log line. */
  private recordResult(mode: RunMode, result: SyncResult): TickOutcome {
    const endedAt = this.clock.now();
    this.journal.runEnded(result.runId);
    const errorKind = result.status === "failed" ? classifyError(result.error) : null;
    this.metrics.observeRun(result, responsesOf(result, this.state), endedAt, errorKind);
    // A key revoked in the middle of a run blocks like one refused at the workspace check.
    this.blocked = errorKind && BLOCKING.has(errorKind) && result.error ? { kind: errorKind, message: safeMessage(result.error) } : null;
    this.lastRun = { mode, outcome: result.status, endedAt: new Date(endedAt).toISOString(), error: result.error ? safeMessage(result.error) : null };
    if (result.status === "succeeded") {
      this.lastSuccessMs = endedAt;
      this.resumeAfterMs = null;
    } else if (result.resumeAfter) {
      this.resumeAfterMs = Date.parse(result.resumeAfter);
      this.wallStored = true;
    }
    const summary = {
      mode,
      runId: result.runId,
      status: result.status,
      durationMs: result.durationMs,
      skusFetched: result.skusFetched,
      skusFailed: result.skusFailed,
      requests: result.requests,
      responses429: result.responses429,
    };
    if (result.status === "succeeded" || result.status === "interrupted") this.logger.info(summary, `run ${result.status}`);
    else if (result.status === "partial") this.logger.warn({ ...summary, resumeAfter: result.resumeAfter, error: this.lastRun.error }, `run partial; the next tick continues`);
    else this.logger.error({ ...summary, kind: errorKind, error: this.lastRun.error }, `run failed; the next tick tries again`);
    return { kind: "ran", result };
  }

  /** A run that threw before it had a result: stopped, skipped (another writer), or failed (blocking or not). */
  private recordError(mode: RunMode, startedAt: number, error: Error): TickOutcome {
    const logger = this.logger;
    const endedAt = this.clock.now();
    this.journal.runEnded(null);
    const kind = classifyError(error);
    if (this.ac.signal.aborted) {
      // stop() came before the run had created its row (it was checking the workspace): nothing to record.
      this.metrics.runs.labels(mode, "interrupted").inc();
      logger.info({ mode }, "run interrupted before it started");
      return { kind: "stopped" };
    }
    if (isLockedByAnother(error)) {
      this.metrics.ticksSkipped.labels(mode, "locked").inc();
      logger.warn({ mode, error: safeMessage(error) }, `${mode} tick skipped: another process is writing the database`);
      return { kind: "skipped", reason: "locked", message: safeMessage(error) };
    }
    this.metrics.observeFailure(mode, kind, endedAt - startedAt, endedAt);
    this.lastRun = { mode, outcome: "failed", endedAt: new Date(endedAt).toISOString(), error: safeMessage(error) };
    if (BLOCKING.has(kind)) {
      this.blocked = { kind, message: safeMessage(error) };
      logger.error({ mode, kind, error: safeMessage(error) }, `run failed: ${safeMessage(error)}; not ready until this is fixed (the daemon keeps trying on schedule)`);
    } else {
      if (error instanceof ApiError && error.kind === "quota-wall" && error.resumeAfter) {
        // Before any run was recorded (the workspace check): only this process knows the wall.
        this.resumeAfterMs = error.resumeAfter;
        this.wallStored = false;
      }
      logger.error({ mode, kind, error: safeMessage(error) }, `run failed: ${safeMessage(error)}; the next tick tries again`);
    }
    return { kind: "failed", error, errorKind: kind };
  }

  /** The state reads between runs used read-only connections, which leave -wal/-shm behind: the last close removes them. */
  private releaseDatabase(): void {
    try {
      releaseWalFiles(this.config.db);
    } catch (err) {
      this.logger.warn({ err }, "could not remove the database's -wal/-shm files at stop (the database is consistent)");
    }
  }

  private readSafely<T>(f: () => T, fallback: T): T {
    try {
      return f();
    } catch (err) {
      this.logger.warn({ err }, "could not read the database state");
      return fallback;
    }
  }
}

/** Responses by endpoint and status, derived from the run's journal (store/status.ts responsesByEndpointStatus). */
function responsesOf(r: SyncResult, state: StateReader): Record<string, Record<string, number>> {
  try {
    return state.responses(r.runId, r.requestsByEndpoint);
  } catch {
    return Object.fromEntries(Object.entries(r.requestsByEndpoint).map(([e, n]) => [e, { "2xx": n }]));
  }
}

function classifyError(err: unknown): ErrorKind {
  if (err instanceof ApiError) return err.kind === "auth" ? "auth" : err.kind === "quota-wall" ? "quota" : "api";
  if (err instanceof WorkspaceMismatchError) return "workspace";
  if (err instanceof ConfigError) return "config";
  if (err instanceof StoreError) return "store";
  if (err instanceof SyncError) return "sync";
  return "other";
}

/** acquireWriterLock's refusal (see store/db.ts). */
function isLockedByAnother(err: Error): boolean {
  return err instanceof StoreError && (err.code === "locked" || /another inventory-mirror process is writing/.test(err.message));
}

function safeMessage(err: Error): string {
  return redactSecrets(describeError(err));
}

// ---- triggers -------------------------------------------------------------------------------------

/** node-cron tasks for `schedule.incremental` and `schedule.full` (5 fields, or 6 with seconds first). */
export function cronTrigger(schedule: { incremental: string; full: string }, logger: Logger): Trigger {
  const cronLogger = {
    info: (m: string) => logger.debug({ component: "node-cron" }, m),
    warn: (m: string) => logger.warn({ component: "node-cron" }, m),
    error: (m: string | Error, err?: Error) => logger.error({ component: "node-cron", err: err ?? m }, String(m instanceof Error ? m.message : m)),
    debug: (m: string | Error) => logger.debug({ component: "node-cron" }, String(m instanceof Error ? m.message : m)),
  };
  let tasks: ScheduledTask[] = [];
  const make = (mode: RunMode, fire: ((mode: RunMode) => void) | null) =>
    createTask(
      schedule[mode],
      () => {
        fire?.(mode);
      },
      { name: `inventory-mirror ${mode}`, logger: cronLogger },
    );
  return {
    start(fire) {
      tasks = (["incremental", "full"] as const).map((mode) => make(mode, fire));
      for (const t of tasks) void t.start();
    },
    stop() {
      for (const t of tasks) void t.destroy();
      tasks = [];
    },
    intervalMs(mode) {
      const probe = make(mode, null);
      try {
        const [a, b] = probe.getNextRuns(2);
        return a && b ? b.getTime() - a.getTime() : null;
      } finally {
        void probe.destroy();
      }
    },
  };
}

/** A trigger that never fires by itself: tests call `daemon.tick()`. `intervals` answers intervalMs. */
export function manualTrigger(intervals: Partial<Record<RunMode, number>> = {}): Trigger & { started: boolean } {
  return {
    started: false,
    start() {
      this.started = true;
    },
    stop() {
      this.started = false;
    },
    intervalMs: (mode) => intervals[mode] ?? null,
  };
}
