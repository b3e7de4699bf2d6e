/**
 * "A database BI tools can trust", done-when: the simulator's workspace synced with the
 * real CLI (twice, with churn in between, so there are two runs to chart), then every view
 * and every documented query (src/analysis/queries.ts, shown verbatim in docs/schema.md)
 * checked against answers computed from the simulator's own state; `stock --at` at three
 * past moments; a clean `reconcile`; and a deliberately corrupted row that `reconcile`
 * reports exactly, in text and JSON.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { ListResponse } from "../../src/core/api-schemas.js";
import { startSimulator, TIMELINE_END, type GroundTruth, type RunningSimulator } from "../../src/simulator/index.js";
import { DOCUMENTED_QUERIES, documentedQuery } from "../../src/analysis/queries.js";
import type { ReconcileReport } from "../../src/analysis/reconcile.js";
import type { StockAtResult } from "../../src/analysis/stock-at.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";
import { balanceAt, simRows, snapshotOfLatestRun, sortBy, syncFull, truthMaps, type SimRow } from "./helpers.js";

const KEY = "sim_analysis_3f9a2c7e5b1d4086a2c4e6f8";
const DAY = 86_400_000;
let sim: RunningSimulator;
let dir: string;
let dbPath: string;
let db: Database.Database;
let truth: GroundTruth;
let T: ReturnType<typeof truthMaps>;
let rows: Map<string, Map<string, SimRow[]>>;
const snapshots: Array<{ runId: number; page: ListResponse; writtenBySync: boolean }> = [];
let startedAt: string;
/** Three past moments: long ago, recent with a millisecond part, and exactly at a SET row. */
let moments: number[];

beforeAll(async () => {
  startedAt = new Date().toISOString();
  sim = await startSimulator({ seed: 23, skus: 300, historyDepth: 20, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-analysis-"));
  dbPath = join(dir, "bi.db");
  await syncFull(sim, dbPath);
  snapshots.push(await snapshotOfLatestRun(sim, dbPath));
  const churn = sim.model.randomChurn(0.2, 5);
  expect(churn.removed.length + churn.lateRows + churn.dirtied).toBeGreaterThan(0);
  await syncFull(sim, dbPath);
  snapshots.push(await snapshotOfLatestRun(sim, dbPath));
  truth = sim.groundTruth();
  T = truthMaps(truth);
  rows = simRows(sim);
  db = new Database(dbPath, { readonly: true });
  const richest = [...rows.values()].flatMap((m) => [...m.values()]).sort((a, b) => b.length - a.length)[0]!;
  const midSet = richest.filter((r) => r.kind === "set")[Math.floor(richest.filter((r) => r.kind === "set").length / 2)]!;
  moments = [TIMELINE_END - 200 * DAY, TIMELINE_END - 45 * DAY + 123, midSet.t];
});
afterAll(async () => {
  db?.close();
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

type Row = Record<string, unknown>;
const run = (id: string, params: Record<string, unknown>) => db.prepare(documentedQuery(id).sql).all(params) as Row[];
const current = () => truth.skus.map((s) => s.item.id);
const leafRows = (skuId: string) =>
  (T.skus.get(skuId)!.detail.locations ?? []).map((l) => ({
    id: l.id,
    quantity: l.quantity,
    status: (l.freshness?.status ?? null) as string | null,
    replayedAt: l.freshness?.lastReplayedAt ?? null,
  }));
const item = (skuId: string) => T.skus.get(skuId)!.item;
const roots = () => truth.locations.filter((l) => l.depth === 0);
const sections = () => truth.locations.filter((l) => l.depth === 1);
const activeLeaves = () => truth.locations.filter((l) => l.isLeaf && l.status === "active");
const notClean = (s: string | null) => (s === "clean" ? 0 : 1);

/** Per SKU × node (root or section): sum, leaf count and non-clean leaves of its leaf rows. */
function aggregate(skuId: string, nodeOf: (leafId: string) => string | null) {
  const out = new Map<string, { quantity: number; leaf_count: number; leaves_not_reflected: number }>();
  for (const l of leafRows(skuId)) {
    const node = nodeOf(l.id);
    if (node === null) continue;
    const a = out.get(node) ?? { quantity: 0, leaf_count: 0, leaves_not_reflected: 0 };
    a.quantity += l.quantity;
    a.leaf_count++;
    a.leaves_not_reflected += notClean(l.status);
    out.set(node, a);
  }
  return out;
}

/** Every documented query's check; the test below insists there is one for each. */
const CHECKS: Record<string, () => void> = {
  "sku-by-leaf": () => {
    for (const id of current()) {
      const want = sortBy(
        leafRows(id),
        (l) => T.locations.get(l.id)?.displayPath,
        (l) => l.id,
      ).map((l) => ({
        location_id: l.id,
        display_path: T.locations.get(l.id)!.displayPath,
        quantity: l.quantity,
        freshness_status: l.status,
        scan_not_reflected: notClean(l.status),
      }));
      expect(run("sku-by-leaf", { sku_id: id }), id).toEqual(want);
    }
  },
  "sku-by-root": () => {
    for (const id of current()) {
      const want = sortBy(
        [...aggregate(id, T.rootOf)],
        ([r]) => T.locations.get(r)!.name,
        ([r]) => r,
      ).map(([r, a]) => ({
        root_id: r,
        root_name: T.locations.get(r)!.name,
        ...a,
      }));
      // The list's per-root quantities say the same.
      for (const w of want) expect(w.quantity).toBe(item(id).locationQuantities![w.root_id]);
      expect(run("sku-by-root", { sku_id: id }), id).toEqual(want);
    }
  },
  "sku-by-section": () => {
    for (const id of current()) {
      const want = sortBy(
        [...aggregate(id, T.sectionOf)],
        ([s]) => T.locations.get(s)!.displayPath,
        ([s]) => s,
      ).map(([s, a]) => ({
        section_id: s,
        section_display_path: T.locations.get(s)!.displayPath,
        ...a,
      }));
      expect(run("sku-by-section", { sku_id: id }), id).toEqual(want);
    }
  },
  "leaf-contents": () => {
    for (const leaf of activeLeaves()) {
      const want = current().flatMap((id) =>
        leafRows(id)
          .filter((l) => l.id === leaf.id && l.quantity !== 0)
          .map((l) => ({
            sku_id: id,
            sku_code: item(id).code,
            sku_name: item(id).name,
            quantity: l.quantity,
            freshness_status: l.status,
          })),
      );
      expect(run("leaf-contents", { location_id: leaf.id }), leaf.id).toEqual(
        sortBy(
          want,
          (r) => r.sku_code,
          (r) => r.sku_id,
        ),
      );
    }
  },
  "root-contents": () =>
    contents(
      "root-contents",
      "root_id",
      roots().map((r) => r.id),
      T.rootOf,
    ),
  "section-contents": () =>
    contents(
      "section-contents",
      "section_id",
      sections().map((s) => s.id),
      T.sectionOf,
    ),
  "root-totals": () => {
    const want = roots().map((r) => {
      const per = current()
        .map((id) => aggregate(id, T.rootOf).get(r.id))
        .filter((a) => a !== undefined);
      return { root_id: r.id, root_name: r.name, quantity: per.reduce((n, a) => n + a.quantity, 0), skus: per.length };
    });
    expect(run("root-totals", {})).toEqual(
      sortBy(
        want,
        (r) => r.root_name,
        (r) => r.root_id,
      ),
    );
    // And so does the list's root summary of the last run.
    for (const s of snapshots.at(-1)!.page.locations) {
      expect(want.find((w) => w.root_id === s.id)).toMatchObject({ quantity: s.totalQuantity, skus: s.skuCount });
    }
  },
  "not-reflected": () => {
    const got = run("not-reflected", {});
    const want = current().flatMap((id) =>
      leafRows(id)
        .filter((l) => l.status !== "clean")
        .map((l) => ({
          sku_id: id,
          sku_code: item(id).code,
          location_id: l.id,
          display_path: T.locations.get(l.id)!.displayPath,
          quantity: l.quantity,
          freshness_status: l.status,
          last_replayed_at: l.replayedAt,
          rows_after_replay: (rows.get(id)!.get(l.id) ?? []).filter((r) => l.replayedAt === null || r.t > Date.parse(l.replayedAt)).length,
        })),
    );
    expect(want.length).toBeGreaterThan(3);
    const key = (r: Row) => `${r.sku_id} ${r.location_id}`;
    expect(
      sortBy(
        got.map(({ not_clean_since: _a, seconds_not_clean: _b, ...r }) => r),
        key,
      ),
    ).toEqual(sortBy(want, key));
    for (const r of got) {
      expect((r.not_clean_since as string) >= startedAt && (r.not_clean_since as string) <= new Date().toISOString()).toBe(true);
      expect(r.seconds_not_clean).toBeGreaterThanOrEqual(0);
    }
    expect(got.map((r) => r.not_clean_since as string)).toEqual(
      got
        .map((r) => r.not_clean_since as string)
        .slice()
        .sort(),
    );
    // rows_after_replay is the simulator's own count of unreflected rows (where no row shares the last replay's instant).
    let compared = 0;
    for (const w of want) {
      const leafRowsAt = rows.get(w.sku_id)!.get(w.location_id) ?? [];
      if (w.last_replayed_at && leafRowsAt.filter((r) => r.occurredAt === w.last_replayed_at).length > 1) continue;
      expect(w.rows_after_replay, `${w.sku_id} ${w.location_id}`).toBe(T.skus.get(w.sku_id)!.unreflected[w.location_id]);
      compared++;
    }
    expect(compared).toBeGreaterThan(3);
  },
  "sku-timeline": () => {
    for (const id of current()) {
      const want = [...rows.get(id)!.entries()]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .flatMap(([leafId, list]) => {
          let balance = 0;
          return list.map((r, i) => {
            const before = balance;
            balance = r.kind === "set" ? r.amount : balance + r.delta;
            return {
              location_id: leafId,
              seq: i + 1,
              occurred_at: r.occurredAt,
              kind: r.kind,
              delta: r.delta,
              observed_quantity: r.kind === "set" ? r.amount : null,
              balance_before: before,
              running_balance: balance,
            };
          });
        });
      expect(run("sku-timeline", { sku_id: id }), id).toEqual(want);
      // The latest running balance is the simulator's true balance at every leaf.
      for (const [leafId] of rows.get(id)!) {
        const last = want.filter((w) => w.location_id === leafId).at(-1)!;
        expect(last.running_balance).toBe(sim.model.balance(id, leafId));
      }
    }
  },
  "sku-stock-as-of": () => {
    for (const at of moments) {
      for (const id of current()) {
        const want = [...rows.get(id)!.entries()].map(([leafId, list]) => ({ location_id: leafId, quantity: balanceAt(list, at) })).filter((r) => r.quantity !== 0);
        expect(run("sku-stock-as-of", { sku_id: id, at: new Date(at).toISOString() }), `${id} at ${new Date(at).toISOString()}`).toEqual(sortBy(want, (r) => r.location_id));
      }
    }
  },
  "totals-over-time": () => {
    const got = run("totals-over-time", {});
    expect(got.map((r) => ({ run_id: r.run_id, sku_count: r.sku_count, total_quantity: r.total_quantity }))).toEqual(
      snapshots.map((s) => ({ run_id: s.runId, sku_count: s.page.summary!.skuCount, total_quantity: s.page.summary!.totalQuantity })),
    );
    expect(got[0]!.total_quantity).not.toBe(got[1]!.total_quantity);
  },
  "root-over-time": () => {
    for (const r of roots()) {
      const got = run("root-over-time", { root_id: r.id });
      expect(got.map((g) => ({ run_id: g.run_id, sku_count: g.sku_count, total_quantity: g.total_quantity }))).toEqual(
        snapshots.map((s) => {
          const root = s.page.locations.find((l) => l.id === r.id)!;
          return { run_id: s.runId, sku_count: root.skuCount, total_quantity: root.totalQuantity };
        }),
      );
    }
  },
  search: () => {
    const sample = truth.skus[7]!.item;
    const terms = [
      sample.product!.name!.split(" ")[1]!, // a word of a product name
      sample.barcode!.slice(3, 10), // the middle of a barcode
      sample.code!.slice(-4), // the tail of a code: "0012"
      sample.skuCode!.slice(0, 7).toLowerCase(), // a custom-code prefix, in lower case
      sample.product!.brand!.toUpperCase(), // a brand, in upper case
      `${sample.name!.split(" ")[0]} ${sample.name!.split(" ")[1]}`, // two words of a name: one phrase
    ];
    for (const term of terms) {
      const t = term.toLowerCase();
      const want = truth.skus
        .map((s) => s.item)
        .filter((i) => [i.name, i.code, i.skuCode, i.barcode, i.product?.name, i.product?.brand].some((f) => (f ?? "").toLowerCase().includes(t)))
        .map((i) => i.id)
        .sort();
      expect(want.length, term).toBeGreaterThan(0);
      expect(
        run("search", { text: term })
          .map((r) => r.id as string)
          .sort(),
        term,
      ).toEqual(want);
    }
    // A removed SKU stays in the table (deleted_at set) but is not found.
    const removed = db.prepare("SELECT code FROM skus WHERE deleted_at IS NOT NULL LIMIT 1").get() as { code: string } | undefined;
    if (removed) expect(run("search", { text: removed.code })).toEqual([]);
  },
  "find-by-code": () => {
    for (const s of truth.skus.slice(0, 30)) {
      for (const code of [s.item.code, s.item.skuCode, s.item.barcode]) {
        const want = truth.skus.filter((o) => [o.item.code, o.item.skuCode, o.item.barcode].includes(code)).map((o) => o.item.id);
        expect(run("find-by-code", { code }).map((r) => r.id)).toEqual(want.sort());
      }
    }
  },
  "top-movers": () => {
    const from = TIMELINE_END - 90 * DAY;
    const to = TIMELINE_END - 10 * DAY;
    const per = current()
      .map((id) => {
        const moves = [...rows.get(id)!.values()].flat().filter((r) => r.kind === "movement" && r.t >= from && r.t < to);
        return {
          sku_id: id,
          sku_code: item(id).code,
          sku_name: item(id).name,
          movements: moves.length,
          units_moved: moves.reduce((n, r) => n + r.amount, 0),
          net_change: moves.reduce((n, r) => n + r.delta, 0),
        };
      })
      .filter((r) => r.movements > 0);
    const want = sortBy(
      per,
      (r) => -r.units_moved,
      (r) => r.sku_code,
      (r) => r.sku_id,
    ).slice(0, 10);
    expect(want).toHaveLength(10);
    expect(run("top-movers", { from: new Date(from).toISOString(), to: new Date(to).toISOString() })).toEqual(want);
  },
};

function contents(id: string, param: string, nodes: string[], nodeOf: (leafId: string) => string | null) {
  for (const node of nodes) {
    const want = current()
      .map((sku) => ({ sku, a: aggregate(sku, nodeOf).get(node) }))
      .filter((x) => x.a !== undefined && x.a.quantity !== 0)
      .map(({ sku, a }) => ({ sku_id: sku, sku_code: item(sku).code, sku_name: item(sku).name, quantity: a!.quantity, leaves_not_reflected: a!.leaves_not_reflected }));
    expect(want.length).toBeGreaterThan(0);
    expect(run(id, { [param]: node }), node).toEqual(
      sortBy(
        want,
        (r) => -r.quantity,
        (r) => r.sku_code,
        (r) => r.sku_id,
      ),
    );
  }
}

describe("the mirror as BI tools read it", () => {
  it("holds the simulator's workspace (precondition), with deleted SKUs, non-clean leaves and SETs in it", () => {
    expect(diffAgainstTruth(dbPath, truth)).toEqual([]);
    expect((db.prepare("SELECT count(*) AS n FROM skus WHERE deleted_at IS NOT NULL").get() as { n: number }).n).toBeGreaterThan(0);
    expect(truth.skus.some((s) => Object.values(s.unreflected).some((n) => n > 0))).toBe(true);
    expect(snapshots.map((s) => s.runId)).toEqual([1, 2]);
  });

  it("every documented query is in docs/schema.md verbatim and has a check here", () => {
    const doc = readFileSync(new URL("../../docs/schema.md", import.meta.url), "utf8");
    for (const q of DOCUMENTED_QUERIES) {
      expect(doc, q.id).toContain(q.sql);
      expect(CHECKS[q.id], q.id).toBeTypeOf("function");
    }
    expect(Object.keys(CHECKS).sort()).toEqual(DOCUMENTED_QUERIES.map((q) => q.id).sort());
  });

  for (const q of DOCUMENTED_QUERIES) {
    it(`documented query ${q.id}: ${q.question}`, () => CHECKS[q.id]!());
  }

  it("view stock_by_location: every current SKU × leaf with names, root and section", () => {
    const got = db.prepare("SELECT * FROM stock_by_location").all() as Row[];
    const want = current().flatMap((id) =>
      leafRows(id).map((l) => ({
        sku_id: id,
        location_id: l.id,
        display_path: T.locations.get(l.id)!.displayPath,
        quantity: l.quantity,
        freshness_status: l.status,
        scan_not_reflected: notClean(l.status),
        sku_code: item(id).code,
        sku_name: item(id).name,
        location_name: T.locations.get(l.id)!.name,
        location_code: T.locations.get(l.id)!.code,
        root_id: T.rootOf(l.id),
        section_id: T.sectionOf(l.id),
      })),
    );
    const key = (r: Row) => `${r.sku_id} ${r.location_id}`;
    expect(
      sortBy(
        got.map(({ fetched_at: _f, ...r }) => r),
        key,
      ),
    ).toEqual(sortBy(want, key));
  });

  it("views stock_by_root and stock_by_section: whole tables, from leaf rows only", () => {
    for (const [view, nodeOf, idCol] of [
      ["stock_by_root", T.rootOf, "root_id"],
      ["stock_by_section", T.sectionOf, "section_id"],
    ] as const) {
      const got = db.prepare(`SELECT sku_id, ${idCol} AS node, quantity, leaf_count, leaves_not_reflected, sku_code, unit FROM ${view}`).all() as Row[];
      const want = current().flatMap((id) => [...aggregate(id, nodeOf)].map(([node, a]) => ({ sku_id: id, node, ...a, sku_code: item(id).code, unit: item(id).unit })));
      const key = (r: Row) => `${r.sku_id} ${r.node}`;
      expect(sortBy(got, key), view).toEqual(sortBy(want, key));
    }
    // Names and display paths come from the locations tree.
    const r = db.prepare("SELECT root_name, root_code, root_display_path FROM stock_by_root WHERE root_id = ? LIMIT 1").get(roots()[0]!.id);
    expect(r).toEqual({ root_name: roots()[0]!.name, root_code: roots()[0]!.code, root_display_path: roots()[0]!.displayPath });
    const s = db.prepare("SELECT section_name, section_code, root_id, root_name FROM stock_by_section WHERE section_id = ? LIMIT 1").get(sections()[0]!.id);
    expect(s).toEqual({ section_name: sections()[0]!.name, section_code: sections()[0]!.code, root_id: sections()[0]!.parentId, root_name: sections()[0]!.parentName });
  });

  it("view history_timeline: the SET rows show both the delta and the observed count, and the balance reconciles", () => {
    const sets = db.prepare("SELECT * FROM history_timeline WHERE kind = 'set' LIMIT 50").all() as Row[];
    expect(sets.length).toBe(50);
    for (const r of sets) {
      expect(r.running_balance).toBe(r.observed_quantity);
      expect(r.delta).toBe((r.observed_quantity as number) - (r.balance_before as number));
    }
    const latest = db
      .prepare(`SELECT t.sku_id, t.location_id, t.running_balance, q.quantity, q.freshness_status FROM history_timeline t
      JOIN sku_location_quantities q ON q.sku_id = t.sku_id AND q.location_id = t.location_id JOIN skus s ON s.id = t.sku_id AND s.deleted_at IS NULL
      WHERE t.is_latest`)
      .all() as Row[];
    expect(latest.length).toBeGreaterThan(300);
    for (const r of latest) if (r.freshness_status === "clean") expect(r.running_balance, `${r.sku_id} ${r.location_id}`).toBe(r.quantity);
  });

  it("table inventory_snapshots: each run's list root summaries and overall summary", () => {
    for (const s of snapshots) {
      const got = db.prepare("SELECT * FROM inventory_snapshots WHERE run_id = ? ORDER BY root_id IS NULL, root_id").all(s.runId) as Row[];
      const want = [
        ...sortBy(s.page.locations, (l) => l.id).map((l) => ({
          run_id: s.runId,
          root_id: l.id,
          name: l.name,
          code: l.code,
          child_count: l.childCount,
          leaf_location_ids: JSON.stringify(l.leafLocationIds),
          sku_count: l.skuCount,
          total_quantity: l.totalQuantity,
          average_quantity_per_sku: l.averageQuantityPerSku,
        })),
        {
          run_id: s.runId,
          root_id: null,
          name: null,
          code: null,
          child_count: null,
          leaf_location_ids: null,
          sku_count: s.page.summary!.skuCount,
          total_quantity: s.page.summary!.totalQuantity,
          average_quantity_per_sku: s.page.summary!.averageQuantityPerSku,
        },
      ];
      expect(got.map(({ taken_at: _t, ...r }) => r)).toEqual(want);
    }
  });

  it("table location_ancestors: the tree from pathIds", () => {
    const got = db.prepare("SELECT location_id, ancestor_id, ancestor_depth FROM location_ancestors ORDER BY location_id, ancestor_depth").all();
    const want = sortBy(
      truth.locations.flatMap((l) => l.pathIds!.map((a, i) => ({ location_id: l.id, ancestor_id: a, ancestor_depth: i }))),
      (r) => r.location_id,
      (r) => r.ancestor_depth,
    );
    expect(got).toEqual(want);
  });

  it("stock --at reconstructs every SKU × leaf at three past moments", async () => {
    for (const at of moments) {
      const r = await runCli(["stock", "--at", new Date(at).toISOString(), "--json"], { env: { INVENTORY_DB: dbPath } });
      expect(r.code, r.stderr).toBe(0);
      const got = JSON.parse(r.stdout) as StockAtResult;
      const want = current().flatMap((id) => [...rows.get(id)!.entries()].map(([leafId, list]) => ({ skuId: id, locationId: leafId, quantity: balanceAt(list, at) })).filter((x) => x.quantity !== 0));
      const key = (x: { skuId: string; locationId: string }) => `${x.skuId} ${x.locationId}`;
      expect(want.length).toBeGreaterThan(100);
      expect(
        sortBy(
          got.leaves.map((l) => ({ skuId: l.skuId, locationId: l.locationId, quantity: l.quantity })),
          key,
        ),
        new Date(at).toISOString(),
      ).toEqual(sortBy(want, key));
      expect(got.total).toBe(want.reduce((n, x) => n + x.quantity, 0));
      expect(got.at).toBe(new Date(at).toISOString());
    }
  });

  it("stock --at --location sums the leaves under a root, a section or a leaf; --sku narrows to one SKU; text output", async () => {
    const nodes = [roots()[1]!.id, sections()[2]!.id, activeLeaves()[4]!.id];
    for (const [i, node] of nodes.entries()) {
      const at = moments[i]!;
      const r = await runCli(["stock", "--at", new Date(at).toISOString(), "--location", node, "--json"], { env: { INVENTORY_DB: dbPath } });
      expect(r.code, r.stderr).toBe(0);
      const got = JSON.parse(r.stdout) as StockAtResult;
      const under = (leafId: string) => T.locations.get(leafId)?.pathIds?.includes(node) ?? false;
      const want = current()
        .map((id) => ({ skuId: id, quantity: [...rows.get(id)!.entries()].filter(([leafId]) => under(leafId)).reduce((n, [, list]) => n + balanceAt(list, at), 0) }))
        .filter((x) => x.quantity !== 0);
      expect(want.length).toBeGreaterThan(0);
      expect(
        sortBy(
          got.skus.map((s) => ({ skuId: s.skuId, quantity: s.quantity })),
          (s) => s.skuId,
        ),
      ).toEqual(sortBy(want, (s) => s.skuId));
      expect(got.location?.id).toBe(node);
    }
    const dirty = current().find((id) => leafRows(id).some((l) => l.status !== "clean"))!;
    const at = moments[1]!;
    const one = await runCli(["stock", "--at", new Date(at).toISOString(), "--sku", dirty, "--json"], { env: { INVENTORY_DB: dbPath } });
    const got = JSON.parse(one.stdout) as StockAtResult;
    expect(got.leaves.every((l) => l.skuId === dirty)).toBe(true);
    expect(got.total).toBe([...rows.get(dirty)!.values()].reduce((n, list) => n + balanceAt(list, at), 0));
    const text = await runCli(["stock", "--at", new Date(at).toISOString().slice(0, 10), "--location", roots()[0]!.id], { env: { INVENTORY_DB: dbPath } });
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`stock as of ${new Date(at).toISOString().slice(0, 10)}T00:00:00.000Z in ${roots()[0]!.displayPath}`);
    // A UUID is the same whatever its case: the root's id typed in upper case names the same location.
    const upper = await runCli(["stock", "--at", new Date(at).toISOString().slice(0, 10), "--location", roots()[0]!.id.toUpperCase()], { env: { INVENTORY_DB: dbPath } });
    expect(upper.code).toBe(0);
    expect(upper.stdout).toBe(text.stdout);
    const bad = await runCli(["stock", "--at", "yesterday"], { env: { INVENTORY_DB: dbPath } });
    expect(bad.code).toBe(2);
    const unknown = await runCli(["stock", "--at", "2026-01-01", "--location", "00000000-0000-4000-8000-000000000000"], { env: { INVENTORY_DB: dbPath } });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no current location");
  });

  it("reconcile is clean: exit 0; the non-clean leaves that lag their history are reported as explained by freshness", async () => {
    const text = await runCli(["reconcile"], { env: { INVENTORY_DB: dbPath } });
    expect(text.code, text.stdout + text.stderr).toBe(0);
    expect(text.stdout).toContain("result: consistent");
    const r = await runCli(["reconcile", "--json"], { env: { INVENTORY_DB: dbPath } });
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as ReconcileReport;
    expect(report.ok).toBe(true);
    expect(report.unexplained).toBe(0);
    expect(report.advisories).toEqual([]);
    const lagging = current().flatMap((id) =>
      leafRows(id)
        .filter((l) => l.quantity !== sim.model.balance(id, l.id))
        .map((l) => ({ skuId: id, locationId: l.id, expected: sim.model.balance(id, l.id), found: l.quantity })),
    );
    expect(lagging.length).toBeGreaterThan(0);
    const key = (x: { skuId: string; locationId: string | null }) => `${x.skuId} ${x.locationId}`;
    expect(
      sortBy(
        report.mismatches.map((m) => ({ skuId: m.skuId, locationId: m.locationId, expected: m.expected, found: m.found })),
        key,
      ),
    ).toEqual(sortBy(lagging, key));
    for (const m of report.mismatches) expect(m).toMatchObject({ check: "leaf_history", explainedByFreshness: true, explained: true });
    expect(report.counts.skus).toBe(truth.skus.length);
  });

  it("a deliberately corrupted leaf quantity: reconcile exits 1 and reports exactly that row (text and JSON)", async () => {
    const copy = join(dir, "corrupt-leaf.db");
    await db.backup(copy);
    const victim = current().flatMap((id) =>
      leafRows(id)
        .filter((l) => l.status === "clean" && l.quantity > 0)
        .map((l) => ({ id, l })),
    )[17]!;
    const w = new Database(copy);
    expect(w.prepare("UPDATE sku_location_quantities SET quantity = quantity + 7 WHERE sku_id = ? AND location_id = ?").run(victim.id, victim.l.id).changes).toBe(1);
    w.close();
    const r = await runCli(["reconcile", "--json"], { env: { INVENTORY_DB: copy } });
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as ReconcileReport;
    const unexplained = report.mismatches.filter((m) => !m.explained);
    expect(unexplained).toEqual([
      expect.objectContaining({
        check: "leaf_history",
        skuId: victim.id,
        locationId: victim.l.id,
        expected: victim.l.quantity,
        found: victim.l.quantity + 7,
        difference: 7,
        explainedByFreshness: false,
        alsoDisagrees: ["root_sum", "sku_total"],
        freshnessStatus: "clean",
      }),
    ]);
    expect(report.advisories).toEqual([]);
    expect(report.ok).toBe(false);
    const text = await runCli(["reconcile"], { env: { INVENTORY_DB: copy } });
    expect(text.code).toBe(1);
    expect(text.stdout).toContain("1 mismatch(es):");
    expect(text.stdout).toContain(
      `(${victim.id}) at ${T.locations.get(victim.l.id)!.displayPath} (${victim.l.id}): history replay says ${victim.l.quantity}, mirrored quantity is ${victim.l.quantity + 7}`,
    );
    expect(text.stdout).toContain("result: 1 unexplained mismatch(es)");
  });

  it("a deliberately corrupted history row: reconcile reports exactly that SKU × leaf", async () => {
    const copy = join(dir, "corrupt-history.db");
    await db.backup(copy);
    const w = new Database(copy);
    // The newest row of a clean leaf, a movement (so no later SET hides the change).
    const target = w
      .prepare(`SELECT t.sku_id, t.location_id, t.history_rowid, t.delta, q.quantity FROM history_timeline t
      JOIN sku_location_quantities q ON q.sku_id = t.sku_id AND q.location_id = t.location_id AND q.freshness_status = 'clean'
      JOIN skus s ON s.id = t.sku_id AND s.deleted_at IS NULL
      WHERE t.is_latest AND t.kind = 'movement' AND t.direction = 'in' ORDER BY t.sku_id LIMIT 1 OFFSET 5`)
      .get() as Row;
    w.prepare("UPDATE history SET quantity = quantity + 2 WHERE rowid = ?").run(target.history_rowid);
    w.close();
    const r = await runCli(["reconcile", "--json"], { env: { INVENTORY_DB: copy } });
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as ReconcileReport;
    expect(report.mismatches.filter((m) => !m.explained)).toEqual([
      expect.objectContaining({
        check: "leaf_history",
        skuId: target.sku_id,
        locationId: target.location_id,
        expected: (target.quantity as number) + 2,
        found: target.quantity,
        difference: -2,
        alsoDisagrees: [],
      }),
    ]);
  });

  it("list quantities newer than the leaf rows: a mismatch while the SKU's fetch is queued, explained as such; unexplained otherwise", async () => {
    const copy = join(dir, "pending.db");
    await db.backup(copy);
    const id = current()[11]!;
    const root = Object.keys(item(id).locationQuantities!)[0]!;
    const w = new Database(copy);
    w.prepare("UPDATE skus SET total_quantity = total_quantity + 5 WHERE id = ?").run(id);
    w.prepare("UPDATE sku_root_quantities SET quantity = quantity + 5 WHERE sku_id = ? AND root_location_id = ?").run(id, root);
    w.close();
    const stale = await runCli(["reconcile", "--json"], { env: { INVENTORY_DB: copy } });
    expect(stale.code).toBe(1);
    const r1 = JSON.parse(stale.stdout) as ReconcileReport;
    expect(r1.mismatches.filter((m) => !m.explained).map((m) => [m.check, m.skuId, m.locationId, m.difference])).toEqual([
      ["root_sum", id, root, -5],
      ["sku_total", id, null, -5],
    ]);
    const w2 = new Database(copy);
    w2.prepare("UPDATE sku_sync SET pending_walk_id = 99 WHERE sku_id = ?").run(id);
    w2.close();
    const queued = await runCli(["reconcile", "--json"], { env: { INVENTORY_DB: copy } });
    expect(queued.code).toBe(0);
    const r2 = JSON.parse(queued.stdout) as ReconcileReport;
    expect(r2.mismatches.filter((m) => m.explainedByPendingFetch).map((m) => m.check)).toEqual(["root_sum", "sku_total"]);
  });
});
