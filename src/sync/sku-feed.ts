/**
 * The feed between the list walk (which queues SKUs) and the workers (which take them).
 *
 * Memory stays flat whatever the workspace size: no set of every SKU id. A SKU is queued at
 * most once per run because the database says what is done (fetched in this walk: the
 * planner skips it), `active` holds what is queued or in a worker's hands (at most the
 * queue's capacity plus the workers), and `settled` what ended in this run without being
 * fetched (failed or vanished: exceptional, and bounded by maxFailedShare).
 *
 * A SKU listed again in the same walk with a change (a server whose list order follows its data
 * lists it again after a write) while a worker holds it is taken again once that worker lets it go
 * fetched: the detail it holds may be from before the write. Queued, not yet taken, it needs nothing:
 * its fetch comes after the write.
 */
import { WorkQueue } from "./queue.js";

/** A worker waiting for the in-hand limit reads it again at least this often (see the constructor). */
const RECHECK_MS = 100;

export interface QueuedSku {
  id: string;
  /** Walk the whole history even in an incremental run (rotating re-verification). */
  fullHistory: boolean;
  /** Re-polled only because its stored freshness is not clean: detail first, history only if the detail moved. */
  repoll: boolean;
}

export class SkuFeed {
  private readonly queue: WorkQueue<QueuedSku>;
  private readonly active = new Set<string>();
  private readonly settled = new Set<string>();
  /** SKUs queued in this run so far (one taken again counted again). */
  enqueued = 0;
  /** SKUs in workers' hands now (taken, not yet released). */
  private readonly taken = new Set<string>();
  /** SKUs listed again with a change while in a worker's hands: taken again once released fetched (offer's `again`). */
  private readonly listedAgain = new Map<string, QueuedSku>();
  /** ...released so: taken before the queue's next. */
  private readonly again: QueuedSku[] = [];

  /** SKUs in workers' hands now (taken, not yet released), and the workers waiting for that to fall under `inHandLimit`. */
  private inHand = 0;
  private readonly waiting: Array<() => void> = [];

  /**
   * Any abort (a signal, a fatal error) releases a producer blocked on a full queue: the
   * workers stop taking, and what was queued stays queued in sku_sync for the next run.
   *
   * `inHandLimit`: how many SKUs the workers may hold at once, read at each take. The workers are
   * as many as the most requests ever allowed in flight (each SKU's requests go one after another),
   * but fewer SKUs in hand than workers when fewer requests can be in flight: a SKU taken only waits
   * for a request slot, and when a run is stopped (a signal, --max-requests spent) what each SKU in
   * hand fetched so far is fetched again by the next run. A waiting worker reads the limit again at
   * each release and at least every RECHECK_MS: it can grow with no SKU released (the rate rising,
   * or requests starting to wait out a backoff of their own).
   */
  constructor(
    readonly capacity: number,
    private readonly signal: AbortSignal,
    private readonly inHandLimit: () => number = () => Infinity,
  ) {
    this.queue = new WorkQueue<QueuedSku>(capacity);
    signal.addEventListener(
      "abort",
      () => {
        this.queue.clear();
        this.again.length = 0;
        this.listedAgain.clear();
        this.wake();
      },
      { once: true },
    );
  }

  /**
   * Queue a SKU unless this run already has it in hand or settled it; false when it was not queued.
   * `again`: listed again in this walk with a change; in a worker's hands, it is taken again once released fetched.
   */
  async offer(id: string, fullHistory = false, repoll = false, again = false): Promise<boolean> {
    if (again && this.taken.has(id)) this.listedAgain.set(id, { id, fullHistory, repoll });
    if (this.active.has(id) || this.settled.has(id)) return false;
    this.active.add(id);
    this.enqueued++;
    await this.queue.put({ id, fullHistory, repoll });
    return true;
  }

  /** The next SKU, once fewer than `inHandLimit` are in workers' hands; done when the feed is drained or the run stopped. */
  async take(): Promise<IteratorResult<QueuedSku>> {
    while (this.inHand >= Math.max(1, this.inHandLimit()) && !this.signal.aborted) await this.nextCheck();
    // Counted before the wait for the queue, so that workers woken together do not all pass the check.
    this.inHand++;
    const again = this.again.shift();
    const next: IteratorResult<QueuedSku> = again ? { done: false, value: again } : await this.queue.take();
    if (next.done) this.putDown();
    else this.taken.add(next.value.id);
    return next;
  }

  /** A SKU left a worker's hands: fetched (the database now says so), or settled for this run. */
  release(id: string, fetched: boolean): void {
    this.taken.delete(id);
    const again = this.listedAgain.get(id);
    this.listedAgain.delete(id);
    if (again && fetched && !this.signal.aborted) {
      // Still active: queued again, ahead of the rest.
      this.again.push(again);
      this.enqueued++;
    } else {
      this.active.delete(id);
      if (!fetched) this.settled.add(id);
    }
    this.putDown();
  }

  private putDown(): void {
    this.inHand--;
    this.wake();
  }

  /** Resolves at the next release or abort, or after RECHECK_MS. */
  private nextCheck(): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, RECHECK_MS);
      timer.unref();
      this.waiting.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Every waiting worker checks the limit again (it may have grown, too). */
  private wake(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
  }

  /** Nothing more will be queued: the workers drain what is left. */
  close(): void {
    this.queue.close();
  }
}
