/**
 * The daemon's Prometheus metrics (prom-client), on a registry of its own.
 *
 * Counters are added when a run ends (runSync reports its counters once, in its
 * SyncResult); gauges are read at scrape time. Names follow Prometheus conventions:
 * `_total` for counters, base units (`_seconds`), `_timestamp_seconds` for times.
 * Plus the default process and Node.js metrics (process_*, nodejs_*).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { RunMode } from "../store/store.js";
import type { SyncResult } from "../sync/sync.js";

const PREFIX = "inventory_mirror_";
const RUN_MODES: readonly RunMode[] = ["incremental", "full"];
/** `outcome` label of runs_total: the run's final status. A run that could not start (key refused, workspace check failed) is `failed`. */
const RUN_OUTCOMES = ["succeeded", "partial", "failed", "interrupted"] as const;
/** `reason` label of ticks_skipped_total. */
export const SKIP_REASONS = ["overlap", "quota", "locked"] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];
/** `kind` label of sync_errors_total. */
export const ERROR_KINDS = ["auth", "workspace", "quota", "api", "sync", "store", "config", "other"] as const;
export type ErrorKind = (typeof ERROR_KINDS)[number];

/** Run durations from a few seconds (incremental, small workspace) to hours (first backfill under a quota). */
const DURATION_BUCKETS = [1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400];

/** `load` label of publish_runs_total: how a publish into PostgreSQL went. */
const PUBLISH_OUTCOMES = ["bulk", "feed", "failed"] as const;

export interface MetricsOptions {
  /** process_* and nodejs_* metrics (default true). */
  defaultMetrics?: boolean;
  /** Read at scrape time. */
  ready?: () => boolean;
  skusNotClean?: () => number | null;
  /** The change feed's latest seq (publish_pending_changes is that minus publish_feed_sequence). */
  feedLatest?: () => number | null;
}

export class DaemonMetrics {
  readonly registry = new Registry();
  readonly runs: Counter<"mode" | "outcome">;
  readonly ticksSkipped: Counter<"mode" | "reason">;
  readonly errors: Counter<"kind">;
  readonly requests: Counter<"endpoint" | "status">;
  readonly responses429: Counter;
  readonly retries: Counter;
  readonly heldAtWrite: Counter;
  readonly backoffSeconds: Counter;
  readonly ceilingSeconds: Counter;
  readonly unpacedSeconds: Counter;
  readonly skusFetched: Counter;
  readonly skusFailed: Counter;
  readonly historyRows: Counter;
  readonly duration: Histogram<"mode" | "outcome">;
  readonly lastSuccess: Gauge;
  readonly lastRun: Gauge<"mode">;
  readonly running: Gauge<"mode">;
  readonly skusNotClean: Gauge;
  readonly ready: Gauge;
  readonly publish: PublishMetrics;

  constructor(opts: MetricsOptions = {}) {
    const registers = [this.registry];
    this.runs = new Counter({
      name: `${PREFIX}sync_runs_total`,
      help: "Sync runs by mode and outcome (succeeded, partial, failed, interrupted).",
      labelNames: ["mode", "outcome"],
      registers,
    });
    this.ticksSkipped = new Counter({
      name: `${PREFIX}ticks_skipped_total`,
      help: "Scheduled ticks that did not start a run: overlap (a run was in progress), quota (waiting for a quota wall's resume time), locked (another process was writing the database).",
      labelNames: ["mode", "reason"],
      registers,
    });
    this.errors = new Counter({
      name: `${PREFIX}sync_errors_total`,
      help: "Runs that failed, by cause: auth (key refused, 401), workspace (key or database of another workspace), quota, api, sync, store, config, other.",
      labelNames: ["kind"],
      registers,
    });
    this.requests = new Counter({
      name: `${PREFIX}requests_total`,
      help: "API requests (attempts) by endpoint and response status (2xx, or the HTTP status; 'error' when no response: network, timeout).",
      labelNames: ["endpoint", "status"],
      registers,
    });
    // Exposed as rate_limited_total (the name alerts and docs/deploy.md use); the same count as sync_runs.responses_429.
    this.responses429 = new Counter({ name: `${PREFIX}rate_limited_total`, help: "Responses 429 (quota or pre-authentication limit).", registers });
    this.retries = new Counter({ name: `${PREFIX}retries_total`, help: "Requests retried after a 429, 503, network error or timeout.", registers });
    const heldHelp = "Requests granted and then held back at the write because a 429 or 503 had just been read: sent after the pause, not counted as requests or retries.";
    this.heldAtWrite = new Counter({ name: `${PREFIX}held_at_write_total`, help: heldHelp, registers });
    this.backoffSeconds = seconds("backoff_seconds_total", "Seconds during which all requests were paused by a 429/503 (Retry-After or backoff).", registers);
    this.ceilingSeconds = seconds(
      "inflight_ceiling_seconds_total",
      "Seconds, outside pauses, with as many requests in flight as concurrency allows: near the runs' sending time, concurrency and the server's round trip set the pace, not the quota.",
      registers,
    );
    this.unpacedSeconds = seconds(
      "unpaced_hold_seconds_total",
      "Seconds, before any 429, with as many requests in flight as the count sized for a quota of 200 req/s allows and work waiting: near the runs' sending time, a quota above that (or none) far away is not met; --max-rps sizes the count for the rate it names.",
      registers,
    );
    this.skusFetched = new Counter({ name: `${PREFIX}skus_fetched_total`, help: "SKUs whose detail and history were fetched and stored.", registers });
    this.skusFailed = new Counter({ name: `${PREFIX}skus_failed_total`, help: "SKUs whose fetch failed (they stay queued for the next run).", registers });
    this.historyRows = new Counter({ name: `${PREFIX}history_rows_added_total`, help: "History rows added to the mirror.", registers });
    this.duration = new Histogram({
      name: `${PREFIX}sync_duration_seconds`,
      help: "Duration of sync runs.",
      labelNames: ["mode", "outcome"],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.lastSuccess = new Gauge({
      name: `${PREFIX}last_success_timestamp_seconds`,
      help: "Unix time at which the last successful run ended (0: none yet).",
      registers,
    });
    this.lastRun = new Gauge({
      name: `${PREFIX}last_run_timestamp_seconds`,
      help: "Unix time at which the last run of this mode ended, whatever its outcome.",
      labelNames: ["mode"],
      registers,
    });
    this.running = new Gauge({ name: `${PREFIX}sync_running`, help: "1 while a run of this mode is in progress.", labelNames: ["mode"], registers });
    const notClean = opts.skusNotClean;
    const ready = opts.ready;
    this.skusNotClean = scrapedGauge(
      `${PREFIX}skus_not_clean`,
      "Current SKUs with at least one location whose freshness is not clean (the latest scan may not be reflected).",
      registers,
      notClean && (() => safe(notClean)),
    );
    this.ready = scrapedGauge(`${PREFIX}ready`, "1 when /readyz answers 200 (the last successful run is younger than daemon.readyMaxAgeSeconds).", registers, ready && (() => (ready() ? 1 : 0)));

    this.publish = new PublishMetrics(registers, opts.feedLatest);

    this.zeroSeries();
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** Every series alerts may refer to exists from the start, at 0. */
  private zeroSeries(): void {
    for (const mode of RUN_MODES) {
      for (const outcome of RUN_OUTCOMES) this.runs.labels(mode, outcome).inc(0);
      for (const reason of SKIP_REASONS) this.ticksSkipped.labels(mode, reason).inc(0);
      this.running.labels(mode).set(0);
    }
    for (const kind of ERROR_KINDS) this.errors.labels(kind).inc(0);
    this.lastSuccess.set(0);
  }

  /**
   * A run that ended with a result (whatever its status). `responses`: by endpoint and
   * status; `errorKind`: the cause, for a failed run.
   */
  observeRun(r: SyncResult, responses: Record<string, Record<string, number>>, endedAt: number, errorKind: ErrorKind | null = null): void {
    const outcome = r.status === "running" ? "interrupted" : r.status;
    this.runs.labels(r.mode, outcome).inc();
    if (errorKind) this.errors.labels(errorKind).inc();
    this.duration.labels(r.mode, outcome).observe(r.durationMs / 1000);
    this.lastRun.labels(r.mode).set(endedAt / 1000);
    for (const [endpoint, byStatus] of Object.entries(responses)) {
      for (const [status, n] of Object.entries(byStatus)) if (n > 0) this.requests.labels(endpoint, status).inc(n);
    }
    this.responses429.inc(r.responses429);
    this.retries.inc(r.retries);
    this.heldAtWrite.inc(r.heldAtWrite);
    this.backoffSeconds.inc(r.waitMs / 1000);
    this.ceilingSeconds.inc(r.ceilingHeldMs / 1000);
    this.unpacedSeconds.inc(r.unpacedHeldMs / 1000);
    this.skusFetched.inc(r.skusFetched);
    this.skusFailed.inc(r.skusFailed);
    this.historyRows.inc(r.historyRowsAdded);
    if (r.status === "succeeded") this.lastSuccess.set(endedAt / 1000);
  }

  /** A run that could not start or threw before it had a result. */
  observeFailure(mode: RunMode, kind: ErrorKind, durationMs: number, endedAt: number): void {
    this.runs.labels(mode, "failed").inc();
    this.errors.labels(kind).inc();
    this.duration.labels(mode, "failed").observe(durationMs / 1000);
    this.lastRun.labels(mode).set(endedAt / 1000);
  }

  /** Prometheus text exposition format. */
  async text(): Promise<string> {
    return this.registry.metrics();
  }
  get contentType(): string {
    return this.registry.contentType;
  }
}

/** The continuous publish into PostgreSQL (daemon/publisher.ts): every series exists from the start, at 0. */
class PublishMetrics {
  private readonly runs: Counter<"load">;
  private readonly changes: Counter;
  private readonly sequence: Gauge;
  private readonly lastSuccess: Gauge;
  private lastPublished: number | null = null;

  constructor(registers: Registry[], feedLatest: (() => number | null) | undefined) {
    this.runs = new Counter({
      name: `${PREFIX}publish_runs_total`,
      help: "Publishes into PostgreSQL after a run (publish.postgres.enabled): bulk (every table), feed (the change feed's new changes), failed.",
      labelNames: ["load"],
      registers,
    });
    this.changes = new Counter({ name: `${PREFIX}publish_changes_total`, help: "Changes of the feed applied to PostgreSQL.", registers });
    this.sequence = new Gauge({ name: `${PREFIX}publish_feed_sequence`, help: "The change feed's seq PostgreSQL holds after the last successful publish.", registers });
    this.lastSuccess = new Gauge({ name: `${PREFIX}publish_last_success_timestamp_seconds`, help: "Unix time of the last successful publish into PostgreSQL (0: none yet).", registers });
    scrapedGauge(
      `${PREFIX}publish_pending_changes`,
      "Changes of the feed not yet in PostgreSQL: the feed's latest seq minus publish_feed_sequence (0 until the first publish).",
      registers,
      feedLatest &&
        (() => {
          const l = safe(feedLatest);
          return l === null || this.lastPublished === null ? 0 : Math.max(0, l - this.lastPublished);
        }),
    );
    for (const load of PUBLISH_OUTCOMES) this.runs.labels(load).inc(0);
    this.lastSuccess.set(0);
  }

  /** A publish after a run: its report, or null when it failed. */
  observe(r: { load: "bulk" | "feed"; changes: number; feedSequence: number | null } | null, at: number): void {
    if (!r) {
      this.runs.labels("failed").inc();
      return;
    }
    this.runs.labels(r.load).inc();
    this.changes.inc(r.changes);
    if (r.feedSequence !== null) {
      this.lastPublished = r.feedSequence;
      this.sequence.set(r.feedSequence);
    }
    this.lastSuccess.set(at / 1000);
  }
}

/** A gauge whose value `read` gives at scrape time (null: keep the last value); without `read`, set by hand. */
function scrapedGauge(name: string, help: string, registers: Registry[], read: (() => number | null) | undefined): Gauge {
  return new Gauge({
    name,
    help,
    registers,
    ...(read
      ? {
          collect(this: Gauge) {
            const n = read();
            if (n !== null) this.set(n);
          },
        }
      : {}),
  });
}

function safe(f: () => number | null): number | null {
  try {
    return f();
  } catch {
    return null;
  }
}

/** A counter of seconds the runs spent some way (their sum over the daemon's life). */
function seconds(name: string, help: string, registers: Registry[]): Counter {
  return new Counter({ name: `${PREFIX}${name}`, help, registers });
}
