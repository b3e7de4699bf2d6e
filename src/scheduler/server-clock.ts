/**
 * The server's clock, as its `Date` headers show it. A `Retry-After` that is a date names a moment
 * on the server's clock; read against ours, a server whose clock is behind names moments that look
 * past (no wait: we come back while it still refuses, before the moment it meant), and one ahead
 * names waits too long by the difference (30 s ahead: 31 s for every 429 meant as 1 s).
 *
 * Each answer bounds the offset (server clock − ours): the server stamped its Date (cut to the
 * second) between our send and our reading of the answer, so the offset lies in
 * [Date − answeredAt, Date + 1 s − sentAt]. The bounds of all answers seen are intersected; while
 * they hold 0 (within CLOCKS_AGREE_MS), the clocks agree and our own reading stands, to the
 * millisecond. When they exclude it, the server's clock is read as the earliest they allow, so a
 * wait is never shorter than the one meant (up to a second longer, the Date header's grain).
 */

import { IMF_FIXDATE_RE } from "./retry-after.js";

/** Offsets this small are taken as clocks that agree: timers and stamps of whole milliseconds, a server's write after its stamp. */
const CLOCKS_AGREE_MS = 100;
/**
 * The clocks are taken to differ only when this many answers each said so on one side, or one said so by more
 * than DIFFER_AT_ONCE_MS. A single stamp can be stale: Node writes Date from a cache its timer renews each second,
 * so a server whose event loop was held across a second's turn stamps the second before, and alone that answer
 * would make the bounds exclude 0 for the rest of the run (every date then waited up to a second long).
 */
const CONFIRMING_ANSWERS = 2;
const DIFFER_AT_ONCE_MS = 1_000;

/** A Date header's moment (IMF-fixdate, the form it must take), or NaN. */
function parseImfDate(value: string): number {
  return IMF_FIXDATE_RE.test(value.trim()) ? Date.parse(value) : Number.NaN;
}

export class ServerClock {
  private low = Number.NEGATIVE_INFINITY;
  private high = Number.POSITIVE_INFINITY;
  /** Answers whose own bounds put the server's clock behind ours, and ahead: CONFIRMING_ANSWERS. */
  private saidBehind = 0;
  private saidAhead = 0;
  private saidFar = false;

  /** An answer to a request sent at `sentAt`, read at `answeredAt` (our clock, epoch ms), carried `date` (its Date header, or null). */
  observe(date: string | null, sentAt: number, answeredAt: number): void {
    if (date === null) return;
    const stamped = parseImfDate(date);
    if (!Number.isFinite(stamped)) return;
    const low = stamped - answeredAt - CLOCKS_AGREE_MS;
    const high = stamped + 1_000 - sentAt + CLOCKS_AGREE_MS;
    const both = { low: Math.max(this.low, low), high: Math.min(this.high, high) };
    // Bounds that no longer meet: one of the clocks was set (stepped) meanwhile; this answer's bounds start afresh.
    if (both.low > both.high) this.restart(low, high);
    else ({ low: this.low, high: this.high } = both);
    if (high < 0) this.saidBehind++;
    if (low > 0) this.saidAhead++;
    if (high < -DIFFER_AT_ONCE_MS || low > DIFFER_AT_ONCE_MS) this.saidFar = true;
  }

  private restart(low: number, high: number): void {
    this.low = low;
    this.high = high;
    this.saidBehind = 0;
    this.saidAhead = 0;
    this.saidFar = false;
  }

  /** The bounds exclude 0, and more than one answer says so (or one by over a second): not a single stale stamp. */
  private get differ(): boolean {
    if (this.low <= 0 && this.high >= 0) return false;
    return this.saidFar || Math.max(this.saidBehind, this.saidAhead) >= CONFIRMING_ANSWERS;
  }

  /** `now` (our clock) read on the server's: unchanged while the clocks may agree, else the earliest the server's clock can read. */
  read(now: number): number {
    return this.differ ? now + this.low + CLOCKS_AGREE_MS : now;
  }

  /** How far the server's clock reads ahead of ours (negative: behind) as read() takes it; 0 while they may agree. */
  get offsetMs(): number {
    return this.read(0);
  }
}
