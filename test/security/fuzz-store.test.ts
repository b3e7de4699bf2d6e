/**
 * Never a partial write. For random (mostly valid, sometimes broken) detail and history
 * pages, a SKU is fetched with the real fetcher (sync/walker.ts fetchSku, through the real
 * client and a socket) and saved with the real saver (Store.saveSku) into a temporary
 * mirror that already holds a known good state of that SKU. Afterwards the SKU is either
 * fully written (its row, every leaf quantity of the new detail and none other, every new
 * history row next to the old ones) or exactly as before, byte for byte; and whatever fails
 * fails as an ApiError naming the endpoint.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiClient } from "../../src/client/api-client.js";
import { poolTransport } from "../../src/client/transport.js";
import { RequestScheduler } from "../../src/scheduler/scheduler.js";
import { ApiError } from "../../src/core/errors.js";
import { Secret } from "../../src/core/secret.js";
import type { DetailResponse, HistoryRow } from "../../src/core/api-schemas.js";
import { openDatabase, type DB } from "../../src/store/db.js";
import { copyId, historyCopies, historyRowKey, Store, walkedAfter, type RunState } from "../../src/store/store.js";
import { fetchSku } from "../../src/sync/walker.js";
import { historyRow, mutate, mutation, toText, VALID, type Mutation } from "./arbitraries.js";

const SEED = 4242;
const RUNS = 300;
const KEY = "imk_fuzzstore_1a2b3c4d5e6f7a8b9c0d1e2f";

/** What the server answers, by path and cursor. */
let detailText = "{}";
let historyPages: string[] = [];
let server: Server;
let client: ApiClient;
let dir: string;
let db: DB;
let store: Store;
let run: RunState;

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    let body: string;
    let status = 200;
    if (url.pathname.endsWith("/history")) {
      const cursor = url.searchParams.get("cursor");
      const i = cursor === null ? 0 : Number(cursor.replace(/^p/, ""));
      if (i === -1 || !(i in historyPages)) {
        status = 400;
        body = JSON.stringify({ error: { code: "invalid_cursor", message: "cursor is not valid" } });
      } else body = historyPages[i]!;
    } else body = detailText;
    res.writeHead(status, { "content-type": "application/json" });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  client = new ApiClient({
    baseUrl: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    key: new Secret(KEY),
    scheduler: new RequestScheduler({ concurrency: 1, requestsPerSecond: null, maxRetries: 0, max429Retries: 0, backoffBaseMs: 1, backoffCapMs: 1, minRetryAfterMs: 1, maxWaitMs: 1_000 }),
    http: { connectTimeoutMs: 2_000, responseTimeoutMs: 5_000, maxResponseBytes: 1_000_000, connections: 1 },
    transport: poolTransport,
  });
  dir = mkdtempSync(join(tmpdir(), "im-fuzzstore-"));
  db = openDatabase(join(dir, "mirror.db"));
  store = new Store(db);
  store.bindWorkspace({ workspace: { id: "ws-fuzz", name: "Fuzz" }, scope: "read" });
  run = store.startRun("full");
});
afterAll(async () => {
  await client?.close();
  db?.close();
  server?.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

/** Everything the mirror holds about one SKU, plus the run counters a save moves. */
function snapshot(skuId: string) {
  return {
    sku: db.prepare("SELECT * FROM skus WHERE id = ?").all(skuId),
    leaves: db.prepare("SELECT * FROM sku_location_quantities WHERE sku_id = ? ORDER BY location_id").all(skuId),
    history: db.prepare(`SELECT * FROM history WHERE sku_id = ? ORDER BY row_key${hasDupIndex() ? ", dup_index" : ""}`).all(skuId),
    sync: db.prepare("SELECT * FROM sku_sync WHERE sku_id = ?").all(skuId),
    run: db.prepare("SELECT skus_fetched, history_rows_added FROM sync_runs WHERE id = ?").get(run.id),
  };
}

/** Whether history rows identical in every field are kept apart (dup_index) or stored once: the test follows the schema. */
const hasDupIndex = () => (db.prepare("SELECT name FROM pragma_table_info('history')").all() as Array<{ name: string }>).some((c) => c.name === "dup_index");
const historyId = (h: Row) => (hasDupIndex() ? `${h.row_key}#${h.dup_index}` : String(h.row_key));

/** SQLite stores text as UTF-8: a lone surrogate the server sent comes back as U+FFFD. */
const wellFormed = (s: string | null) => (s === null ? null : s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd"));

type Row = Record<string, unknown>;

let skuSeq = 0;
/** A fresh SKU id per case, so cases never see each other's rows. */
const nextSku = () => `5c0f0000-0000-4000-8000-${(++skuSeq).toString(16).padStart(12, "0")}`;

/** Serve a body set, fetch the SKU through the real client, and return what fetchSku gave or threw. */
async function fetchWith(skuId: string, detail: string, pages: string[]) {
  detailText = detail;
  historyPages = pages;
  try {
    return { ok: true as const, value: await fetchSku(client, skuId, { historyLimit: 100 }, AbortSignal.timeout(10_000)) };
  } catch (err) {
    return { ok: false as const, err };
  }
}

/** A mirror row for the SKU (as the list walk leaves it) and a good detail + history saved over it. */
async function seedBaseline(skuId: string): Promise<void> {
  db.prepare("INSERT INTO skus (id, name, first_seen_at, last_seen_at) VALUES (?, 'baseline', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')").run(skuId);
  db.prepare("INSERT INTO sku_sync (sku_id, list_fingerprint, listed_walk_id, pending_walk_id) VALUES (?, 'f', ?, ?)").run(skuId, run.walkId, run.walkId);
  const detail = {
    sku: { id: skuId, name: "baseline", options: { size: "M" } },
    totalQuantity: 3,
    locations: [
      { id: "aaaaaaaa-0000-4000-8000-000000000001", quantity: 1, freshness: { status: "clean" } },
      { id: "aaaaaaaa-0000-4000-8000-000000000002", quantity: 2, freshness: { status: "dirty" } },
    ],
  };
  const rows = [{ kind: "movement", occurredAt: "2026-01-01T00:00:00.000Z", direction: "in", quantity: 3, locationId: "aaaaaaaa-0000-4000-8000-000000000001" }];
  const f = await fetchWith(skuId, JSON.stringify(detail), [JSON.stringify({ items: rows, page: null })]);
  if (!f.ok) throw f.err;
  store.saveSku(run, skuId, f.value.detail, f.value.history);
}

/** Detail: valid for the SKU, or mutated. History: 1-3 pages chained p1, p2; any page may be mutated, rejected or loop. */
const scenario = fc.record({
  detail: fc.oneof(
    { weight: 3, arbitrary: VALID.detail.map((d) => ({ body: d, muts: [] as Mutation[] })) },
    { weight: 1, arbitrary: fc.record({ body: VALID.detail, muts: fc.array(mutation, { minLength: 1, maxLength: 3 }) }) },
  ),
  pages: fc.array(
    fc.record({
      rows: fc.array(historyRow, { maxLength: 6 }),
      muts: fc.oneof({ weight: 4, arbitrary: fc.constant([] as Mutation[]) }, { weight: 1, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 2 }) }),
      duplicateOfPrevious: fc.boolean(),
    }),
    { minLength: 1, maxLength: 3 },
  ),
  /** How the last page ends: normally, with a cursor the server then rejects, or with a cursor it already gave (a loop). */
  ending: fc.constantFrom("end", "end", "end", "rejected-cursor", "loop"),
});

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

function bodiesFor(skuId: string, s: Scenario): { detail: string; pages: string[] } {
  const detailBody = { ...s.detail.body, sku: { ...(s.detail.body.sku as object), id: skuId } };
  const detail = toText(s.detail.muts.length ? mutate(detailBody, s.detail.muts) : detailBody);
  const pages = s.pages.map((p, i) => {
    const last = i === s.pages.length - 1;
    const next = !last ? `p${i + 1}` : s.ending === "rejected-cursor" ? "p-1" : s.ending === "loop" && i > 0 ? `p${i}` : null;
    const rows = p.duplicateOfPrevious && i > 0 ? s.pages[i - 1]!.rows : p.rows;
    const body = { items: rows, page: { nextCursor: next } };
    return toText(p.muts.length ? mutate(body, p.muts) : body);
  });
  return { detail, pages };
}

describe("a SKU is written whole or not at all", () => {
  it(`${RUNS} random detail + history sets, each over a stored SKU`, async () => {
    const outcomes = { written: 0, refusedByFetch: 0, refusedBySave: 0 };
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const skuId = nextSku();
        await seedBaseline(skuId);
        const before = snapshot(skuId);
        const { detail, pages } = bodiesFor(skuId, s);
        const f = await fetchWith(skuId, detail, pages);

        if (!f.ok) {
          expect(f.err, String(f.err)).toBeInstanceOf(ApiError);
          expect((f.err as ApiError).message).toMatch(/^(detail|history)\b/);
          expect(snapshot(skuId)).toEqual(before);
          outcomes.refusedByFetch++;
          return;
        }

        let saved: { rowsAdded: number };
        try {
          saved = store.saveSku(run, skuId, f.value.detail, f.value.history);
        } catch {
          // The transaction rolled back whole.
          expect(snapshot(skuId)).toEqual(before);
          outcomes.refusedBySave++;
          return;
        }
        outcomes.written++;
        checkWritten(skuId, before, f.value.detail, f.value.history, saved.rowsAdded);
      }),
      { seed: SEED, numRuns: RUNS },
    );
    expect(outcomes.written).toBeGreaterThan(RUNS / 4);
    expect(outcomes.refusedByFetch).toBeGreaterThan(RUNS / 10);
  });
});

function checkWritten(skuId: string, before: ReturnType<typeof snapshot>, detail: DetailResponse, history: HistoryRow[], rowsAdded: number): void {
  const after = snapshot(skuId);

  // The SKU row carries the detail.
  const sku = after.sku[0] as Row;
  expect([sku.name, sku.code, sku.barcode, sku.total_quantity, JSON.parse(sku.options as string)]).toEqual([
    wellFormed(detail.sku.name),
    wellFormed(detail.sku.code),
    wellFormed(detail.sku.barcode),
    detail.totalQuantity,
    JSON.parse(wellFormed(JSON.stringify(detail.sku.options))!),
  ]);

  // Leaf quantities: exactly the new detail's locations (the last entry wins for a repeated id).
  const want = new Map(detail.locations.map((l) => [l.id, l]));
  const leaves = after.leaves as Row[];
  expect(leaves.map((l) => l.location_id).sort()).toEqual([...want.keys()].sort());
  for (const l of leaves) {
    const w = want.get(l.location_id as string)!;
    expect([l.quantity, l.freshness_status]).toEqual([w.quantity, wellFormed(w.freshness.status)]);
  }

  // History: the old rows kept but those after the moment the walk saw everything from that it did not return
  // (walkedAfter: rewritten or withdrawn on the server), and every row of the new history present (once per
  // occurrence when the schema keeps identical rows apart).
  const keysAfter = new Set((after.history as Row[]).map(historyId));
  const returned = new Set(historyCopies(history).map(copyId));
  const after_ = walkedAfter(history);
  const superseded = (h: Row) => after_ !== null && Date.parse(h.occurred_at as string) > after_.ms && !returned.has(historyId(h));
  for (const h of before.history as Row[]) expect(keysAfter.has(historyId(h))).toBe(!superseded(h));
  const removed = (before.history as Row[]).filter(superseded).length;
  const occurrences = new Map<string, number>();
  for (const r of history) {
    const k = historyRowKey(r);
    const n = occurrences.get(k) ?? 0;
    occurrences.set(k, n + 1);
    expect(keysAfter.has(hasDupIndex() ? `${k}#${n}` : k), `history row ${JSON.stringify(r).slice(0, 200)} missing`).toBe(true);
  }
  expect(after.history.length).toBe(before.history.length + rowsAdded - removed);

  // The checkpoint moved with the data, in the same transaction.
  expect((after.sync[0] as Row).pending_walk_id).toBeNull();
  expect((after.sync[0] as Row).fetched_walk_id).toBe(run.walkId);
  const r0 = before.run as Row;
  const r1 = after.run as Row;
  expect([r1.skus_fetched, r1.history_rows_added]).toEqual([(r0.skus_fetched as number) + 1, (r0.history_rows_added as number) + rowsAdded]);
}
