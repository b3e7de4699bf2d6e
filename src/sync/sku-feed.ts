/**
 * The feed between the list walk (which queues SKUs) and the workers (which take them).
 *
 * Memory stays flat whatever the workspace size: no set of every SKU id. A SKU is queued at
 * most once per run because the database says what is done (fetched in this walk: the
 * planner skips it), `active` holds what is queued or in a worker's hands (at most the
 * queue's capacity plus the workers), and `settled` what ended in this run without being
 * fetched (failed or vanished: exceptional, and bounded by maxFailedShare).
 */
import { WorkQueue } from "./queue.js";

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
  /** SKUs queued in this run so far. */
  enqueued = 0;

  /**
   * Any abort (a signal, a fatal error) releases a producer blocked on a full queue: the
   * workers stop taking, and what was queued stays queued in sku_sync for the next run.
   */
  constructor(
    readonly capacity: number,
    signal: AbortSignal,
  ) {
    this.queue = new WorkQueue<QueuedSku>(capacity);
    signal.addEventListener("abort", () => this.queue.clear(), { once: true });
  }

  /** Queue a SKU unless this run already has it in hand or settled it; false when it was not queued. */
  async offer(id: string, fullHistory = false, repoll = false): Promise<boolean> {
    if (this.active.has(id) || this.settled.has(id)) return false;
    this.active.add(id);
    this.enqueued++;
    await this.queue.put({ id, fullHistory, repoll });
    return true;
  }

  take(): Promise<IteratorResult<QueuedSku>> {
    return this.queue.take();
  }

  /** A SKU left a worker's hands: fetched (the database now says so), or settled for this run. */
  release(id: string, fetched: boolean): void {
    this.active.delete(id);
    if (!fetched) this.settled.add(id);
  }

  /** Nothing more will be queued: the workers drain what is left. */
  close(): void {
    this.queue.close();
  }
}
