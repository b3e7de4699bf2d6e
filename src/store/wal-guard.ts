/**
 * Keeps the WAL file of a mirror database under a size cap while BI readers come and go.
 *
 * Why the WAL grows: in WAL mode a checkpoint copies committed pages back into the
 * database file, but only up to the oldest snapshot a reader still holds, and the WAL
 * file is only rewound (and shrunk) once every frame has been copied and no reader is
 * still reading from it. With readers overlapping continuously, SQLite's automatic
 * checkpoints never find that moment on their own, and the file grows for as long as the
 * writer writes.
 *
 * What the guard does, every `intervalMs` (and whenever `check()` is called, e.g. by the
 * writer after a commit), on its own connection (so its busy timeout never changes the
 * writer's):
 * - below a quarter of the cap: a PASSIVE checkpoint (never waits; copies what it can);
 * - above it: a TRUNCATE checkpoint that does not wait. It copies what it can and, if no
 *   reader holds the WAL at that instant, empties the file;
 * - if that found readers, a TRUNCATE that waits up to `maxWaitMs` (default 250 ms). While
 *   it waits, new readers start from the checkpointed database and no longer pin the WAL,
 *   so the wait ends as soon as the readers that were already there finish. A reader that
 *   holds its transaction longer than that makes the attempt give up; the guard then backs
 *   off (doubling up to `maxBackoffMs`) before it waits again, so a long BI transaction
 *   costs the writer at most `maxWaitMs` per back-off period, and never blocks it.
 *
 * The writer is never blocked by a reader and a reader never by the guard (WAL readers do
 * not wait for checkpoints). During a long reader the WAL must grow (the reader's snapshot
 * needs the old pages); within about one back-off period after the reader ends, the file is
 * back to zero.
 *
 * The quarter leaves room for what the writer appends between two checks: the cap holds as
 * long as it is well above what the writer writes in a few intervals (a full sync writes a
 * few MB per second on a laptop; the default 64 MiB with a 1 s interval is ample). A writer
 * that calls `check()` after each transaction keeps it independent of timer delays.
 *
 * `PRAGMA journal_size_limit` is also set (to the quarter) on the guard's connection and,
 * when given one, on the writer's: SQLite then shrinks the file itself whenever it rewinds it.
 */
import Database from "better-sqlite3";
import { existsSync, statSync } from "node:fs";
import type { DB } from "./db.js";

const WAL_GUARD_DEFAULTS = {
  /** 64 MiB: a full sync of 100k SKUs writes a few hundred MB of WAL without a guard. */
  capBytes: 64 * 1024 * 1024,
  intervalMs: 1_000,
  maxWaitMs: 250,
  maxBackoffMs: 8_000,
} as const;

export interface WalGuardOptions {
  /** The WAL file is kept under this size while no reader holds a transaction for long. */
  capBytes?: number;
  /** How often the WAL size is checked. */
  intervalMs?: number;
  /** Longest a checkpoint may wait for readers that pin the WAL (the writer waits too meanwhile). */
  maxWaitMs?: number;
  /** Longest pause between two waiting attempts while a reader keeps the WAL pinned. */
  maxBackoffMs?: number;
  /** Called after each check (tests, metrics, debug logs). Exceptions from it are ignored. */
  onCheck?: (c: WalCheck) => void;
}

export interface WalCheck {
  at: number;
  /** WAL size before the check. */
  sizeBefore: number;
  /** WAL size after it. */
  sizeAfter: number;
  action: "none" | "passive" | "truncate" | "truncate-wait";
  /** The checkpoint found readers still using the WAL. */
  busy: boolean;
  error: string | null;
}

export interface WalGuardStats {
  checks: number;
  truncations: number;
  busyAttempts: number;
  waitingAttempts: number;
  maxWalBytes: number;
  lastError: string | null;
}

export interface WalGuard {
  readonly capBytes: number;
  readonly stats: WalGuardStats;
  /** Run one check now (also what the timer does). */
  check(): WalCheck;
  /** Stop the timer, try a last non-waiting truncation, close the guard's connection. */
  stop(): void;
}

/**
 * Start guarding the WAL of `target` (an open writer connection, or the database path).
 * The database must exist and be in WAL mode. The timer is unref'd: it never keeps the
 * process alive.
 */
export function startWalGuard(target: DB | string, opts: WalGuardOptions = {}): WalGuard {
  return new Guard(target, opts);
}

/** The guard's own connection, with the size limit set on it and (when given one) on the writer's. */
function openGuardConnection(target: DB | string, softBytes: number): DB {
  const conn = new Database(typeof target === "string" ? target : target.name, { fileMustExist: true });
  conn.pragma("busy_timeout = 0");
  conn.pragma(`journal_size_limit = ${softBytes}`);
  if (typeof target !== "string") {
    target.pragma(`journal_size_limit = ${softBytes}`);
    // Let the writer's own automatic checkpoints run well before the cap (they never wait).
    const pageSize = target.pragma("page_size", { simple: true }) as number;
    const pages = Math.max(16, Math.min(1000, Math.floor(softBytes / pageSize)));
    target.pragma(`wal_autocheckpoint = ${pages}`);
  }
  return conn;
}

type Step = Pick<WalCheck, "action" | "busy">;

class Guard implements WalGuard {
  readonly capBytes: number;
  readonly stats: WalGuardStats = { checks: 0, truncations: 0, busyAttempts: 0, waitingAttempts: 0, maxWalBytes: 0, lastError: null };
  private readonly intervalMs: number;
  private readonly maxWaitMs: number;
  private readonly maxBackoffMs: number;
  private readonly softBytes: number;
  private readonly walPath: string;
  private readonly conn: DB;
  private readonly timer: NodeJS.Timeout;
  private backoffMs: number;
  private nextWaitAt = 0;
  private lastAttemptAt = 0;
  private stopped = false;

  constructor(
    target: DB | string,
    private readonly opts: WalGuardOptions,
  ) {
    this.capBytes = positive(opts.capBytes ?? WAL_GUARD_DEFAULTS.capBytes, "capBytes");
    this.intervalMs = positive(opts.intervalMs ?? WAL_GUARD_DEFAULTS.intervalMs, "intervalMs");
    this.maxWaitMs = Math.max(0, opts.maxWaitMs ?? WAL_GUARD_DEFAULTS.maxWaitMs);
    this.maxBackoffMs = Math.max(this.intervalMs, opts.maxBackoffMs ?? WAL_GUARD_DEFAULTS.maxBackoffMs);
    this.walPath = `${typeof target === "string" ? target : target.name}-wal`;
    this.softBytes = Math.floor(this.capBytes / 4);
    this.backoffMs = this.intervalMs;
    this.conn = openGuardConnection(target, this.softBytes);
    this.timer = setInterval(() => {
      if (!this.stopped) this.check();
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Run one check now (also what the timer does). An arrow property: callers may detach it. */
  readonly check = (): WalCheck => {
    const at = Date.now();
    let sizeBefore = 0;
    // Filled in as the check goes, so a check that throws still says what it attempted.
    const step: Step = { action: "none", busy: false };
    let error: string | null = null;
    try {
      sizeBefore = this.walSize();
      this.stats.maxWalBytes = Math.max(this.stats.maxWalBytes, sizeBefore);
      this.act(at, sizeBefore, step);
    } catch (err) {
      // A guard must never break the sync: report and try again next time.
      error = (err as Error).message;
      this.stats.lastError = error;
    }
    this.stats.checks++;
    let sizeAfter = sizeBefore;
    try {
      sizeAfter = this.walSize();
    } catch {
      /* the file may vanish when the last connection closes */
    }
    const result: WalCheck = { at, sizeBefore, sizeAfter, ...step, error };
    try {
      this.opts.onCheck?.(result);
    } catch {
      /* observers cannot break the guard */
    }
    return result;
  };

  /** Stop the timer, try a last non-waiting truncation, close the guard's connection. */
  readonly stop = (): void => {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.timer);
    try {
      if (this.walSize() > 0) this.checkpoint("TRUNCATE", 0);
    } catch {
      /* best effort */
    }
    this.conn.close();
  };

  private act(at: number, sizeBefore: number, step: Step): void {
    // Called after every commit, act at most once per interval, unless the cap itself is exceeded.
    const due = at - this.lastAttemptAt >= this.intervalMs * 0.9 || sizeBefore > this.capBytes;
    if (sizeBefore === 0 || !due) return;
    this.lastAttemptAt = at;
    if (sizeBefore <= this.softBytes) {
      step.action = "passive";
      this.checkpoint("PASSIVE", 0);
    } else this.truncate(at, step);
  }

  /** A TRUNCATE that does not wait; if readers pinned the WAL, one that waits (unless backing off). */
  private truncate(at: number, step: Step): void {
    step.action = "truncate";
    step.busy = this.checkpoint("TRUNCATE", 0);
    if (step.busy && this.maxWaitMs > 0 && at >= this.nextWaitAt) {
      step.action = "truncate-wait";
      this.stats.waitingAttempts++;
      step.busy = this.checkpoint("TRUNCATE", this.maxWaitMs);
      if (step.busy) {
        this.nextWaitAt = Date.now() + this.backoffMs;
        this.backoffMs = Math.min(this.backoffMs * 2, this.maxBackoffMs);
      }
    }
    if (step.busy) this.stats.busyAttempts++;
    else {
      this.stats.truncations++;
      this.backoffMs = this.intervalMs;
      this.nextWaitAt = 0;
    }
  }

  private walSize(): number {
    return existsSync(this.walPath) ? statSync(this.walPath).size : 0;
  }

  private checkpoint(mode: "PASSIVE" | "TRUNCATE", waitMs: number): boolean {
    if (waitMs > 0) this.conn.pragma(`busy_timeout = ${waitMs}`);
    try {
      const row = (this.conn.pragma(`wal_checkpoint(${mode})`) as Array<{ busy: number }>)[0];
      return (row?.busy ?? 0) !== 0;
    } finally {
      if (waitMs > 0) this.conn.pragma("busy_timeout = 0");
    }
  }
}

function positive(n: number, name: string): number {
  if (!Number.isFinite(n) || n <= 0) throw new RangeError(`startWalGuard: ${name} must be a positive number, got ${n}`);
  return n;
}
