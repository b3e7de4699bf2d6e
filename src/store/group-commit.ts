/**
 * Group commit: units of work finished in the same turn of the event loop share one COMMIT.
 */
import type { DB } from "./db.js";

interface GroupWaiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class GroupCommit {
  /** Callers waiting for the open group's COMMIT (null: no group open). */
  private waiters: GroupWaiter[] | null = null;

  constructor(private readonly db: DB) {}

  /**
   * Run `unit` (a unit of work written with db.transaction, so inside the group it is a
   * SAVEPOINT: all of it or none of it) in the group transaction, and resolve once that has
   * committed. The group commits on setImmediate, so every unit finished in the same turn of
   * the event loop (responses that arrived together) shares one COMMIT, and pages they share
   * (sync_runs, sku_sync, the upper levels of every index) are written to the WAL once.
   * A caller that awaits it before starting its next unit holds at most one uncommitted unit,
   * exactly as with one transaction per unit: a kill loses only the units in hand.
   *
   * After the COMMIT the callers are resumed one per turn of the event loop, in order, as
   * separate network callbacks would have resumed them: each one's next steps (its next
   * request through the scheduler) run to their first wait before the next caller resumes.
   */
  grouped<T>(unit: () => T): Promise<T> {
    this.open();
    let value: T;
    try {
      value = unit();
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<T>((resolve, reject) => this.waiters!.push({ resolve: () => resolve(value), reject }));
  }

  /** Commit the group transaction now, if one is open (before finishing a run or closing). */
  flush(): void {
    if (this.waiters && this.db.open && this.db.inTransaction) this.db.exec("COMMIT");
  }

  private open(): void {
    if (this.waiters) return;
    // Someone else's transaction (not ours): the unit joins it, and the group resolves at once.
    const joined = this.db.inTransaction;
    if (!joined) this.db.exec("BEGIN");
    const waiters: GroupWaiter[] = [];
    this.waiters = waiters;
    setImmediate(() => {
      this.waiters = null;
      let error: unknown = null;
      try {
        if (!joined && this.db.open && this.db.inTransaction) this.db.exec("COMMIT");
      } catch (err) {
        error = err;
      }
      resumeInTurns(waiters, error);
    });
  }
}

/** Resolve (or reject, when the COMMIT failed) each waiter in order, one per turn of the event loop. */
function resumeInTurns(waiters: GroupWaiter[], error: unknown): void {
  const next = (i: number): void => {
    if (i >= waiters.length) return;
    if (error) waiters[i]!.reject(error);
    else waiters[i]!.resolve();
    if (i + 1 < waiters.length) setImmediate(next, i + 1);
  };
  next(0);
}
