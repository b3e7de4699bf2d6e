/**
 * A bounded async FIFO between the list walker (producer) and the SKU workers
 * (consumers). Bounded so a fast list walk cannot outrun the workers by more than
 * `capacity` ids: memory stays flat whatever the workspace size.
 */
export class WorkQueue<T> {
  private readonly items: T[] = [];
  private closed = false;
  private readonly takers: Array<(v: IteratorResult<T>) => void> = [];
  private readonly putters: Array<() => void> = [];

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.items.length;
  }

  async put(item: T): Promise<void> {
    while (this.items.length >= this.capacity && !this.closed) await new Promise<void>((r) => this.putters.push(r));
    if (this.closed) return;
    const taker = this.takers.shift();
    if (taker) taker({ value: item, done: false });
    else this.items.push(item);
  }

  /** No more puts: takers drain what is left, then get done. */
  close(): void {
    this.closed = true;
    for (const t of this.takers.splice(0)) t({ value: undefined, done: true });
    for (const p of this.putters.splice(0)) p();
  }

  /** Drop everything (abort): takers finish, putters return. */
  clear(): void {
    this.items.length = 0;
    this.close();
  }

  take(): Promise<IteratorResult<T>> {
    const item = this.items.shift();
    if (item !== undefined) {
      this.putters.shift()?.();
      return Promise.resolve({ value: item, done: false });
    }
    if (this.closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((r) => this.takers.push(r));
  }
}
