/**
 * Progress of a long run. On a terminal: one live line (SKUs done of the list's
 * summary.skuCount, requests/s, time spent waiting on the quota, ETA), which log lines
 * are printed above rather than through (core/terminal.ts LiveLine). Not on a terminal:
 * a log line every few seconds instead.
 */
import type { Logger } from "../core/logger.js";
import { stderrLine, type LiveLine } from "../core/terminal.js";

export interface ProgressUpdate {
  done: number;
  failed: number;
  total: number | null;
  requests: number;
  waitMs: number;
  pausedUntil: number;
}

export interface ProgressSink {
  update(p: ProgressUpdate): void;
  finish(): void;
}

function fmtDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  return h ? `${h}:${String(m).padStart(2, "0")}:${String(r).padStart(2, "0")}` : `${m}:${String(r).padStart(2, "0")}`;
}

class Tracker {
  private readonly start = Date.now();
  private last: ProgressUpdate | null = null;
  /** Requests in a trailing window, for a rate that reflects now rather than the whole run. */
  private readonly samples: Array<[number, number]> = [];
  record(p: ProgressUpdate): void {
    this.last = p;
    const now = Date.now();
    // One sample per 100 ms is plenty for a 10 s window (an update comes with every SKU).
    const newest = this.samples[this.samples.length - 1];
    if (newest && now - newest[0] < 100) return;
    this.samples.push([now, p.requests]);
    while (this.samples.length > 2 && now - this.samples[0]![0] > 10_000) this.samples.shift();
  }
  line(): string {
    const p = this.last;
    if (!p) return "starting…";
    const now = Date.now();
    const [t0, r0] = this.samples[0] ?? [this.start, 0];
    const rps = now > t0 ? ((p.requests - r0) * 1000) / (now - t0) : 0;
    const elapsed = now - this.start;
    const pct = p.total ? ` (${((100 * p.done) / Math.max(1, p.total)).toFixed(1)}%)` : "";
    let eta = "";
    if (p.total && p.done > 0 && p.done < p.total) eta = ` · ETA ${fmtDuration((elapsed / p.done) * (p.total - p.done))}`;
    const paused = p.pausedUntil > now ? ` · paused ${fmtDuration(p.pausedUntil - now)} (quota)` : "";
    const failed = p.failed ? ` · ${p.failed} failed` : "";
    return `SKUs ${p.done}/${p.total ?? "?"}${pct} · ${rps.toFixed(0)} req/s · waited ${(p.waitMs / 1000).toFixed(1)} s on quota${paused}${failed}${eta}`;
  }
}

export class TtyProgress implements ProgressSink {
  private readonly t = new Tracker();
  private readonly timer: NodeJS.Timeout;
  constructor(private readonly out: LiveLine = stderrLine) {
    this.timer = setInterval(() => this.draw(), 250);
    this.timer.unref();
  }
  update(p: ProgressUpdate): void {
    this.t.record(p);
  }
  private draw(): void {
    this.out.show(this.t.line());
  }
  finish(): void {
    clearInterval(this.timer);
    this.draw();
    this.out.end();
  }
}

export class LogProgress implements ProgressSink {
  private readonly t = new Tracker();
  private readonly timer: NodeJS.Timeout;
  constructor(
    private readonly logger: Logger,
    intervalMs: number,
  ) {
    this.timer = setInterval(() => this.logger.info({ progress: true }, this.t.line()), intervalMs);
    this.timer.unref();
  }
  update(p: ProgressUpdate): void {
    this.t.record(p);
  }
  finish(): void {
    clearInterval(this.timer);
  }
}
