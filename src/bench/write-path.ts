/**
 * Scenario 4, the write path: history rows per second upserted by the store alone (no HTTP),
 * in a process of its own so nothing else shares its heap or its event loop.
 *
 *   node dist/bench/write-path.js --rows 1000000 [--rows-per-sku 100] [--group 16] [--ceiling-rows 100000]
 *
 * The store path, as a backfill runs it: a fresh database opened by the sync's own code
 * (openDatabase, the Store, tuneWriter), the history's BI indexes deferred as runSync does
 * (Store.deferHistoryIndexes), every SKU listed through savePage first, then each SKU saved
 * with Store.saveSku (detail with 3 leaves + its history rows, row identity hashed), `--group`
 * SKUs per COMMIT through the store's group commit (Store.grouped), and the indexes built at the end. Timed:
 * the saveSku calls, their commits and the index build (rowsPerS includes it); not timed:
 * generating the rows and listing the SKUs.
 *
 * Deterministic synthetic rows shaped like the API's (ISO timestamps spread over two years
 * and interleaved across SKUs, 12 leaves, movements with event ids, ~15% SETs), so every
 * index of the history table sees the key distribution of a real backfill.
 *
 * Also measured, for what limits the figure (first --ceiling-rows rows, fresh databases):
 * - the store path with the indexes maintained row by row (an incremental sync's case);
 * - SQLite's own ceiling: the same rows by one prepared positional INSERT in transactions of
 *   1,600 rows (no hashing, no other table; identity and copy ordinal computed beforehand,
 *   untimed), with all of the history's indexes, and with its primary key only
 *   (src/store/bench-writes.ts).
 * Prints one JSON line.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { DetailResponse, HistoryRow, ListItem } from "../core/api-schemas.js";
import { rawHistoryWriter, type RawHistoryRow } from "../store/bench-writes.js";
import { openDatabase, type DB } from "../store/db.js";
import { historyCopies, Store, type RunState } from "../store/store.js";
import { tuneWriter } from "../sync/sync.js";
import { planFull, type Planner } from "../sync/planner.js";
import { mulberry32 } from "../simulator/prng.js";

const { values } = parseArgs({
  options: { rows: { type: "string" }, "rows-per-sku": { type: "string" }, group: { type: "string" }, "ceiling-rows": { type: "string" } },
});
const ROWS = Number(values.rows ?? 1_000_000);
const PER_SKU = Number(values["rows-per-sku"] ?? 100);
const GROUP = Number(values.group ?? 16);
const CEILING_ROWS = Number(values["ceiling-rows"] ?? 100_000);
const SKUS = Math.ceil(ROWS / PER_SKU);

let rnd = mulberry32(20_260_601);
const hex = (n: number) => Array.from({ length: n }, () => Math.floor(rnd() * 16).toString(16)).join("");
const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
const leaves = Array.from({ length: 12 }, (_, i) => ({ id: uuid(), name: `Bin ${i + 1}`, code: `B-${i + 1}`, parentId: uuid() }));
const EPOCH = Date.parse("2025-01-01T00:00:00.000Z");
const YEAR = 365 * 86_400_000;

/** SKU i, the same every time it is asked for (each SKU draws from its own seed), so nothing is held. */
function skuAt(i: number, withHistory = true): { item: ListItem; detail: DetailResponse; history: HistoryRow[] } {
  rnd = mulberry32(1_000_003 * (i + 1));
  const id = uuid();
  const sku = {
    id,
    code: `SKU-${i}`,
    skuCode: `C-${i}`,
    name: `Product ${i} / M`,
    barcode: String(4_000_000_000_000 + i),
    unit: "pcs",
    product: { id: uuid(), name: `Product ${i}`, brand: "Acme" },
    options: { size: "M" },
  };
  const history: HistoryRow[] = [];
  let t = EPOCH + YEAR;
  for (let r = 0; withHistory && r < PER_SKU; r++) {
    t -= Math.floor(rnd() * ((2 * YEAR) / PER_SKU));
    const leaf = leaves[Math.floor(rnd() * leaves.length)]!;
    const set = rnd() < 0.15;
    const qty = 1 + Math.floor(rnd() * 40);
    history.push({
      kind: set ? "set" : "movement",
      occurredAt: new Date(t).toISOString(),
      direction: set ? "none" : rnd() < 0.5 ? "in" : "out",
      quantity: qty,
      locationId: leaf.id,
      locationName: leaf.name,
      locationCode: leaf.code,
      eventId: set ? null : uuid(),
      eventTypeCode: set ? null : "receipt",
      eventTypeName: set ? null : "Receipt",
      setSessionId: set ? uuid() : null,
      setTypeCode: set ? "regular" : null,
      observedQuantity: set ? qty * 2 : null,
      note: rnd() < 0.2 ? "Cycle count" : null,
    } as HistoryRow);
  }
  const locs = [0, 1, 2].map((k) => leaves[(i + k * 5) % leaves.length]!);
  const detail = {
    sku,
    selectedQuantity: 30,
    totalQuantity: 30,
    locations: locs.map((l) => ({
      id: l.id,
      name: l.name,
      code: l.code,
      parentId: l.parentId,
      quantity: 10,
      freshness: { status: "clean", lastReplayedAt: new Date(EPOCH + YEAR).toISOString(), lastSourceKind: "event" },
    })),
  } as DetailResponse;
  const item = { ...sku, totalQuantity: 30, locationQuantities: { [locs[0]!.parentId]: 30 } } as ListItem;
  return { item, detail, history };
}

type Generated = ReturnType<typeof skuAt>;
type Timed = { rows: number; ms: number; rowsPerS: number };

/** A fresh mirror database opened and tuned by the sync's own code, its workspace bound and a full run started. */
function freshStore(path: string): { db: DB; store: Store; run: RunState } {
  const db = openDatabase(path);
  tuneWriter(db, 64 * 1024 * 1024);
  const store = new Store(db);
  store.bindWorkspace({ workspace: { id: "bench", name: "bench" }, scope: "read" });
  return { db, store, run: store.startRun("full") };
}

/** Lists SKUs 0 … skus − 1 through savePage, 100 per page, as the list walk does. */
function listSkus(store: Store, run: RunState, skus: number, planner: () => Planner): void {
  for (let p = 0; p < skus; p += 100) {
    const page = Array.from({ length: Math.min(100, skus - p) }, (_, k) => skuAt(p + k, false).item);
    store.savePage(run, page, p + 100 < skus ? `c${p}` : null, planner().reason);
  }
}

/** Saves one group of SKUs through the store's group commit (one COMMIT for the group); returns the rows added. */
async function saveGroup(store: Store, run: RunState, batch: Generated[]): Promise<number> {
  const saved = batch.map((g) => store.grouped(() => store.saveSku(run, g.item.id, g.detail, g.history, true)));
  return (await Promise.all(saved)).reduce((n, s) => n + s.rowsAdded, 0);
}

/** The store path as a backfill runs it, the history's BI indexes deferred and built at the end (timed). */
async function storePath(dir: string) {
  const { db, store, run } = freshStore(join(dir, "store.db"));
  const planner = planFull(run);
  // As the sync's backfill does (store.ts): the history's BI indexes are built once, at the end, and that build is timed.
  const deferred = store.deferHistoryIndexes(run);
  // Every SKU is listed first (as the list walk does), then saved: only saving is timed.
  listSkus(store, run, SKUS, () => planner);
  let rows = 0;
  let storeMs = 0;
  let msAtCeiling: number | null = null;
  for (let i = 0; i < SKUS; i += GROUP) {
    const batch = Array.from({ length: Math.min(GROUP, SKUS - i) }, (_, k) => skuAt(i + k));
    const t = performance.now();
    rows += await saveGroup(store, run, batch);
    storeMs += performance.now() - t;
    if (msAtCeiling === null && rows >= CEILING_ROWS) msAtCeiling = storeMs;
  }
  const tIdx = performance.now();
  store.restoreHistoryIndexes();
  const indexBuildMs = performance.now() - tIdx;
  db.close();
  return { rows, deferred, storeMs, msAtCeiling, indexBuildMs };
}

/** The store path with the indexes maintained row by row (an incremental sync's case), first CEILING_ROWS rows. */
async function storePathIndexesMaintained(dir: string): Promise<Timed> {
  const { db, store, run } = freshStore(join(dir, "maintained.db"));
  const skus = Math.ceil(CEILING_ROWS / PER_SKU);
  listSkus(store, run, skus, () => planFull(run));
  let n = 0;
  let ms = 0;
  for (let i = 0; i < skus; i += GROUP) {
    const batch = Array.from({ length: Math.min(GROUP, skus - i) }, (_, k) => skuAt(i + k));
    const t = performance.now();
    n += await saveGroup(store, run, batch);
    ms += performance.now() - t;
  }
  db.close();
  return { rows: n, ms, rowsPerS: (n * 1000) / ms };
}

/** SQLite's ceiling for the same rows and schema: one positional INSERT, no hashing, nothing else (1,600 rows per transaction). */
function sqliteCeiling(dir: string, withIndexes: boolean): Timed {
  const d = openDatabase(join(dir, withIndexes ? "raw.db" : "raw-pk.db"));
  tuneWriter(d, 64 * 1024 * 1024);
  const writer = rawHistoryWriter(d, { withIndexes });
  const flat: RawHistoryRow[] = [];
  for (let i = 0; flat.length < CEILING_ROWS && i < SKUS; i++) {
    const g = skuAt(i);
    const keys = historyCopies(g.history);
    for (const [k, row] of g.history.entries()) {
      flat.push({ skuId: g.item.id, rowKey: keys[k]!.rowKey, dupIndex: keys[k]!.dupIndex, row });
      if (flat.length >= CEILING_ROWS) break;
    }
  }
  const t = performance.now();
  for (let i = 0; i < flat.length; i += 1_600) writer.insertBatch(flat.slice(i, i + 1_600));
  const ms = performance.now() - t;
  d.close();
  return { rows: flat.length, ms, rowsPerS: (flat.length * 1000) / ms };
}

const dir = mkdtempSync(join(tmpdir(), "im-bench-write-"));
try {
  const store = await storePath(dir);
  const maintained = await storePathIndexesMaintained(dir);
  const raw = sqliteCeiling(dir, true);
  const rawPk = sqliteCeiling(dir, false);
  process.stdout.write(
    JSON.stringify({
      rows: store.rows,
      skus: SKUS,
      rowsPerSku: PER_SKU,
      group: GROUP,
      deferredIndexes: store.deferred,
      saveMs: store.storeMs,
      indexBuildMs: store.indexBuildMs,
      rowsPerS: (store.rows * 1000) / (store.storeMs + store.indexBuildMs),
      firstRows: CEILING_ROWS,
      /** Save rate over the first CEILING_ROWS rows (without the index build), to set beside the ceilings below. */
      firstRowsSavePerS: store.msAtCeiling ? (CEILING_ROWS * 1000) / store.msAtCeiling : null,
      storeIndexesMaintained: maintained,
      rawAllIndexes: raw,
      rawPrimaryKeyOnly: rawPk,
    }) + "\n",
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
