/**
 * How a run ends: its status, the error that says why it did not succeed, what the journal
 * records about it, and the CLI's exit code. Pure functions of what stopped the run (its
 * first fatal error, its abort, its failed SKUs), so the whole table is unit-tested
 * (test/sync/outcome.test.ts) without a server or a database.
 */
import { ApiError, describeError, EXIT, SyncError, type ApiErrorKind } from "../core/errors.js";
import type { JournalEntry, RunStatus } from "../store/store.js";

/** Failed SKUs below this count never abort a run, whatever the share (small workspaces). */
export const MIN_FAILURES_TO_ABORT = 10;

/** Fatal errors that end a run 'partial': the work left stays queued and the next run continues it. */
const PARTIAL_KINDS: ReadonlySet<ApiErrorKind> = new Set(["quota-wall", "budget", "unreachable"]);

export type FinalStatus = Exclude<RunStatus, "running">;

export interface OutcomeInput {
  /** The first error that stopped every worker, or null. */
  fatal: Error | null;
  /** Why the run's own signal aborted (the deadline's SyncError, the caller's reason, the fatal error); undefined when it did not. */
  stopReason: unknown;
  /** The caller's signal aborted (SIGINT/SIGTERM, the daemon stopping). */
  interrupted: boolean;
  /** SKUs that failed in this run (they stay queued for the next one). */
  failed: number;
  /** The run's request budget (sync.maxRequests), named when it is spent. */
  maxRequests: number | null;
}

export interface Outcome {
  status: FinalStatus;
  /** Why the run did not succeed (null when it did). */
  error: Error | null;
  /** For a quota wall: when the next run may start (ISO time). */
  resumeAfter: string | null;
  /** What the run's journal records about its end, in order. */
  journal: JournalEntry[];
}

/**
 * The run's status, in this order of precedence: its deadline (unless the caller stopped it
 * too), a fatal error that leaves the work queued (quota wall, budget, server unreachable:
 * partial), any other fatal error (failed), the caller's signal (interrupted), failed SKUs
 * (partial), else succeeded.
 */
export function decideOutcome(input: OutcomeInput): Outcome {
  const { fatal, stopReason } = input;
  if (stopReason instanceof SyncError && stopReason.deadline && !input.interrupted) {
    return { status: "partial", error: stopReason, resumeAfter: null, journal: [{ kind: "partial", message: stopReason.message }] };
  }
  if (fatal instanceof ApiError && PARTIAL_KINDS.has(fatal.kind)) return stoppedEarly(fatal, input.maxRequests);
  if (fatal) return { status: "failed", error: fatal, resumeAfter: null, journal: [{ kind: "error", message: describeError(fatal) }] };
  if (input.interrupted) {
    return {
      status: "interrupted",
      error: new SyncError("interrupted before the run finished; the next 'sync' resumes it"),
      resumeAfter: null,
      journal: [{ kind: "interrupted", message: "stopped by signal; the next run resumes the walk" }],
    };
  }
  if (input.failed > 0) {
    const error = new SyncError(`${input.failed} SKU(s) failed and stay queued; the next run retries them (see sync_journal)`);
    return { status: "partial", error, resumeAfter: null, journal: [] };
  }
  return { status: "succeeded", error: null, resumeAfter: null, journal: [] };
}

/** A quota wall, a spent budget or an unreachable server: partial, and the journal says which. */
function stoppedEarly(fatal: ApiError, maxRequests: number | null): Outcome {
  if (fatal.kind === "quota-wall") {
    const resumeAfter = fatal.resumeAfter ? new Date(fatal.resumeAfter).toISOString() : null;
    const entry = { kind: "partial", endpoint: fatal.endpoint, status: fatal.status, message: `quota wall: resume after ${resumeAfter}` };
    return { status: "partial", error: fatal, resumeAfter, journal: [entry] };
  }
  const entry =
    fatal.kind === "unreachable"
      ? { kind: "partial", endpoint: fatal.endpoint, message: fatal.message }
      : { kind: "partial", message: `request budget of ${maxRequests} spent; remaining work stays queued` };
  return { status: "partial", error: fatal, resumeAfter: null, journal: [entry] };
}

/**
 * The exit code of `inventory-mirror sync` for a run's end: 0 when it succeeded, and when it
 * stopped at the request budget the user set (it did what was asked; the work stays queued);
 * an API error's own code (3 for a refused key); 1 for anything else.
 */
export function syncExitCode(status: RunStatus, error: Error | null): number {
  if (status === "succeeded") return EXIT.ok;
  if (error instanceof ApiError) return error.kind === "budget" ? EXIT.ok : error.exitCode;
  return EXIT.syncFailed;
}

/**
 * The failure policy: a run aborts once at least MIN_FAILURES_TO_ABORT SKUs failed and they
 * are more than `maxFailedShare` of the SKUs planned (including those a resumed walk had done).
 */
export function tooManyFailures(failed: number, planned: number, maxFailedShare: number): boolean {
  return failed >= MIN_FAILURES_TO_ABORT && failedShare(failed, planned) > maxFailedShare;
}

export function failedShare(failed: number, planned: number): number {
  return failed / Math.max(1, planned);
}
