/**
 * The naive baseline of scenario 3: what a first, straightforward mirror looks like.
 * One request at a time (Node's global fetch, default keep-alive), JSON.parse with no
 * validation, and every row written with its own INSERT OR REPLACE outside any
 * transaction (so each row is its own commit). Same API, same simulator, same rows as
 * the mirror stores (SKU, root quantities, leaf quantities, history by row identity).
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
import Database from "better-sqlite3";
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { db: { type: "string" }, seconds: { type: "string" }, wal: { type: "boolean" } } });
const base = process.env.INVENTORY_BASE_URL!.replace(/\/+$/, "");
const key = process.env.INVENTORY_API_KEY!;
const budgetMs = Number(values.seconds ?? 15) * 1000;

const db = new Database(values.db!);
if (values.wal) {
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
}
db.exec(`
  CREATE TABLE IF NOT EXISTS locations (id TEXT PRIMARY KEY, json TEXT);
  CREATE TABLE IF NOT EXISTS skus (id TEXT PRIMARY KEY, code TEXT, sku_code TEXT, name TEXT, barcode TEXT, unit TEXT,
    product_id TEXT, product_name TEXT, product_brand TEXT, options TEXT, total_quantity REAL);
  CREATE TABLE IF NOT EXISTS sku_root_quantities (sku_id TEXT, root_id TEXT, quantity REAL, PRIMARY KEY (sku_id, root_id));
  CREATE TABLE IF NOT EXISTS sku_location_quantities (sku_id TEXT, location_id TEXT, quantity REAL, freshness_status TEXT,
    last_replayed_at TEXT, last_source_kind TEXT, PRIMARY KEY (sku_id, location_id));
  CREATE TABLE IF NOT EXISTS history (sku_id TEXT, row_key TEXT, kind TEXT, occurred_at TEXT, direction TEXT, quantity REAL,
    location_id TEXT, location_name TEXT, location_code TEXT, event_id TEXT, event_type_code TEXT, event_type_name TEXT,
    set_session_id TEXT, set_type_code TEXT, observed_quantity REAL, note TEXT, PRIMARY KEY (sku_id, row_key));
`);
const insLocation = db.prepare("INSERT OR REPLACE INTO locations VALUES (?, ?)");
const insSku = db.prepare("INSERT OR REPLACE INTO skus VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
const insRoot = db.prepare("INSERT OR REPLACE INTO sku_root_quantities VALUES (?, ?, ?)");
const insLeaf = db.prepare("INSERT OR REPLACE INTO sku_location_quantities VALUES (?, ?, ?, ?, ?, ?)");
const insRow = db.prepare(`INSERT OR REPLACE INTO history VALUES (${Array(16).fill("?").join(", ")})`);

let requests = 0;
let rows = 0;
async function get(path: string): Promise<any> {
  requests++;
  const res = await fetch(base + path, { headers: { accept: "application/json", authorization: `Bearer ${key}` } });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}
const run = (stmt: Database.Statement, ...params: unknown[]) => {
  stmt.run(...params);
  rows++;
};

const t0 = performance.now();
let skus = 0;
await get("/v1/external/workspace");
for (const l of (await get("/v1/external/locations")).locations) run(insLocation, l.id, JSON.stringify(l));
let cursor: string | null = null;
walk: for (;;) {
  const page: any = await get(`/v1/external/inventory-status?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
  for (const it of page.items) {
    run(insSku, it.id, it.code, it.skuCode, it.name, it.barcode, it.unit, it.product?.id, it.product?.name, it.product?.brand, JSON.stringify(it.options ?? {}), it.totalQuantity);
    for (const [root, q] of Object.entries(it.locationQuantities ?? {})) run(insRoot, it.id, root, q);
  }
  for (const it of page.items) {
    const d = await get(`/v1/external/inventory-status/${it.id}`);
    for (const l of d.locations) run(insLeaf, it.id, l.id, l.quantity, l.freshness?.status, l.freshness?.lastReplayedAt, l.freshness?.lastSourceKind);
    let hc: string | null = null;
    do {
      const h: any = await get(`/v1/external/inventory-status/${it.id}/history?limit=100${hc ? `&cursor=${encodeURIComponent(hc)}` : ""}`);
      for (const r of h.items) {
        const fields = [r.kind, r.occurredAt, r.direction, r.quantity, r.locationId, r.locationName, r.locationCode, r.eventId, r.eventTypeCode, r.eventTypeName, r.setSessionId, r.setTypeCode, r.observedQuantity, r.note];
        const rowKey = createHash("sha1").update(JSON.stringify(fields)).digest("hex");
        run(insRow, it.id, rowKey, ...fields.map((v) => (v === undefined ? null : v)));
      }
      hc = h.page?.nextCursor || null;
    } while (hc);
    skus++;
    if (performance.now() - t0 >= budgetMs) break walk;
  }
  cursor = page.page?.nextCursor || null;
  if (!cursor) break;
}
const elapsedMs = performance.now() - t0;
db.close();
process.stdout.write(JSON.stringify({ skus, requests, rows, elapsedMs, journal: values.wal ? "wal/normal" : "delete/full" }) + "\n");
