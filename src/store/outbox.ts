/**
 * The change feed: an outbox table (`changes`) that every unit of work appends to in its
 * own transaction, so what a consumer reads in seq order is exactly what committed, in
 * commit order (one writer: seqs are handed out under the write lock, and a unit rolled
 * back takes its seqs with it). Nothing is appended for a row whose fields did not change.
 *
 * The units of work (list.ts, sku.ts) hand this module the fields of a row as they were
 * before the unit and as the unit leaves them; `rowChange` keeps only what differs.
 * Readers (`changes`, the daemon's /changes) go through `readChanges` on a read-only
 * connection; retention (`pruneChanges`) never passes a registered consumer's confirmed seq.
 * The shapes are documented in docs/schema.md ("The change feed").
 */
import { setTimeout as sleep } from "node:timers/promises";
import { StoreError } from "../core/errors.js";
import { type DB, hasTable, openSideWriter } from "./db.js";

export type ChangeEntity = "sku" | "location" | "leaf_quantity" | "history";
export type ChangeKind = "created" | "updated" | "deleted" | "revived" | "removed" | "appended";

/** A row's fields, by column name, with the values the table stores. */
export type Fields = Record<string, unknown>;

/** One line of the feed (NDJSON): see docs/schema.md. */
export interface Change {
  seq: number;
  run: number;
  at: string;
  entity: ChangeEntity;
  id: string;
  sku: string | null;
  change: ChangeKind;
  before: Fields | null;
  after: Fields | null;
}

/** What a unit of work appends (seq, run and time are the outbox's). */
type Pending = Omit<Change, "seq" | "run" | "at">;

const same = (a: unknown, b: unknown) => a === b || JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/**
 * The change from `before` (undefined: no row yet) to `after`, with only the fields that
 * differ on each side; null when nothing differs. A `deleted_at` that becomes set is a
 * deletion, one that is cleared a revival.
 */
function rowChange(entity: ChangeEntity, id: string, sku: string | null, before: Fields | undefined, after: Fields): Pending | null {
  if (!before) return { entity, id, sku, change: "created", before: null, after };
  const b: Fields = {};
  const a: Fields = {};
  for (const k of Object.keys(after)) {
    if (!same(before[k], after[k])) {
      b[k] = before[k] ?? null;
      a[k] = after[k] ?? null;
    }
  }
  if (Object.keys(a).length === 0) return null;
  const change: ChangeKind = "deleted_at" in a ? (a.deleted_at === null ? "revived" : "deleted") : "updated";
  return { entity, id, sku, change, before: b, after: a };
}

/** Appends to the outbox on the writer connection, inside the caller's transaction. */
export class Outbox {
  private readonly insert;

  constructor(db: DB) {
    this.insert = db.prepare("INSERT INTO changes (run_id, at, entity, entity_id, sku_id, change, data) VALUES (?, ?, ?, ?, ?, ?, ?)");
  }

  /** Append one change (null: nothing changed, nothing appended). */
  append(runId: number, at: string, c: Pending | null): void {
    if (!c) return;
    this.insert.run(runId, at, c.entity, c.id, c.sku, c.change, JSON.stringify({ before: c.before, after: c.after }));
  }

  /** The row's fields before and after the unit: appended only when some field differs. */
  row(runId: number, at: string, entity: ChangeEntity, id: string, sku: string | null, before: Fields | undefined, after: Fields): void {
    this.append(runId, at, rowChange(entity, id, sku, before, after));
  }

  /** A row that is gone (a leaf the detail no longer returns). */
  removed(runId: number, at: string, entity: ChangeEntity, id: string, sku: string | null, before: Fields): void {
    this.append(runId, at, { entity, id, sku, change: "removed", before, after: null });
  }

  /** A SKU's new history rows (one change per SKU and unit), or the rows a complete walk removed. */
  history(runId: number, at: string, skuId: string, added: Fields[], removed: Fields[]): void {
    if (added.length) this.append(runId, at, { entity: "history", id: skuId, sku: skuId, change: "appended", before: null, after: { rows: added } });
    if (removed.length) this.append(runId, at, { entity: "history", id: skuId, sku: skuId, change: "removed", before: { rows: removed }, after: null });
  }
}

// ---- reading the feed --------------------------------------------------------------------------

type ChangeRow = { seq: number; run_id: number; at: string; entity: ChangeEntity; entity_id: string; sku_id: string | null; change: ChangeKind; data: string };

/** The changes after `since`, oldest first, at most `limit` (works on a read-only connection). */
export function readChanges(db: DB, since: number, limit: number): Change[] {
  const rows = db.prepare("SELECT * FROM changes WHERE seq > ? ORDER BY seq LIMIT ?").all(since, limit) as ChangeRow[];
  return rows.map((r) => {
    const { before, after } = JSON.parse(r.data) as { before: Fields | null; after: Fields | null };
    return { seq: r.seq, run: r.run_id, at: r.at, entity: r.entity, id: r.entity_id, sku: r.sku_id, change: r.change, before, after };
  });
}

/**
 * The feed's extent: the oldest seq still kept (null when none is) and the latest seq ever
 * handed out (0 when none). Seqs have no holes but those pruning leaves below `oldest`.
 */
export function feedBounds(db: DB): { oldest: number | null; latest: number } {
  const oldest = (db.prepare("SELECT min(seq) AS s FROM changes").get() as { s: number | null }).s;
  const seqRow = db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").get() as { seq: number } | undefined;
  return { oldest, latest: seqRow?.seq ?? 0 };
}

/**
 * Has retention removed changes a consumer resuming after `since` has not seen? Then it must
 * start again from a copy of the tables (the changes after `since` are no longer all here).
 */
export function feedGapAfter(db: DB, since: number): boolean {
  const { oldest, latest } = feedBounds(db);
  if (since >= latest) return false;
  return oldest === null || oldest > since + 1;
}

export interface WaitOptions {
  limit: number;
  /** Give up (an empty page) after this long. */
  timeoutMs: number;
  /** Look again this often. */
  intervalMs: number;
  signal?: AbortSignal;
}

/**
 * The changes after `since`, waiting up to `timeoutMs` for the first one to commit: a
 * read-only connection in WAL mode sees each commit at its next read, so this polls with
 * one indexed query per interval. Empty after the timeout or when `signal` aborts.
 */
export async function waitForChanges(db: DB, since: number, o: WaitOptions): Promise<Change[]> {
  const deadline = Date.now() + o.timeoutMs;
  for (;;) {
    const page = readChanges(db, since, o.limit);
    const left = deadline - Date.now();
    if (page.length || left <= 0 || o.signal?.aborted) return page;
    try {
      await sleep(Math.min(o.intervalMs, left), undefined, { signal: o.signal });
    } catch {
      return [];
    }
  }
}

// ---- consumers and retention -------------------------------------------------------------------

/** Register a consumer that retention must wait for (idempotent); returns its confirmed seq. */
export function registerFeedConsumer(db: DB, name: string, at = new Date().toISOString()): number {
  db.prepare("INSERT INTO feed_consumers (name, confirmed_seq, registered_at) VALUES (?, 0, ?) ON CONFLICT(name) DO NOTHING").run(name, at);
  return (db.prepare("SELECT confirmed_seq FROM feed_consumers WHERE name = ?").get(name) as { confirmed_seq: number }).confirmed_seq;
}

/** A registered consumer has handled every change up to `seq` (it never moves back). */
export function confirmFeedConsumer(db: DB, name: string, seq: number, at = new Date().toISOString()): void {
  const info = db.prepare("UPDATE feed_consumers SET confirmed_seq = max(confirmed_seq, ?), confirmed_at = ? WHERE name = ?").run(seq, at, name);
  if (info.changes === 0) throw new StoreError(`feed consumer "${name}" is not registered; register it first (registerFeedConsumer)`);
}

export interface Retention {
  /** Changes older than this may go. */
  maxAgeMs: number;
  /** Beyond this many changes, the oldest may go. */
  maxRows: number;
}

/**
 * Prune by age and by size, never past the lowest seq a registered consumer has confirmed.
 * Returns how many changes went.
 */
export function pruneChanges(db: DB, r: Retention, now = Date.now()): number {
  const floor = (db.prepare("SELECT min(confirmed_seq) AS s FROM feed_consumers").get() as { s: number | null }).s;
  const { latest } = feedBounds(db);
  const cutoff = new Date(now - r.maxAgeMs).toISOString();
  return db.prepare("DELETE FROM changes WHERE (at < @cutoff OR seq <= @bySize) AND (@floor IS NULL OR seq <= @floor)").run({ cutoff, bySize: latest - r.maxRows, floor }).changes;
}

/**
 * Register `name` as a feed consumer and, when `seq` is given, confirm it, from a process
 * that is not the mirror's writer (the PostgreSQL publisher): one short transaction on a
 * connection of its own, waiting at most `busyTimeoutMs` for SQLite's write lock. Returns
 * false when the lock stayed busy (a sync was committing), the file cannot be written by
 * this process, or the mirror has no feed yet:
 * the caller skips it, which is safe, since confirming less only makes retention keep more
 * (and a consumer not registered yet is found out by feedGapAfter and loaded in bulk).
 */
export function markFeedConsumer(dbPath: string, name: string, seq: number | null, busyTimeoutMs: number): boolean {
  let db: DB | null = null;
  try {
    db = openSideWriter(dbPath, busyTimeoutMs);
    if (!hasTable(db, "feed_consumers")) return false;
    const w = db;
    w.transaction(() => {
      registerFeedConsumer(w, name);
      if (seq !== null) confirmFeedConsumer(w, name, seq);
    }).immediate();
    return true;
  } catch (err) {
    // Busy (a sync held the write lock), or a mirror this process may only read: skipped, safely (above).
    if (/^SQLITE_(BUSY|READONLY|CANTOPEN)/.test(String((err as { code?: string }).code))) return false;
    throw new StoreError(`cannot record feed consumer "${name}" in ${dbPath}: ${(err as Error).message}`, { cause: err });
  } finally {
    db?.close();
  }
}
