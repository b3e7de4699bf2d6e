/**
 * One SKU's unit of work: its detail (per-leaf quantities and freshness) and its complete
 * (or, incrementally, newest) history in one transaction, with the checkpoint that says it
 * is done in this walk; or its failure, or its disappearance. Also what the sync reads of
 * one SKU's stored history (is a row stored, the rows a replay needs, does a detail match).
 */
import type { DetailResponse, HistoryRow } from "../core/api-schemas.js";
import { scanNotReflected } from "../core/api-schemas.js";
import { redactSecrets } from "../core/secret.js";
import type { DB } from "./db.js";
import { sha1Hex, skuParams } from "./list.js";
import type { Fields, Outbox } from "./outbox.js";
import type { JournalEntry, RunState } from "./runs.js";

const iso = () => new Date().toISOString();

/**
 * A history row's fields in one fixed order: the order its row key hashes and the history
 * table's columns after (sku_id, row_key, dup_index) follow. A key the server left out is null.
 */
export function historyValues(r: HistoryRow): unknown[] {
  const v = [
    r.kind,
    r.occurredAt,
    r.direction,
    r.quantity,
    r.locationId,
    r.locationName,
    r.locationCode,
    r.eventId,
    r.eventTypeCode,
    r.eventTypeName,
    r.setSessionId,
    r.setTypeCode,
    r.observedQuantity,
    r.note,
  ];
  return v.map((x) => x ?? null);
}

/**
 * The hash of a history row's content: every field, in historyValues' order. Rows equal in
 * every field share it; the copy's ordinal (dup_index, historyCopies) tells them apart.
 */
export function historyRowKey(r: HistoryRow): string {
  return sha1Hex(JSON.stringify(historyValues(r)));
}

/** A history row's identity in the store: its content hash and which copy of that content it is. */
export interface HistoryCopyKey {
  rowKey: string;
  /** 0 for the first row (in the order given) with this content, 1 for the second identical one, ... */
  dupIndex: number;
}

/**
 * The identity of each row of a fetch, in the server's order: identical rows are copies
 * 0, 1, 2... A fetch that sees the same copies again maps them to the same identities, so
 * storing it again adds nothing; one that sees one more copy than is stored adds that one.
 * Identical rows share occurredAt, so all copies of a row sit in one run of ties: a newest
 * first walk that went past that occurredAt has seen every copy the server holds.
 */
export function historyCopies(rows: readonly HistoryRow[]): HistoryCopyKey[] {
  const seen = new Map<string, number>();
  return rows.map((r) => {
    const rowKey = historyRowKey(r);
    const dupIndex = seen.get(rowKey) ?? 0;
    seen.set(rowKey, dupIndex + 1);
    return { rowKey, dupIndex };
  });
}

/** One string per stored identity (sets of identities). */
export const copyId = (k: HistoryCopyKey): string => `${k.rowKey}#${k.dupIndex}`;

/**
 * A newest-first walk that stopped early (an incremental sync's) saw every row the server holds
 * after its oldest row's moment: rows tied at that moment may go on past its last page, none
 * after it can. So a stored row after that moment that the walk did not return is no longer the
 * server's as stored: rewritten (a SET's delta changes when a late row lands before it; a renamed
 * leaf's rows carry the new name) or withdrawn. The moment is epoch ms (rows within one
 * millisecond count as tied); null when the walk returned no row or a time that does not parse.
 */
export function walkedAfter(newestFirst: readonly HistoryRow[]): WalkedAfter | null {
  let oldest: { ms: number; occurredAt: string } | null = null;
  for (const r of newestFirst) {
    const ms = Date.parse(r.occurredAt);
    if (Number.isNaN(ms)) return null;
    if (oldest === null || ms < oldest.ms) oldest = { ms, occurredAt: r.occurredAt };
  }
  return oldest === null ? null : { ...oldest, covers: (occurredAt) => Date.parse(occurredAt) > oldest.ms };
}

/** walkedAfter's moment; `covers(t)`: a row at `t` is after it (a stored one the walk did not return is superseded). */
export interface WalkedAfter {
  ms: number;
  occurredAt: string;
  covers(occurredAt: string): boolean;
}

/** As much of a history row as a replay of the SKU's quantities needs (sync/history-check.ts). */
export interface ReplayableRow {
  kind: string;
  occurredAt: string;
  direction: string | null;
  quantity: number;
  observedQuantity: number | null;
  locationId: string;
}

/** A stored history row for a replay, with its identity. */
export interface StoredReplayRow extends ReplayableRow, HistoryCopyKey {}

export interface SkuSaved {
  rowsAdded: number;
  rowsRemoved: number;
  notClean: DetailResponse["locations"];
}

type Journal = (runId: number, e: JournalEntry) => void;

type StoredKey = { row_key: string; dup_index: number };

/** A history row's fields as the feed reports them: the history table's columns but sku_id. */
function historyFields(k: HistoryCopyKey, r: HistoryRow, runId: number): Fields {
  return {
    row_key: k.rowKey,
    dup_index: k.dupIndex,
    kind: r.kind,
    occurred_at: r.occurredAt,
    direction: r.direction,
    quantity: r.quantity,
    location_id: r.locationId,
    location_name: r.locationName,
    location_code: r.locationCode,
    event_id: r.eventId,
    event_type_code: r.eventTypeCode,
    event_type_name: r.eventTypeName,
    set_session_id: r.setSessionId,
    set_type_code: r.setTypeCode,
    observed_quantity: r.observedQuantity,
    note: r.note,
    first_seen_run_id: runId,
  };
}

function prepareSku(db: DB) {
  const p = (sql: string) => db.prepare(sql);
  return {
    // Only when something differs: the list page usually wrote the same values moments ago, and
    // rewriting an unchanged row still rewrites its page and the entries of its three indexes.
    updateSkuFromDetail: p(`UPDATE skus SET code = @code, sku_code = @skuCode, name = @name, barcode = @barcode, unit = @unit,
        product_id = @productId, product_name = @productName, product_brand = @productBrand, options = @options,
        total_quantity = @totalQuantity, deleted_at = NULL
      WHERE id = @id AND (code IS NOT @code OR sku_code IS NOT @skuCode OR name IS NOT @name OR barcode IS NOT @barcode
        OR unit IS NOT @unit OR product_id IS NOT @productId OR product_name IS NOT @productName
        OR product_brand IS NOT @productBrand OR options IS NOT @options OR total_quantity IS NOT @totalQuantity
        OR deleted_at IS NOT NULL)`),
    getLocQty: p(`SELECT location_id, quantity, freshness_status, freshness_last_replayed_at, freshness_last_source_kind, location_name,
        location_code, parent_id, not_clean_since FROM sku_location_quantities WHERE sku_id = ?`),
    skuBefore: p(`SELECT code, sku_code, name, barcode, unit, product_id, product_name, product_brand, options, total_quantity, deleted_at
      FROM skus WHERE id = ?`),
    deleteLocQty: p("DELETE FROM sku_location_quantities WHERE sku_id = ? AND location_id = ?"),
    upsertLocQty: p(`INSERT INTO sku_location_quantities (sku_id, location_id, quantity, freshness_status, freshness_last_replayed_at,
        freshness_last_source_kind, location_name, location_code, parent_id, fetched_at, not_clean_since)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT(sku_id, location_id) DO UPDATE SET quantity = excluded.quantity, freshness_status = excluded.freshness_status,
        freshness_last_replayed_at = excluded.freshness_last_replayed_at, freshness_last_source_kind = excluded.freshness_last_source_kind,
        location_name = excluded.location_name, location_code = excluded.location_code, parent_id = excluded.parent_id,
        fetched_at = excluded.fetched_at, not_clean_since = excluded.not_clean_since`),
    // Positional parameters on the hot path: binding an object by name costs a lookup per column.
    insertHistory: p(`INSERT OR IGNORE INTO history (sku_id, row_key, dup_index, kind, occurred_at, direction, quantity, location_id,
        location_name, location_code, event_id, event_type_code, event_type_name, set_session_id, set_type_code,
        observed_quantity, note, first_seen_run_id)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    countHistory: p("SELECT count(*) AS n FROM history WHERE sku_id = ?"),
    historyKeys: p("SELECT row_key, dup_index FROM history WHERE sku_id = ?"),
    // Text order is time order for the document's one timestamp form; a stored time in another form may be missed here (kept).
    historyKeysFrom: p("SELECT row_key, dup_index, occurred_at FROM history WHERE sku_id = ? AND occurred_at >= ?"),
    deleteHistoryRow: p("DELETE FROM history WHERE sku_id = ? AND row_key = ? AND dup_index = ? RETURNING *"),
    skuFetched: p(`UPDATE sku_sync SET pending_walk_id = NULL, fetched_walk_id = ?, fetched_at = ?, fail_count = 0, last_error = NULL WHERE sku_id = ?`),
    // A re-poll that stored the detail only: done in this walk, but fetched_at (when detail and
    // history were last stored, which re-verification goes by) stays.
    skuDetailPolled: p(`UPDATE sku_sync SET pending_walk_id = NULL, fetched_walk_id = ?, fail_count = 0, last_error = NULL WHERE sku_id = ?`),
    runSkuDone: p("UPDATE sync_runs SET skus_fetched = skus_fetched + 1, history_rows_added = history_rows_added + ? WHERE id = ?"),
    skuFailed: p(`UPDATE sku_sync SET fail_count = fail_count + 1, last_error = ? WHERE sku_id = ?`),
    runSkuFailed: p("UPDATE sync_runs SET skus_failed = skus_failed + 1 WHERE id = ?"),
    skuVanished: p(`UPDATE sku_sync SET pending_walk_id = NULL WHERE sku_id = ?`),
    markSkuDeleted: p(`UPDATE skus SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`),
    countRunDeleted: p("UPDATE sync_runs SET skus_deleted = skus_deleted + 1 WHERE id = ?"),
    storedLeaves: p(`SELECT location_id, quantity, freshness_status, freshness_last_replayed_at FROM sku_location_quantities WHERE sku_id = ?`),
    hasHistory: p("SELECT 1 FROM history WHERE sku_id = ? AND row_key = ? AND dup_index = ?"),
    replayRows: p(`SELECT kind, occurred_at AS occurredAt, direction, quantity, observed_quantity AS observedQuantity,
        location_id AS locationId, row_key AS rowKey, dup_index AS dupIndex FROM history WHERE sku_id = ?
      ORDER BY occurred_at DESC, coalesce(first_seen_run_id, 0) DESC, rowid ASC`),
  };
}

/** One SKU at a time, on the writer connection; `journal` is the run's journal (runs.ts). */
export class SkuWriter {
  private readonly s;

  constructor(
    private readonly db: DB,
    private readonly journal: Journal,
    private readonly outbox: Outbox,
  ) {
    this.s = prepareSku(db);
  }

  /**
   * A SKU's detail and its complete (or, incrementally, newest) history, as one unit.
   * Per-leaf quantities are replaced whole: a leaf the server no longer returns for
   * this SKU is not current any more. History rows are inserted once per identity (content hash + copy ordinal).
   */
  saveSku(run: RunState, skuId: string, detail: DetailResponse, history: HistoryRow[], complete = false, opts: { historyWalked?: boolean } = {}): SkuSaved {
    return this.db.transaction((): SkuSaved => {
      const now = iso();
      this.saveSkuRow(run.id, skuId, detail, now);
      const notClean = this.saveLeaves(run.id, skuId, detail, now);
      const { rowsAdded, rowsRemoved } = this.saveHistory(run, skuId, history, complete, now);
      for (const loc of notClean) {
        this.journal(run.id, {
          kind: "freshness",
          skuId,
          locationId: loc.id,
          message: `freshness ${loc.freshness.status ?? "missing"}: the latest scan may not be reflected (last replayed ${loc.freshness.lastReplayedAt ?? "unknown"})`,
        });
      }
      if (opts.historyWalked === false) this.s.skuDetailPolled.run(run.walkId, skuId);
      else this.s.skuFetched.run(run.walkId, now, skuId);
      this.s.runSkuDone.run(rowsAdded, run.id);
      return { rowsAdded, rowsRemoved, notClean };
    })();
  }

  /** The detail's SKU fields, written (and fed) only when something differs from the row the list page left. */
  private saveSkuRow(runId: number, skuId: string, detail: DetailResponse, now: string): void {
    const params = skuParams(detail.sku, detail.totalQuantity, now);
    const before = this.s.skuBefore.get(skuId) as Fields | undefined;
    if (this.s.updateSkuFromDetail.run(params).changes === 0) return;
    const after: Fields = {
      code: params.code,
      sku_code: params.skuCode,
      name: params.name,
      barcode: params.barcode,
      unit: params.unit,
      product_id: params.productId,
      product_name: params.productName,
      product_brand: params.productBrand,
      options: params.options,
      total_quantity: params.totalQuantity,
      deleted_at: null,
    };
    this.outbox.row(runId, now, "sku", skuId, null, before, after);
  }

  /** The detail's leaves replace the stored ones (each changed leaf fed); returns those whose freshness is not clean. */
  private saveLeaves(runId: number, skuId: string, detail: DetailResponse, now: string): DetailResponse["locations"] {
    type Leaf = Fields & { location_id: string; not_clean_since: string | null };
    const before = new Map((this.s.getLocQty.all(skuId) as Leaf[]).map(({ location_id, ...f }) => [location_id, f as Leaf]));
    const notClean: DetailResponse["locations"] = [];
    for (const loc of detail.locations) {
      const dirty = scanNotReflected(loc.freshness.status);
      if (dirty) notClean.push(loc);
      const was = before.get(loc.id);
      const after: Fields = {
        quantity: loc.quantity,
        freshness_status: loc.freshness.status,
        freshness_last_replayed_at: loc.freshness.lastReplayedAt,
        freshness_last_source_kind: loc.freshness.lastSourceKind,
        location_name: loc.name,
        location_code: loc.code,
        parent_id: loc.parentId,
        not_clean_since: dirty ? (was?.not_clean_since ?? now) : null,
      };
      this.outbox.row(runId, now, "leaf_quantity", loc.id, skuId, was, after);
      this.s.upsertLocQty.run(
        skuId,
        loc.id,
        loc.quantity,
        loc.freshness.status,
        loc.freshness.lastReplayedAt,
        loc.freshness.lastSourceKind,
        loc.name,
        loc.code,
        loc.parentId,
        now,
        after.not_clean_since,
      );
      before.delete(loc.id);
    }
    for (const [gone, was] of before) {
      this.s.deleteLocQty.run(skuId, gone);
      this.outbox.removed(runId, now, "leaf_quantity", gone, skuId, was);
    }
    return notClean;
  }

  private saveHistory(run: RunState, skuId: string, history: HistoryRow[], complete: boolean, now: string): { rowsAdded: number; rowsRemoved: number } {
    // Every copy of a row identical to another is stored (history is a multiset): copy n of
    // a content is (row_key, n), counted over this fetch in the server's order.
    const added: Fields[] = [];
    const copies = historyCopies(history);
    const keys = complete ? new Set<string>() : null;
    for (let i = 0; i < history.length; i++) {
      const r = history[i]!;
      const k = copies[i]!;
      keys?.add(copyId(k));
      const inserted = this.s.insertHistory.run(skuId, k.rowKey, k.dupIndex, ...historyValues(r), run.id).changes;
      if (inserted) added.push(historyFields(k, r, run.id));
    }
    const removed = complete ? this.removeUnreturned(skuId, keys!) : this.removeSuperseded(skuId, history, copies);
    this.outbox.history(run.id, now, skuId, added, removed);
    return { rowsAdded: added.length, rowsRemoved: removed.length };
  }

  /**
   * A complete walk is the SKU's whole history as the server has it now: a stored row it
   * no longer returns was rewritten (a SET's delta changes when a late row lands before
   * it) or withdrawn, and goes (so does a copy the server no longer has as many of). The
   * count tells cheaply whether there is any such row.
   */
  private removeUnreturned(skuId: string, returned: Set<string>): Fields[] {
    if ((this.s.countHistory.get(skuId) as { n: number }).n <= returned.size) return [];
    const stored = this.s.historyKeys.all(skuId) as StoredKey[];
    return this.removeHistoryRows(
      skuId,
      stored.filter((k) => !returned.has(copyId({ rowKey: k.row_key, dupIndex: k.dup_index }))),
    );
  }

  /** An incremental walk: the stored rows after the moment it saw everything from (walkedAfter) that it did not return go. */
  private removeSuperseded(skuId: string, history: HistoryRow[], copies: HistoryCopyKey[]): Fields[] {
    const after = walkedAfter(history);
    if (after === null) return [];
    const returned = new Set(copies.map(copyId));
    const stored = this.s.historyKeysFrom.all(skuId, after.occurredAt) as Array<StoredKey & { occurred_at: string }>;
    return this.removeHistoryRows(
      skuId,
      stored.filter((k) => after.covers(k.occurred_at) && !returned.has(copyId({ rowKey: k.row_key, dupIndex: k.dup_index }))),
    );
  }

  private removeHistoryRows(skuId: string, keys: StoredKey[]): Fields[] {
    const removed: Fields[] = [];
    for (const { row_key, dup_index } of keys) {
      const gone = this.s.deleteHistoryRow.get(skuId, row_key, dup_index) as Fields | undefined;
      if (gone) {
        const { sku_id: _sku, ...fields } = gone;
        removed.push(fields);
      }
    }
    return removed;
  }

  /** Detail/history kept failing: journal it; the SKU stays queued for the next run. */
  skuFailed(runId: number, skuId: string, endpoint: string | null, status: number | null, message: string): void {
    this.db.transaction(() => {
      this.s.skuFailed.run(redactSecrets(message), skuId);
      this.s.runSkuFailed.run(runId);
      this.journal(runId, { kind: "sku_failed", skuId, endpoint, status, message });
    })();
  }

  /** The server says the SKU does not exist (404 on detail, or on history then detail): it is gone, not failed. */
  skuVanished(runId: number, skuId: string, via: "detail" | "history" = "detail"): boolean {
    return this.db.transaction(() => {
      const now = iso();
      this.s.skuVanished.run(skuId);
      const marked = this.s.markSkuDeleted.run(now, skuId).changes > 0;
      if (marked) {
        this.outbox.row(runId, now, "sku", skuId, null, { deleted_at: null }, { deleted_at: now });
        this.s.countRunDeleted.run(runId);
      }
      const message = via === "detail" ? "listed, but detail answered 404: marked deleted" : "listed, but its history answered 404 and so did its detail, asked again: marked deleted";
      this.journal(runId, { kind: "sku_vanished", skuId, endpoint: via, status: 404, message });
      return marked;
    })();
  }

  /**
   * The stored history of a SKU, newest first, as much as a replay needs (history-check.ts).
   * Ties on occurred_at: a later run's row is newer, and within one fetch the store inserted
   * rows as the server returned them, newest first (a smaller rowid is newer).
   */
  replayRows(skuId: string): StoredReplayRow[] {
    return this.s.replayRows.all(skuId) as StoredReplayRow[];
  }

  /**
   * Does the detail show exactly the leaves, quantities and freshness (status, last replay)
   * stored for the SKU? Then a re-poll learned nothing that needs its history walked.
   */
  detailMatchesStored(skuId: string, detail: DetailResponse): boolean {
    type Leaf = { location_id: string; quantity: number; freshness_status: string | null; freshness_last_replayed_at: string | null };
    const stored = new Map((this.s.storedLeaves.all(skuId) as Leaf[]).map((r) => [r.location_id, r]));
    const ids = new Set(detail.locations.map((l) => l.id));
    if (ids.size !== stored.size || ids.size !== detail.locations.length) return false;
    return detail.locations.every((l) => {
      const r = stored.get(l.id);
      return !!r && r.quantity === l.quantity && r.freshness_status === l.freshness.status && r.freshness_last_replayed_at === l.freshness.lastReplayedAt;
    });
  }

  /** Is this copy of a history row stored for the SKU? */
  hasHistoryRow(skuId: string, key: HistoryCopyKey): boolean {
    return this.s.hasHistory.get(skuId, key.rowKey, key.dupIndex) !== undefined;
  }
}
