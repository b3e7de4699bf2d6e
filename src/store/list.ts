/**
 * The list walk's units of work: the locations tree (one response, one unit), each list
 * page with its walk checkpoint, the end of a walk (misses, deletions), the run's snapshot
 * of the list's totals, and the walk's queue of SKUs still to fetch (sku_sync.pending_walk_id).
 *
 * Which listed SKUs are queued is not decided here: `savePage` hands each one's stored
 * state (`PreviousState`) to the caller's decision function (the planner, sync/planner.ts).
 */
import type Database from "better-sqlite3";
import { createHash } from "node:crypto";
import * as cryptoModule from "node:crypto";
import type { DetailResponse, ListItem, ListResponse, LocationNode } from "../core/api-schemas.js";
import type { DB } from "./db.js";
import type { Fields, Outbox } from "./outbox.js";
import type { RunState } from "./runs.js";

/** What the store remembers of a listed SKU, as the planner reads it (sku_sync and its leaves). */
export interface PreviousState {
  list_fingerprint: string | null;
  fetched_walk_id: number | null;
  pending_walk_id: number | null;
  /** The walk that last listed the SKU (null: none yet). */
  listed_walk_id: number | null;
  fail_count: number;
  /** 1 when any stored leaf of the SKU has freshness other than clean. */
  not_clean: number;
}

/**
 * The SKU was listed earlier in this same walk, with another fingerprint: a server whose list order moves with
 * its data (a total) lists a SKU again after a write. Its detail, if fetched after the first listing, may be
 * from before that write, and the fingerprint the second listing leaves would tell the next run nothing changed.
 */
export function movedInWalk(previous: PreviousState | undefined, fingerprint: string, walkId: number): boolean {
  return previous?.listed_walk_id === walkId && previous.list_fingerprint !== fingerprint;
}

/** Why (a reason of the caller's) a listed SKU must be fetched in this walk, or null when the list shows nothing to do. */
export type PlanDecision<R extends string> = (item: ListItem, fingerprint: string, previous: PreviousState | undefined) => R | null;

export interface Queued<R extends string> {
  id: string;
  reason: R;
  /** Listed earlier in this walk with another fingerprint (movedInWalk): a worker holding it now may have its detail from before the change. */
  again: boolean;
}

const iso = () => new Date().toISOString();
const bool = (b: boolean | null) => (b === null ? null : b ? 1 : 0);
const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

/** sha1 of a string as hex: crypto.hash (one call, no Hash object) where Node has it (>= 20.12). */
const oneShot = (cryptoModule as { hash?: (alg: string, data: string, enc: "hex") => string }).hash;
export const sha1Hex: (s: string) => string = oneShot ? (s) => oneShot("sha1", s, "hex") : (s) => createHash("sha1").update(s).digest("hex");

/** What the list shows of a SKU, hashed: a change here means detail/history must be refetched. */
function listFingerprint(item: ListItem): string {
  const sorted = (o: Record<string, unknown>) =>
    Object.keys(o)
      .sort()
      .map((k) => [k, o[k]]);
  return sha1Hex(
    JSON.stringify([
      item.code,
      item.skuCode,
      item.name,
      item.barcode,
      item.unit,
      item.product.id,
      item.product.name,
      item.product.brand,
      sorted(item.options),
      item.totalQuantity,
      sorted(item.locationQuantities),
    ]),
  );
}

/** The columns of a skus row, from a list item or a detail's sku (with the total quantity the response gives). */
export function skuParams(s: DetailResponse["sku"], totalQuantity: number, now: string) {
  return {
    id: s.id,
    code: s.code,
    skuCode: s.skuCode,
    name: s.name,
    barcode: s.barcode,
    unit: s.unit,
    productId: s.product.id,
    productName: s.product.name,
    productBrand: s.product.brand,
    options: JSON.stringify(s.options),
    totalQuantity,
    now,
  };
}

/** The fields of a locations row the feed reports (not our bookkeeping: first/last seen, misses). */
function locationFields(n: LocationNode): Fields {
  return {
    name: n.name,
    code: n.code,
    parent_id: n.parentId,
    parent_name: n.parentName,
    node_kind: n.nodeKind,
    depth: n.depth,
    path_ids: json(n.pathIds),
    path_names: json(n.pathNames),
    display_path: n.displayPath,
    is_leaf: bool(n.isLeaf),
    child_count: n.childCount,
    selectable: bool(n.selectable),
    status: n.status,
    updated_at: n.updatedAt,
    deleted_at: null,
  };
}

/** The fields of a skus row the feed reports, with the list's root quantities (sku_root_quantities). */
function skuFields(item: ListItem): Fields {
  return {
    code: item.code,
    sku_code: item.skuCode,
    name: item.name,
    barcode: item.barcode,
    unit: item.unit,
    product_id: item.product.id,
    product_name: item.product.name,
    product_brand: item.product.brand,
    options: JSON.stringify(item.options),
    total_quantity: item.totalQuantity,
    deleted_at: null,
    root_quantities: sortedObject(item.locationQuantities),
  };
}

const sortedObject = (o: Record<string, number>) =>
  Object.fromEntries(
    Object.keys(o)
      .sort()
      .map((k) => [k, o[k]!]),
  );

/** A stored skus row's fields as `skuFields` gives them (root_quantities: JSON object from SQL). */
function storedSkuFields(row: (Fields & { root_quantities: string | null }) | undefined): Fields | undefined {
  if (!row) return undefined;
  return { ...row, root_quantities: sortedObject(row.root_quantities ? (JSON.parse(row.root_quantities) as Record<string, number>) : {}) };
}

function prepareList(db: DB) {
  const p = (sql: string) => db.prepare(sql);
  return {
    upsertLocation: p(`INSERT INTO locations (id, name, code, parent_id, parent_name, node_kind, depth, path_ids, path_names,
        display_path, is_leaf, child_count, selectable, status, updated_at, first_seen_at, last_seen_at, missed_walks, deleted_at)
      VALUES (@id, @name, @code, @parentId, @parentName, @nodeKind, @depth, @pathIds, @pathNames, @displayPath, @isLeaf,
        @childCount, @selectable, @status, @updatedAt, @now, @now, 0, NULL)
      ON CONFLICT(id) DO UPDATE SET name = excluded.name, code = excluded.code, parent_id = excluded.parent_id,
        parent_name = excluded.parent_name, node_kind = excluded.node_kind, depth = excluded.depth, path_ids = excluded.path_ids,
        path_names = excluded.path_names, display_path = excluded.display_path, is_leaf = excluded.is_leaf,
        child_count = excluded.child_count, selectable = excluded.selectable, status = excluded.status,
        updated_at = excluded.updated_at, last_seen_at = excluded.last_seen_at, missed_walks = 0, deleted_at = NULL`),
    missLocations: p(`UPDATE locations SET missed_walks = missed_walks + 1 WHERE last_seen_at < ? AND deleted_at IS NULL`),
    deleteMissedLocations: p(`UPDATE locations SET deleted_at = ? WHERE deleted_at IS NULL AND missed_walks >= ? RETURNING id`),
    locationsBefore: p(`SELECT id, name, code, parent_id, parent_name, node_kind, depth, path_ids, path_names, display_path, is_leaf,
        child_count, selectable, status, updated_at, deleted_at FROM locations`),
    skuBefore: p(`SELECT code, sku_code, name, barcode, unit, product_id, product_name, product_brand, options, total_quantity, deleted_at,
        (SELECT json_group_object(root_location_id, quantity) FROM sku_root_quantities WHERE sku_id = @id) AS root_quantities
      FROM skus WHERE id = @id`),
    setLocationsSeen: p("UPDATE sync_runs SET locations_seen = ? WHERE id = ?"),

    upsertSku: p(`INSERT INTO skus (id, code, sku_code, name, barcode, unit, product_id, product_name, product_brand, options,
        total_quantity, first_seen_at, last_seen_at, missed_walks, deleted_at)
      VALUES (@id, @code, @skuCode, @name, @barcode, @unit, @productId, @productName, @productBrand, @options,
        @totalQuantity, @now, @now, 0, NULL)
      ON CONFLICT(id) DO UPDATE SET code = excluded.code, sku_code = excluded.sku_code, name = excluded.name,
        barcode = excluded.barcode, unit = excluded.unit, product_id = excluded.product_id, product_name = excluded.product_name,
        product_brand = excluded.product_brand, options = excluded.options, total_quantity = excluded.total_quantity,
        last_seen_at = excluded.last_seen_at, missed_walks = 0, deleted_at = NULL`),
    deleteRootQty: p("DELETE FROM sku_root_quantities WHERE sku_id = ?"),
    insertRootQty: p("INSERT INTO sku_root_quantities (sku_id, root_location_id, quantity) VALUES (?, ?, ?)"),
    getSkuSync: p(`SELECT s.list_fingerprint, s.fetched_walk_id, s.pending_walk_id, s.listed_walk_id, s.fail_count,
        EXISTS (SELECT 1 FROM sku_location_quantities q WHERE q.sku_id = s.sku_id AND q.freshness_status IS NOT 'clean') AS not_clean
      FROM sku_sync s WHERE s.sku_id = ?`),
    upsertSkuSync: p(`INSERT INTO sku_sync (sku_id, list_fingerprint, listed_walk_id, pending_walk_id)
      VALUES (@skuId, @fingerprint, @walkId, @pending)
      ON CONFLICT(sku_id) DO UPDATE SET list_fingerprint = excluded.list_fingerprint, listed_walk_id = excluded.listed_walk_id,
        pending_walk_id = COALESCE(excluded.pending_walk_id, sku_sync.pending_walk_id)`),
    setListCheckpoint: p("UPDATE sync_runs SET list_cursor = ?, list_done = ?, skus_listed = skus_listed + ?, skus_planned = skus_planned + ? WHERE id = ?"),
    addListed: p("UPDATE sync_runs SET skus_listed = skus_listed + ?, skus_planned = skus_planned + ? WHERE id = ?"),
    restartListed: p("UPDATE sync_runs SET skus_listed = 0 WHERE id = ?"),
    listedInWalk: p("SELECT 1 AS listed FROM sku_sync WHERE sku_id = ? AND listed_walk_id = ?"),
    countListedInWalk: p("SELECT count(*) AS n FROM sku_sync WHERE listed_walk_id = ?"),
    setWalkAgain: p("UPDATE sync_runs SET list_walk_again = ? WHERE id = ?"),

    missSkus: p(`UPDATE skus SET missed_walks = missed_walks + 1
      WHERE deleted_at IS NULL AND id IN (SELECT sku_id FROM sku_sync WHERE listed_walk_id IS NOT ? )`),
    deletionSuspects: p(`SELECT k.id FROM skus k JOIN sku_sync s ON s.sku_id = k.id
      WHERE k.deleted_at IS NULL AND s.listed_walk_id IS NOT ? AND k.missed_walks + 1 >= ? ORDER BY k.id`),
    spareSku: p("UPDATE skus SET missed_walks = min(missed_walks, ? - 1) WHERE id = ?"),
    deleteMissedSkus: p(`UPDATE skus SET deleted_at = ? WHERE deleted_at IS NULL AND missed_walks >= ? RETURNING id`),
    unqueueDeleted: p(`UPDATE sku_sync SET pending_walk_id = NULL WHERE sku_id IN (SELECT id FROM skus WHERE deleted_at IS NOT NULL)`),
    // Added to: the SKUs the run's workers found gone (404) before the walk ended are counted there too (SkuWriter.skuVanished).
    addSkusDeleted: p("UPDATE sync_runs SET skus_deleted = skus_deleted + ? WHERE id = ?"),
  };
}

/** Locations, list pages and the end of a walk, on the writer connection. */
export class ListWriter {
  private readonly s;

  constructor(
    private readonly db: DB,
    private readonly outbox: Outbox,
  ) {
    this.s = prepareList(db);
  }

  /** The locations tree is one response, so it is one unit: upsert all, mark the absent. */
  saveLocations(runId: number, nodes: LocationNode[], deleteAfterMisses: number): { seen: number; deleted: number } {
    return this.db.transaction(() => {
      const now = iso();
      const before = new Map((this.s.locationsBefore.all() as Array<Fields & { id: string }>).map(({ id, ...f }) => [id, f as Fields]));
      for (const n of nodes) {
        this.outbox.row(runId, now, "location", n.id, null, before.get(n.id), locationFields(n));
        this.s.upsertLocation.run({
          id: n.id,
          name: n.name,
          code: n.code,
          parentId: n.parentId,
          parentName: n.parentName,
          nodeKind: n.nodeKind,
          depth: n.depth,
          pathIds: json(n.pathIds),
          pathNames: json(n.pathNames),
          displayPath: n.displayPath,
          isLeaf: bool(n.isLeaf),
          childCount: n.childCount,
          selectable: bool(n.selectable),
          status: n.status,
          updatedAt: n.updatedAt,
          now,
        });
      }
      this.s.missLocations.run(now);
      const gone = this.s.deleteMissedLocations.all(now, deleteAfterMisses) as Array<{ id: string }>;
      for (const { id } of gone) this.outbox.row(runId, now, "location", id, null, { deleted_at: null }, { deleted_at: now });
      const deleted = gone.length;
      this.s.setLocationsSeen.run(nodes.length, runId);
      return { seen: nodes.length, deleted };
    })();
  }

  /**
   * One list page, with the walk checkpoint. `decide` says whether (and why) each SKU
   * needs detail + history in this walk; those are queued (sku_sync.pending_walk_id).
   * Returns the queued SKU ids with their reasons.
   */
  savePage<R extends string>(run: RunState, items: ListItem[], nextCursor: string | null, decide: PlanDecision<R>): Array<Queued<R>> {
    return this.db.transaction(() => {
      const queued = this.saveItems(run, items, decide);
      this.s.setListCheckpoint.run(nextCursor, nextCursor === null ? 1 : 0, items.length, queued.length, run.id);
      return queued;
    })();
  }

  /**
   * A page of a walk of the list again (sync/list-walk.ts, walkAgainIfChanged): of its items, those this
   * walk had not listed are saved and planned as any page's; the others were saved when it listed them.
   * The walk's checkpoint stays where the walk ended.
   */
  saveUnlisted<R extends string>(run: RunState, items: ListItem[], decide: PlanDecision<R>): { queued: Array<Queued<R>>; unlisted: number } {
    return this.db.transaction(() => {
      const unlisted = items.filter((item) => !this.s.listedInWalk.get(item.id, run.walkId));
      const queued = this.saveItems(run, unlisted, decide);
      this.s.addListed.run(unlisted.length, queued.length, run.id);
      return { queued, unlisted: unlisted.length };
    })();
  }

  /** The walk restarted from page one (a cursor the server rejected): what it listed before is listed again, not counted twice. */
  listWalkRestarted(runId: number): void {
    this.s.restartListed.run(runId);
  }

  /** SKUs this walk has listed so far (each once, however many times pages listed it). */
  countListedInWalk(walkId: number): number {
    return (this.s.countListedInWalk.get(walkId) as { n: number }).n;
  }

  /** Listed SKUs upserted with their root quantities; `decide` says which are queued in this walk. Inside the caller's transaction. */
  private saveItems<R extends string>(run: RunState, items: ListItem[], decide: PlanDecision<R>): Array<Queued<R>> {
    const now = iso();
    const queued: Array<Queued<R>> = [];
    for (const item of items) {
      this.outbox.row(run.id, now, "sku", item.id, null, storedSkuFields(this.s.skuBefore.get({ id: item.id }) as never), skuFields(item));
      this.s.upsertSku.run(skuParams(item, item.totalQuantity, now));
      this.s.deleteRootQty.run(item.id);
      for (const [rootId, qty] of Object.entries(item.locationQuantities)) this.s.insertRootQty.run(item.id, rootId, qty);
      const fingerprint = listFingerprint(item);
      const previous = this.s.getSkuSync.get(item.id) as PreviousState | undefined;
      const reason = decide(item, fingerprint, previous);
      // Listed again in this walk, and changed since (movedInWalk): its detail may be from before the change. No fingerprint
      // is kept, so the next run fetches it again if this run cannot (stopped before the worker holding it let go).
      const again = movedInWalk(previous, fingerprint, run.walkId);
      if (reason) queued.push({ id: item.id, reason, again });
      const kept = again ? null : fingerprint;
      this.s.upsertSkuSync.run({ skuId: item.id, fingerprint: kept, walkId: run.walkId, pending: reason ? run.walkId : null });
    }
    return queued;
  }

  /**
   * The last page of a walk and the end of the walk, as one unit: a run stopped after it
   * must not leave list_done set with the walk's deletions not applied, since a resumed run
   * skips the list walk. With them, whether the list is to be walked again (`walkAgain`, asked
   * with the SKUs the walk listed), so a resumed run does what a stopped one had left of it.
   */
  saveLastPage<R extends string>(
    run: RunState,
    items: ListItem[],
    decide: PlanDecision<R>,
    deleteAfterMisses: number,
    spared: ReadonlySet<string> = new Set(),
    walkAgain: (listed: number) => boolean = () => false,
  ): { queued: Array<Queued<R>>; deleted: number; walkAgain: boolean } {
    return this.db.transaction(() => {
      const queued = this.savePage(run, items, null, decide);
      const deleted = this.finishListWalk(run, deleteAfterMisses, spared);
      const again = walkAgain(this.countListedInWalk(run.walkId));
      if (again) this.s.setWalkAgain.run(1, run.id);
      return { queued, deleted, walkAgain: again };
    })();
  }

  /** The list's walk again (saveLastPage) is over: a run resumed from here does not walk it once more. */
  walkedAgain(run: RunState): void {
    this.s.setWalkAgain.run(0, run.id);
  }

  /**
   * The SKUs the end of this walk would mark deleted if the last page (`lastPage`, not saved yet)
   * does not list them: not listed by the walk so far, one miss short of `deleteAfterMisses`.
   */
  deletionSuspects(run: RunState, lastPage: readonly ListItem[], deleteAfterMisses: number): string[] {
    const onLastPage = new Set(lastPage.map((i) => i.id));
    return (this.s.deletionSuspects.all(run.walkId, deleteAfterMisses) as Array<{ id: string }>).map((r) => r.id).filter((id) => !onLastPage.has(id));
  }

  /**
   * After a complete list walk: SKUs the walk did not return get one more miss, and
   * those at `deleteAfterMisses` are marked deleted (history and last quantities stay),
   * except `spared` ones (their detail still answered): one miss short of it.
   */
  private finishListWalk(run: RunState, deleteAfterMisses: number, spared: ReadonlySet<string>): number {
    this.s.missSkus.run(run.walkId);
    for (const id of spared) this.s.spareSku.run(deleteAfterMisses, id);
    const now = iso();
    const gone = this.s.deleteMissedSkus.all(now, deleteAfterMisses) as Array<{ id: string }>;
    for (const { id } of gone) this.outbox.row(run.id, now, "sku", id, null, { deleted_at: null }, { deleted_at: now });
    const deleted = gone.length;
    this.s.unqueueDeleted.run();
    this.s.addSkusDeleted.run(deleted, run.id);
    return deleted;
  }
}

// ---- the walk's queue ------------------------------------------------------------------------------

/** What is queued in a walk, and the rotating re-verification that queues more. */
export class WalkQueue {
  private readonly s;

  constructor(db: DB) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      // Stalest first: never fetched, then fetched longest ago (a budget-limited run converges on them).
      // Keyset pages of that order ('' sorts before every timestamp, as NULLS FIRST does).
      pending: p(`SELECT sku_id, coalesce(fetched_at, '') AS at FROM sku_sync
        WHERE pending_walk_id = ? AND (coalesce(fetched_at, ''), sku_id) > (?, ?)
        ORDER BY coalesce(fetched_at, ''), sku_id LIMIT ?`),
      queueStalest: p(`UPDATE sku_sync SET pending_walk_id = @walk WHERE sku_id IN (
          SELECT s.sku_id FROM sku_sync s JOIN skus k ON k.id = s.sku_id
          WHERE k.deleted_at IS NULL AND s.listed_walk_id = @walk AND s.pending_walk_id IS NOT @walk AND s.fetched_walk_id IS NOT @walk
          ORDER BY s.fetched_at ASC NULLS FIRST LIMIT @limit) RETURNING sku_id`),
      countCurrentSkus: p("SELECT count(*) AS n FROM skus WHERE deleted_at IS NULL"),
      countVerifiedBefore: p(`SELECT count(*) AS n FROM sku_sync s JOIN skus k ON k.id = s.sku_id
        WHERE k.deleted_at IS NULL AND (s.fetched_at IS NULL OR s.fetched_at < ?)`),
      countFetchedInWalk: p("SELECT count(*) AS n FROM sku_sync WHERE fetched_walk_id = ?"),
    };
  }

  /**
   * SKUs still queued for this walk (resume), stalest first, read `pageSize` at a time so a
   * resumed walk of a large workspace never holds every queued id at once. Each page is read
   * whole, so the caller may write between two pages.
   */
  *pendingSkus(walkId: number, pageSize = 1_000): Generator<string> {
    let after = { at: "", id: "" };
    for (;;) {
      const rows = this.s.pending.all(walkId, after.at, after.id, pageSize) as Array<{ sku_id: string; at: string }>;
      for (const r of rows) yield r.sku_id;
      if (rows.length < pageSize) return;
      const last = rows[rows.length - 1]!;
      after = { at: last.at, id: last.sku_id };
    }
  }

  /**
   * Rotating re-verification: queue the `limit` SKUs fetched longest ago among those this
   * walk listed (not already queued or fetched in it). SKUs the list stopped returning are
   * left to the missed-walks rule rather than spending a request on them.
   */
  queueStalest(walkId: number, limit: number): string[] {
    if (limit <= 0) return [];
    return (this.s.queueStalest.all({ walk: walkId, limit }) as Array<{ sku_id: string }>).map((r) => r.sku_id);
  }

  /** Current SKUs whose detail and history were last stored before `isoTime` (or never). */
  countVerifiedBefore(isoTime: string): number {
    return (this.s.countVerifiedBefore.get(isoTime) as { n: number }).n;
  }

  countCurrentSkus(): number {
    return (this.s.countCurrentSkus.get() as { n: number }).n;
  }

  /** SKUs already stored in this walk (a resumed run counts them as done). */
  countFetchedInWalk(walkId: number): number {
    return (this.s.countFetchedInWalk.get(walkId) as { n: number }).n;
  }
}

// ---- snapshots -------------------------------------------------------------------------------------

/*
 * inventory_snapshots: per sync run, the list response's root summaries (`locations[]`)
 * and overall `summary`, so totals can be charted over time. `locations` and `summary`
 * are not paged (they cover the whole filtered result), so any one list page of a run
 * carries them; the sync stores the first page's.
 */

const snapshotStatements = new WeakMap<DB, { clear: Database.Statement; insert: Database.Statement }>();

function preparedSnapshot(db: DB) {
  let s = snapshotStatements.get(db);
  if (!s) {
    s = {
      clear: db.prepare("DELETE FROM inventory_snapshots WHERE run_id = ?"),
      insert: db.prepare(`INSERT INTO inventory_snapshots (run_id, taken_at, root_id, name, code, child_count, leaf_location_ids,
          sku_count, total_quantity, average_quantity_per_sku)
        VALUES (@runId, @takenAt, @rootId, @name, @code, @childCount, @leafLocationIds, @skuCount, @totalQuantity, @average)`),
    };
    snapshotStatements.set(db, s);
  }
  return s;
}

/**
 * Store the snapshot of run `runId`, in one transaction: one row per root summary and one
 * overall row (root_id NULL) when the response had a summary. Calling it again for the same
 * run replaces that run's snapshot.
 */
export function saveSnapshot(db: DB, runId: number, roots: ListResponse["locations"], summary: ListResponse["summary"], takenAt: string = new Date().toISOString()): void {
  const s = preparedSnapshot(db);
  db.transaction(() => {
    s.clear.run(runId);
    for (const r of roots) {
      s.insert.run({
        runId,
        takenAt,
        rootId: r.id,
        name: r.name,
        code: r.code,
        childCount: r.childCount,
        leafLocationIds: r.leafLocationIds === null ? null : JSON.stringify(r.leafLocationIds),
        skuCount: r.skuCount,
        totalQuantity: r.totalQuantity,
        average: r.averageQuantityPerSku,
      });
    }
    if (summary) {
      s.insert.run({
        runId,
        takenAt,
        rootId: null,
        name: null,
        code: null,
        childCount: null,
        leafLocationIds: null,
        skuCount: summary.skuCount,
        totalQuantity: summary.totalQuantity,
        average: summary.averageQuantityPerSku,
      });
    }
  })();
}
