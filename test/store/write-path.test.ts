/**
 * The store's write-path machinery (issue 6): the group commit and the history indexes a
 * backfill builds once at the end. Both must be invisible in what ends up in the file.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DetailResponse, HistoryRow } from "../../src/core/api-schemas.js";
import { openDatabase, type DB } from "../../src/store/db.js";
import { dumpSchema } from "../../src/store/schema-dump.js";
import { Store, type RunState } from "../../src/store/store.js";

const SCHEMA = readFileSync(new URL("../../schema.sql", import.meta.url), "utf8");
const SKU = "0b6c4a52-7d3e-4f1a-9c2b-1e5d8f7a6b3c";
const LEAF = "6f1e2d3c-4b5a-4678-9abc-def012345678";

const detail = (id = SKU): DetailResponse =>
  ({
    sku: { id, code: "C", skuCode: "S", name: "Tee", barcode: "1", unit: "pcs", product: { id: "p", name: "P", brand: "B" }, options: {} },
    selectedQuantity: 3,
    totalQuantity: 3,
    locations: [{ id: LEAF, name: "Bin", code: "B", parentId: null, quantity: 3, freshness: { status: "clean", lastReplayedAt: null, lastSourceKind: null } }],
  }) as unknown as DetailResponse;
const row = (n: number): HistoryRow =>
  ({
    kind: "movement",
    occurredAt: `2026-01-0${n}T00:00:00.000Z`,
    direction: "in",
    quantity: 1,
    locationId: LEAF,
    locationName: "Bin",
    locationCode: "B",
    eventId: `e${n}`,
    eventTypeCode: "receipt",
    eventTypeName: "Receipt",
    setSessionId: null,
    setTypeCode: null,
    observedQuantity: null,
    note: null,
  }) as HistoryRow;

let dir: string;
let db: DB;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "im-writepath-"));
  db = openDatabase(join(dir, "m.db"));
  store = new Store(db);
  store.bindWorkspace({ workspace: { id: "ws", name: "W" }, scope: "read" });
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const listSku = (run: RunState, id = SKU) => store.savePage(run, [{ ...detail(id).sku, totalQuantity: 3, locationQuantities: {} }] as never, null, () => "new");
const count = (sql: string) => (db.prepare(sql).get() as { n: number }).n;

describe("group commit", () => {
  it("units finished in one turn share one transaction, committed before their promises resolve", async () => {
    const run = store.startRun("full");
    listSku(run);
    const a = store.grouped(() => store.saveSku(run, SKU, detail(), [row(1), row(2)], true));
    expect(db.inTransaction).toBe(true);
    const b = store.grouped(() => store.journal(run.id, { kind: "info", message: "same group" }));
    await Promise.all([a, b]);
    expect(db.inTransaction).toBe(false);
    expect((await a).rowsAdded).toBe(2);
    expect(count("SELECT count(*) AS n FROM history")).toBe(2);
  });

  it("a unit that throws leaves nothing behind and does not take the others down with it", async () => {
    const run = store.startRun("full");
    listSku(run);
    const ok = store.grouped(() => store.saveSku(run, SKU, detail(), [row(1)], true));
    const bad = store.grouped(() =>
      db.transaction(() => {
        store.journal(run.id, { kind: "info", message: "rolled back" });
        throw new Error("boom");
      })(),
    );
    await expect(bad).rejects.toThrow("boom");
    await ok;
    expect(count("SELECT count(*) AS n FROM history")).toBe(1);
    expect(count("SELECT count(*) AS n FROM sync_journal WHERE message = 'rolled back'")).toBe(0);
  });

  it("flushGroup commits at once (before a run finishes or the file closes)", () => {
    const run = store.startRun("full");
    listSku(run);
    void store.grouped(() => store.saveSku(run, SKU, detail(), [row(1)], true));
    store.flushGroup();
    expect(db.inTransaction).toBe(false);
    expect(count("SELECT count(*) AS n FROM history")).toBe(1);
  });
});

describe("history indexes during a backfill", () => {
  const historyIndexes = () => count("SELECT count(*) AS n FROM sqlite_master WHERE type = 'index' AND tbl_name = 'history' AND sql IS NOT NULL");

  it("an empty history: deferred, then rebuilt exactly as the migrations define them", () => {
    const run = store.startRun("full");
    expect(store.deferHistoryIndexes(run)).toBe(true);
    expect(historyIndexes()).toBe(0);
    listSku(run);
    store.saveSku(run, SKU, detail(), [row(1), row(2), row(3)], true);
    expect(store.restoreHistoryIndexes()).toBe(4);
    expect(dumpSchema(db)).toBe(SCHEMA);
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
  });

  it("a history with rows: nothing deferred", () => {
    const run = store.startRun("full");
    listSku(run);
    store.saveSku(run, SKU, detail(), [row(1)], true);
    expect(store.deferHistoryIndexes(store.startRun("full"))).toBe(false);
    expect(historyIndexes()).toBe(4);
  });

  it("a backfill killed midway: its resumed walk keeps them deferred; any other run rebuilds them first", () => {
    const run = store.startRun("full");
    store.deferHistoryIndexes(run);
    listSku(run);
    store.saveSku(run, SKU, detail(), [row(1)], true);
    // (killed here: the indexes are missing, the run is left 'running')
    expect(store.deferHistoryIndexes({ ...run, resumedFrom: run.id })).toBe(true);
    expect(historyIndexes()).toBe(0);
    expect(store.deferHistoryIndexes({ ...run, resumedFrom: null })).toBe(false);
    expect(dumpSchema(db)).toBe(SCHEMA);
  });
});

describe("the end of a list walk", () => {
  const item = (id: string) => ({ ...detail(id).sku, totalQuantity: 3, locationQuantities: {} }) as never;
  const OTHER = "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f";

  it("saveLastPage stores the last page, sets list_done and applies the walk's misses and deletions, as one unit", async () => {
    const first = store.startRun("full");
    store.savePage(first, [item(SKU), item(OTHER)], null, () => "new");
    store.finishRun(first.id, "succeeded");
    const run = store.startRun("full");
    store.savePage(run, [item(SKU)], "c1", () => null);
    // The last page does not list OTHER again: one miss deletes it in a full walk.
    const last = await store.grouped(() => store.saveLastPage(run, [], (_i, _f, prev) => (prev ? "changed" : "new"), 1));
    expect(last).toEqual({ queued: [], deleted: 1, walkAgain: false });
    expect(db.prepare("SELECT list_cursor, list_done, skus_deleted, skus_listed FROM sync_runs WHERE id = ?").get(run.id)).toEqual({
      list_cursor: null,
      list_done: 1,
      skus_deleted: 1,
      skus_listed: 1,
    });
    expect(db.prepare("SELECT id FROM skus WHERE deleted_at IS NOT NULL").all()).toEqual([{ id: OTHER }]);
  });

  it("a SKU a worker found gone before the walk ended counts in the run's skus_deleted beside the walk's own deletions, once", async () => {
    const first = store.startRun("full");
    store.savePage(first, [item(SKU), item(OTHER)], null, () => "new");
    store.finishRun(first.id, "succeeded");
    const run = store.startRun("full");
    store.savePage(run, [item(SKU)], "c1", () => null);
    // SKU answers 404 when its worker comes to it: marked deleted, and counted; a second 404 marks and counts nothing.
    expect(store.skuVanished(run.id, SKU)).toBe(true);
    expect(store.skuVanished(run.id, SKU, "history")).toBe(false);
    const skusDeleted = () => (db.prepare("SELECT skus_deleted AS n FROM sync_runs WHERE id = ?").get(run.id) as { n: number }).n;
    expect(skusDeleted()).toBe(1);
    // The walk's end then misses OTHER and deletes it: added to, not overwritten (before: 1, SKU's deletion lost from the count).
    const last = await store.grouped(() => store.saveLastPage(run, [], () => null, 1));
    expect(last.deleted).toBe(1);
    expect(skusDeleted()).toBe(2);
    expect(db.prepare("SELECT id FROM skus WHERE deleted_at IS NOT NULL ORDER BY id").all()).toEqual([{ id: SKU }, { id: OTHER }]);
  });

  it("a walk of the list again saves and plans only what this walk had not listed, and leaves its checkpoint where the walk ended", async () => {
    const THIRD = "2d3e4f5a-6b7c-4d8e-9fa0-b1c2d3e4f5a6";
    const run = store.startRun("full");
    store.savePage(run, [item(SKU)], "c1", () => "new");
    await store.grouped(() => store.saveLastPage(run, [item(OTHER)], () => "new", 1));
    expect(store.countListedInWalk(run.walkId)).toBe(2);
    const decided: string[] = [];
    const again = store.saveUnlisted(run, [item(SKU), item(THIRD), item(OTHER)], (i) => {
      decided.push((i as { id: string }).id);
      return "new";
    });
    expect(again).toEqual({ queued: [{ id: THIRD, reason: "new", again: false }], unlisted: 1 });
    expect(decided).toEqual([THIRD]);
    expect(store.countListedInWalk(run.walkId)).toBe(3);
    expect(db.prepare("SELECT list_cursor, list_done, skus_listed, skus_planned FROM sync_runs WHERE id = ?").get(run.id)).toEqual({
      list_cursor: null,
      list_done: 1,
      skus_listed: 3,
      skus_planned: 3,
    });
    expect(db.prepare("SELECT pending_walk_id FROM sku_sync WHERE sku_id = ?").get(THIRD)).toEqual({ pending_walk_id: run.walkId });
  });

  it("the decision to walk the list again is stored with the last page, asked with the SKUs the walk listed; a resumed run inherits it until it is done", async () => {
    const run = store.startRun("full");
    store.savePage(run, [item(SKU)], "c1", () => "new");
    const asked: number[] = [];
    const last = await store.grouped(() =>
      store.saveLastPage(
        run,
        [item(OTHER)],
        () => "new",
        1,
        new Set(),
        (listed) => {
          asked.push(listed);
          return true;
        },
      ),
    );
    expect(asked).toEqual([2]);
    expect(last.walkAgain).toBe(true);
    expect(db.prepare("SELECT list_done, list_walk_again FROM sync_runs WHERE id = ?").get(run.id)).toEqual({ list_done: 1, list_walk_again: 1 });
    // (killed here, before the walk again ended)
    const resumed = store.startRun("full");
    expect(resumed).toMatchObject({ resumedFrom: run.id, listDone: true, listWalkAgain: true });
    store.walkedAgain(resumed);
    expect(db.prepare("SELECT list_walk_again FROM sync_runs WHERE id = ?").get(resumed.id)).toEqual({ list_walk_again: 0 });
    // (killed again, after it): the next resumed run has nothing left of it.
    expect(store.startRun("full")).toMatchObject({ listDone: true, listWalkAgain: false });
  });

  it("the decision function sees the store's state of each listed SKU and its reason is what is queued", () => {
    const run = store.startRun("full");
    const seen: unknown[] = [];
    const queued = store.savePage(run, [item(SKU), item(OTHER)], null, (i, fingerprint, prev) => {
      seen.push([(i as { id: string }).id, typeof fingerprint, prev]);
      return (i as { id: string }).id === SKU ? "retried" : null;
    });
    expect(queued).toEqual([{ id: SKU, reason: "retried", again: false }]);
    expect(seen).toEqual([
      [SKU, "string", undefined],
      [OTHER, "string", undefined],
    ]);
    store.saveSku(run, SKU, detail(), [row(1)], true);
    const again: unknown[] = [];
    store.savePage(store.startRun("incremental"), [item(SKU)], null, (_i, _f, prev) => {
      again.push(prev);
      return null;
    });
    expect(again).toEqual([{ list_fingerprint: expect.any(String), fetched_walk_id: run.walkId, pending_walk_id: null, listed_walk_id: run.walkId, fail_count: 0, not_clean: 0 }]);
  });

  it("a SKU listed again in one walk with another fingerprint keeps none, so the next walk plans it, and is queued as listed again (movedInWalk)", () => {
    const run = store.startRun("full");
    const prevs: unknown[] = [];
    const decide = (_i: unknown, _f: string, prev: unknown) => {
      prevs.push(prev);
      return "changed";
    };
    const fingerprint = () => (prevs.at(-1) as { list_fingerprint: string | null }).list_fingerprint;
    store.savePage(run, [item(OTHER), item(SKU)], "c1", decide);
    // OTHER listed again unchanged: its fingerprint stays; SKU listed again changed: none kept.
    expect(store.savePage(run, [item(OTHER)], "c2", decide)).toEqual([{ id: OTHER, reason: "changed", again: false }]);
    expect(fingerprint()).toEqual(expect.any(String));
    expect(store.savePage(run, [{ ...(item(SKU) as object), totalQuantity: 999 } as never], null, decide)).toEqual([{ id: SKU, reason: "changed", again: true }]);
    store.finishRun(run.id, "succeeded");
    store.savePage(store.startRun("incremental"), [{ ...(item(SKU) as object), totalQuantity: 999 } as never], null, decide);
    expect(fingerprint()).toBeNull();
  });
});
