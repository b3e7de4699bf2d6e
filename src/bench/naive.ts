/**
 * The naive baseline of scenario 3: what a first, straightforward mirror looks like.
 * One request at a time (Node's global fetch, default keep-alive), JSON.parse with no
 * validation, and every row written with its own INSERT OR REPLACE outside any
 * transaction (so each row is its own commit). Same API, same simulator, same rows as
 * the mirror stores (SKU, root quantities, leaf quantities, history by row identity: its
 * content hash and, for rows identical in every field, the copy's ordinal, dup_index). Its
 * tables and INSERTs are in src/store/bench-writes.ts (openNaiveMirror).
 *
 *   INVENTORY_BASE_URL=... INVENTORY_API_KEY=... node dist/bench/naive.js --db FILE --seconds 15 [--wal]
 *
 * --wal: the same, on a database in WAL mode with synchronous=NORMAL (the mirror's own
 * durability settings), so the comparison can be split into what the per-row commits cost
 * and what the rest of the design does. Without it: better-sqlite3's defaults (rollback
 * journal, synchronous=FULL), which is what the naive code gets by not choosing.
 *
 * It walks the list from the first page and stops at the end of the SKU in hand once
 * --seconds have passed: a prefix of the workspace, measured as SKUs/s and requests/s.
 * Prints one JSON line.
 */
import { parseArgs } from "node:util";
import { openNaiveMirror, type NaiveMirror } from "../store/bench-writes.js";
import { historyRowKey, historyValues } from "../store/sku.js";

const { values } = parseArgs({ options: { db: { type: "string" }, seconds: { type: "string" }, wal: { type: "boolean" } } });
const base = process.env.INVENTORY_BASE_URL!.replace(/\/+$/, "");
const key = process.env.INVENTORY_API_KEY!;
const budgetMs = Number(values.seconds ?? 15) * 1000;

const db = openNaiveMirror(values.db!, { wal: !!values.wal });

let requests = 0;
async function get(path: string): Promise<any> {
  requests++;
  const res = await fetch(base + path, { headers: { accept: "application/json", authorization: `Bearer ${key}` } });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

/** The SKU's detail (leaf quantities) and every page of its history, each copy of an identical row numbered. */
async function mirrorSku(m: NaiveMirror, id: string): Promise<void> {
  const d = await get(`/v1/external/inventory-status/${id}`);
  for (const l of d.locations) m.leafQuantity([id, l.id, l.quantity, l.freshness?.status, l.freshness?.lastReplayedAt, l.freshness?.lastSourceKind]);
  const copies = new Map<string, number>();
  let hc: string | null = null;
  do {
    const h: any = await get(`/v1/external/inventory-status/${id}/history?limit=100${hc ? `&cursor=${encodeURIComponent(hc)}` : ""}`);
    for (const r of h.items) {
      // The mirror's own row identity (store/sku.ts), so the baseline keeps the same copies.
      const rowKey = historyRowKey(r);
      const dupIndex = copies.get(rowKey) ?? 0;
      copies.set(rowKey, dupIndex + 1);
      m.historyRow(id, rowKey, dupIndex, historyValues(r));
    }
    hc = h.page?.nextCursor || null;
  } while (hc);
}

const t0 = performance.now();
let skus = 0;
await get("/v1/external/workspace");
for (const l of (await get("/v1/external/locations")).locations) db.location(l.id, JSON.stringify(l));
let cursor: string | null = null;
walk: for (;;) {
  const page: any = await get(`/v1/external/inventory-status?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
  for (const it of page.items) {
    db.sku([it.id, it.code, it.skuCode, it.name, it.barcode, it.unit, it.product?.id, it.product?.name, it.product?.brand, JSON.stringify(it.options ?? {}), it.totalQuantity]);
    for (const [root, q] of Object.entries(it.locationQuantities ?? {})) db.rootQuantity(it.id, root, q);
  }
  for (const it of page.items) {
    await mirrorSku(db, it.id);
    skus++;
    if (performance.now() - t0 >= budgetMs) break walk;
  }
  cursor = page.page?.nextCursor || null;
  if (!cursor) break;
}
const elapsedMs = performance.now() - t0;
const rows = db.rowsWritten();
db.close();
process.stdout.write(JSON.stringify({ skus, requests, rows, elapsedMs, journal: values.wal ? "wal/normal" : "delete/full" }) + "\n");
