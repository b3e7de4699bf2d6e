/**
 * What the daemon reads from the mirror between runs, and how it journals skipped ticks.
 * Both go through the store: reads through its status read model (store/status.ts, the
 * same one `status` uses), journal entries through the writer of the run in hand
 * (store/runs.ts journalInRunInHand). No SQL here.
 *
 * Skipped ticks: a tick that finds a run in progress is journaled against that run
 * (sync_journal kind 'tick_skipped'). The daemon never holds the writer lock itself
 * (runSync takes `<db>.lock` and opens the database per run, and releases both at its
 * end, so a manual `sync` can run between two daemon runs). The entry is appended through
 * the run's own writer connection, so it joins whatever transaction that connection has
 * open. A tick skipped before the run in hand has created its row (it is still checking
 * the workspace) is kept in memory and written at the run's first progress report; if that
 * run never starts (e.g. the key is refused), it is only logged and counted in the metrics.
 */
import type { Logger } from "../core/logger.js";
import { journalInRunInHand, type JournalEntry, type RunMode } from "../store/runs.js";
import { mirrorState } from "../store/status.js";

/** Journal kind of a tick that found a run in progress. */
const TICK_SKIPPED = "tick_skipped";

/** What the daemon reads from the database between runs (injectable for tests). */
export interface StateReader {
  /** Epoch ms of the last successful run's end, or null (no database, no success yet). */
  lastSuccess(): number | null;
  /** Epoch ms before which the last finished run asked not to retry (a quota wall), or null. */
  resumeAfter(): number | null;
  /** SKUs (current ones) with at least one location whose freshness is not clean; null without a database. */
  skusNotClean(): number | null;
  /** A finished run's responses by endpoint and status. */
  responses(runId: number, requestsByEndpoint: Record<string, number>): Record<string, Record<string, number>>;
  /** The change feed's latest seq (for publish_pending_changes); absent or null: unknown. */
  feedLatest?(): number | null;
}

export function dbStateReader(dbPath: string): StateReader {
  const m = mirrorState(dbPath);
  return {
    lastSuccess: () => m.lastSuccessAt(),
    resumeAfter: () => m.quotaWallAt(),
    skusNotClean: () => m.skusNotClean(),
    responses: (runId, byEndpoint) => m.responses(runId, byEndpoint),
    feedLatest: () => m.feedLatest(),
  };
}

// ---- skipped ticks ---------------------------------------------------------------------------------

export interface SkippedTick {
  /** The mode of the tick that was skipped. */
  mode: RunMode;
  /** Epoch ms of the tick. */
  at: number;
  message: string;
}

/** Where skipped ticks are journaled (injectable for tests). */
export interface TickJournal {
  skipped(t: SkippedTick): void;
  /** The run in hand reported progress: its row exists and this process holds the writer lock. */
  flush(): void;
  /** The run in hand ended (runId null: it never created its row). */
  runEnded(runId: number | null): void;
}

const journalEntry = (t: SkippedTick): JournalEntry => ({ kind: TICK_SKIPPED, at: new Date(t.at).toISOString(), message: t.message });

export class DbTickJournal implements TickJournal {
  private pending: SkippedTick[] = [];

  constructor(
    private readonly dbPath: string,
    private readonly logger: Logger,
  ) {}

  skipped(t: SkippedTick): void {
    this.pending.push(t);
    this.flush();
  }

  flush(): void {
    if (this.pending.length === 0) return;
    const entries = this.pending.splice(0);
    try {
      if (!journalInRunInHand(this.dbPath, entries.map(journalEntry))) this.pending.unshift(...entries);
    } catch (err) {
      this.logger.warn({ err }, "could not journal a skipped tick");
    }
  }

  runEnded(runId: number | null): void {
    if (runId !== null) this.flush();
    if (this.pending.length) {
      const why = runId === null ? "the run they were skipped for never started" : `run ${runId} ended before they could be`;
      this.logger.info({ skippedTicks: this.pending.length }, `skipped ticks not journaled: ${why}`);
      this.pending = [];
    }
  }
}
