/**
 * The run's journal (sync_journal) as the scheduler and the run's start feed it. Entries
 * from before the run exists (scheduler events during the workspace check, an ignored quota
 * wall) are held, then written once it does.
 */
import type { Logger } from "../core/logger.js";
import type { SchedulerEvent } from "../scheduler/scheduler.js";
import { CONTESTED_CUT, CONTESTED_QUIET_MS } from "../scheduler/rate-control.js";
import type { JournalEntry, Store } from "../store/store.js";

export class RunJournal {
  private readonly pending: JournalEntry[] = [];
  private sink: ((e: JournalEntry) => void) | null = null;

  write(e: JournalEntry): void {
    if (this.sink) this.sink(e);
    else this.pending.push(e);
  }

  /** The run exists: write what was held, and every entry from now on. */
  attach(store: Store, runId: number): void {
    const sink = (e: JournalEntry) => store.journal(runId, e);
    this.sink = sink;
    for (const e of this.pending.splice(0)) sink(e);
  }

  /** The scheduler's events that belong in the journal (and, for some, a warning in the log). */
  onSchedulerEvent(e: SchedulerEvent, logger: Logger): void {
    const entry = journalEntryFor(e);
    if (!entry) return;
    if (e.type === "suspicious") logger.warn({ endpoint: e.endpoint, status: e.status }, e.message);
    if (e.type === "backoff") logger.warn({ endpoint: e.endpoint, status: e.status, retryAfter: e.retryAfter, waitMs: e.waitMs }, `backing off: ${e.message}`);
    this.write(entry);
  }
}

function journalEntryFor(e: SchedulerEvent): JournalEntry | null {
  switch (e.type) {
    case "backoff":
      return {
        kind: "backoff",
        endpoint: e.endpoint,
        status: e.status,
        retryAfter: e.retryAfter,
        waitMs: e.waitMs,
        message: `${e.scope === "all" ? "all workers paused" : "request backed off"} ${Math.round(e.waitMs)} ms before attempt ${e.attempt + 1}: ${e.message}`,
      };
    case "failure":
      return { kind: "error", endpoint: e.endpoint, status: e.status, message: e.message };
    case "rate":
      return { kind: "rate", message: describeRate(e) };
    case "suspicious":
      return { kind: "suspicious", endpoint: e.endpoint, status: e.status, retryAfter: e.retryAfter, message: e.message };
  }
}

export function describeRate(e: Extract<SchedulerEvent, { type: "rate" }>): string {
  if (e.inFlightFound) return `send unpaced, up to ${e.inFlightLimit} in flight (429s came only with ${e.inFlightLimit} or more of ours in flight: a limit on requests in flight, not on rate)`;
  if (e.inFlightRefuted) return `${describeRate({ ...e, inFlightRefuted: false })}; a 429 came under the limit on requests in flight taken: not such a limit, paced again`;
  if (e.phase === "window" && e.requestsPerSecond === null) return `send unpaced (a fixed window: each window's allowance goes out at once as it opens), up to ${e.inFlightLimit} in flight`;
  if (e.phase === "window")
    return `send ${e.requestsPerSecond!.toFixed(1)} req/s within each window (a fixed window behind a limit of about that rate: each window's allowance goes out at it), up to ${e.inFlightLimit} in flight`;
  if (e.phase === "contested")
    return `send rate ${e.requestsPerSecond!.toFixed(1)} req/s (contested: 429s at rates the quota had allowed, another client spends it or it moved; ${Math.round((1 - CONTESTED_CUT) * 100)} % less at each 429, more after ${CONTESTED_QUIET_MS / 1000} s without one), up to ${e.inFlightLimit} in flight`;
  const rate = e.requestsPerSecond === null ? "unpaced" : `${e.requestsPerSecond.toFixed(1)} req/s`;
  const fmt = (v: number | null) => (v === null ? "?" : Number.isFinite(v) ? v.toFixed(1) : "∞");
  const quota = e.fitLow === null ? "" : `, quota between ${fmt(e.fitLow)} and ${fmt(e.fitHigh)} req/s`;
  return `send rate ${rate} (${e.phase}${quota}), up to ${e.inFlightLimit} in flight`;
}
