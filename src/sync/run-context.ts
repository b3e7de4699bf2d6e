/**
 * What every step of a run is handed: the run, the store, the API, the configuration, how
 * the run stops, the feed between the list walk and the workers, and the run's tally.
 * One object instead of a list of parameters; each step takes what it needs from it.
 */
import type { Logger } from "../core/logger.js";
import type { ResolvedConfig } from "../core/config.js";
import { SyncError } from "../core/errors.js";
import type { ApiClient } from "../client/api-client.js";
import type { RequestScheduler } from "../scheduler/scheduler.js";
import type { RunState, Store } from "../store/store.js";
import type { PlanReason, Planner } from "./planner.js";
import type { ProgressSink } from "./progress.js";
import type { SkuFeed } from "./sku-feed.js";

export interface RunContext {
  readonly run: RunState;
  readonly store: Store;
  readonly client: ApiClient;
  readonly scheduler: RequestScheduler;
  readonly config: ResolvedConfig;
  readonly logger: Logger;
  readonly progress: ProgressSink | undefined;
  readonly workspace: { id: string; name: string };
  /** The run's mode is incremental (else full). */
  readonly incremental: boolean;
  readonly planner: Planner;
  /**
   * Walks a location must be missed in before it is marked deleted (2 in incremental runs, 1 in full
   * ones). A SKU goes after one, once its detail confirms it (list-walk.ts SKU_DELETE_AFTER_MISSES).
   */
  readonly deleteAfterMisses: number;
  readonly stop: RunStop;
  readonly feed: SkuFeed;
  readonly tally: RunTally;
}

/** What a run counts as it goes; the result and the progress line are read from it. */
export interface RunTally {
  listed: number;
  planned: number;
  fetched: number;
  failed: number;
  /** SKUs this run found gone (404) when it came to fetch them: settled, as a fetched one is. */
  vanished: number;
  /** SKUs this run marked deleted: missed by its walks (the walk's end), or found gone by its workers. */
  deleted: number;
  locations: number;
  rowsAdded: number;
  deepWalks: number;
  detailOnly: number;
  /** Why SKUs were queued. */
  plan: Record<PlanReason | "reverified", number>;
  /** SKUs this walk had fetched before this run started (a resumed walk). */
  alreadyDone: number;
  /** The progress line's total: the list's SKU count (full runs), or what was queued once the walk ends. */
  total: number | null;
}

export function newTally(): RunTally {
  return {
    listed: 0,
    planned: 0,
    fetched: 0,
    failed: 0,
    vanished: 0,
    deleted: 0,
    locations: 0,
    rowsAdded: 0,
    deepWalks: 0,
    detailOnly: 0,
    plan: { new: 0, changed: 0, repolled: 0, retried: 0, reverified: 0 },
    alreadyDone: 0,
    total: null,
  };
}

/**
 * How a run stops. Its signal aborts when the caller's does (SIGINT/SIGTERM, daemon stop), at
 * the run's deadline (a server that stalls without ever failing; the run ends partial and
 * resumable), or at the first fatal error, which stops every worker.
 */
export class RunStop {
  private readonly ac = new AbortController();
  private readonly deadline: NodeJS.Timeout;
  private readonly onOuterAbort = () => this.ac.abort(this.outer.reason);
  /** The first fatal error, or null. */
  fatal: Error | null = null;

  constructor(
    private readonly outer: AbortSignal,
    maxRunMs: number,
  ) {
    this.deadline = setTimeout(() => this.ac.abort(deadlineError(maxRunMs)), maxRunMs);
    outer.addEventListener("abort", this.onOuterAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** The caller stopped the run. */
  get interrupted(): boolean {
    return this.outer.aborted;
  }

  /** Why the run's signal aborted (undefined while it has not). */
  get reason(): unknown {
    return this.ac.signal.reason;
  }

  /** A fatal error: the first one is kept, and every worker stops. */
  fail(err: Error): void {
    if (!this.fatal) this.fatal = err;
    this.ac.abort(err);
  }

  dispose(): void {
    clearTimeout(this.deadline);
    this.outer.removeEventListener("abort", this.onOuterAbort);
  }
}

function deadlineError(maxRunMs: number): SyncError {
  const e = new SyncError(`the run reached its deadline of ${formatSeconds(maxRunMs)} (sync.maxRunSeconds) and stopped; the next run resumes`);
  e.deadline = true;
  return e;
}

function formatSeconds(ms: number): string {
  const s = ms / 1000;
  return s >= 3600 ? `${+(s / 3600).toFixed(2)} h` : s >= 60 ? `${+(s / 60).toFixed(1)} min` : `${+s.toFixed(1)} s`;
}

/**
 * After each SKU: about how many requests the run still expects (the SKUs left at this run's
 * requests per SKU so far), so that the scheduler spends a 429 on finding the quota more closely
 * only while enough work is left for it to pay back (rate-control.ts, probeWorthAPause). Per SKU,
 * its own requests (detail and history pages): with the run's first requests (workspace, locations,
 * list pages) in, the first SKUs of an incremental run of 90 requests read as 600 to come.
 */
export function reportWorkLeft(ctx: RunContext): void {
  const { tally, scheduler } = ctx;
  const settled = tally.fetched + tally.failed + tally.vanished;
  if (tally.total === null || settled === 0) return;
  const skusLeft = Math.max(0, tally.total - tally.alreadyDone - settled);
  const { byEndpoint } = scheduler.stats;
  scheduler.expectRemaining(skusLeft * Math.max(1, ((byEndpoint.detail ?? 0) + (byEndpoint.history ?? 0)) / settled));
}

/** The progress line (or log line) after each SKU. */
export function reportProgress(ctx: RunContext): void {
  const { tally, scheduler } = ctx;
  ctx.progress?.update({
    done: tally.alreadyDone + tally.fetched + tally.vanished,
    failed: tally.failed,
    total: tally.total,
    requests: scheduler.stats.requests,
    waitMs: scheduler.stats.waitMs,
    pausedUntil: scheduler.pausedUntil,
  });
}
