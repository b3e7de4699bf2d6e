/**
 * History rows the server rewrites in place, met by an incremental `sync` (the real CLI against
 * the simulator). The document makes a SET's `quantity` its delta against the projection just
 * before it, so a row that lands late before a SET rewrites that SET: the same row, a new delta.
 * The incremental walk stops at stored rows, but every row after the oldest one it returned is
 * the server's as it is now: the version stored before is not the server's any more and goes
 * (store/sku.ts walkedAfter). Before, both versions stayed until a re-verification or a full sync
 * (a second clean-room server found it: the mirror held the truth plus the old SET).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import type { GroundTruthSku } from "../../src/simulator/types.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";

const KEY = "sim_e2e_rewritten_5a4b3c2d1e0f9a8b7c6d";
/** The CLI's history page (DEFAULTS.historyPageSize): a history longer than this is walked in several pages. */
const PAGE = 100;
let sim: RunningSimulator;
let dir: string;
let db: string;

beforeAll(async () => {
  // Histories of about 140 rows: some fit one page, most take two.
  sim = await startSimulator({ seed: 23, skus: 40, historyDepth: 140, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-rewritten-"));
  db = join(dir, "rewritten.db");
  const full = await sync(["--full"]);
  expect(full.code, full.stderr).toBe(0);
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

function sync(args: string[] = []) {
  return runCli(["sync", ...args], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
}

/** The CLI's debug line for one SKU's unit of work (sku-work.ts "SKU saved"). */
function savedLine(stderr: string, skuId: string): Record<string, unknown> | undefined {
  for (const line of stderr.split("\n")) {
    if (!line.startsWith("{")) continue;
    const o = JSON.parse(line) as Record<string, unknown>;
    if (o.msg === "SKU saved" && o.skuId === skuId) return o;
  }
  return undefined;
}

function historyCount(): number {
  const d = new Database(db, { readonly: true });
  try {
    return (d.prepare("SELECT count(*) AS n FROM history").get() as { n: number }).n;
  } finally {
    d.close();
  }
}

/**
 * A SKU whose newest SET (at a clean leaf) is among its rows `from` to `within` (newest first), with `pages` pages of
 * history (1: all of it on one page; 2: more than one page); that SET and the SKU.
 */
function skuWithRecentSet(pages: 1 | 2, within: number, exclude: string[], from = 0): { sku: GroundTruthSku; set: GroundTruthSku["history"][number] } {
  for (const sku of sim.groundTruth().skus) {
    if (exclude.includes(sku.item.id) || (pages === 1) !== sku.history.length <= PAGE) continue;
    const clean = new Set((sku.detail.locations ?? []).filter((l) => l.freshness?.status === "clean" && l.quantity > 1).map((l) => l.id));
    const set = sku.history.slice(from, within).find((r) => r.kind === "set" && clean.has(r.locationId));
    if (set) return { sku, set };
  }
  throw new Error(`no SKU of ${pages} page(s) with a SET among its newest ${within} rows at a clean leaf`);
}

/** A receipt that lands a second before `set` at its leaf (its delta is rewritten), and a movement on top so the list shows the SKU changed. */
function rewriteSet(sku: GroundTruthSku, set: GroundTruthSku["history"][number]): void {
  const newest = Date.parse(sku.history[0]!.occurredAt);
  sim.model.lateRow(sku.item.id, set.locationId, 2, newest - Date.parse(set.occurredAt) + 1_000);
  sim.model.movement(sku.item.id, set.locationId, -1);
  const after = sim.groundTruth().skus.find((s) => s.item.id === sku.item.id)!;
  const rewritten = after.history.find((r) => r.kind === "set" && r.occurredAt === set.occurredAt && r.locationId === set.locationId)!;
  // The premise: the SET is the same row with a new delta.
  expect(rewritten.quantity).not.toBe(set.quantity);
  expect(rewritten.observedQuantity).toBe(set.observedQuantity);
}

describe("history rows the server rewrote, met by an incremental sync", () => {
  const done: string[] = [];

  it("a SET rewritten by a late row, on a SKU whose whole history is one page: the old version goes", async () => {
    const { sku, set } = skuWithRecentSet(1, 30, done);
    done.push(sku.item.id);
    rewriteSet(sku, set);
    const r = await sync();
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("a SET rewritten by a late row within the newest page of a longer history: the walk stops there and the old version still goes", async () => {
    const { sku, set } = skuWithRecentSet(2, 40, done);
    done.push(sku.item.id);
    rewriteSet(sku, set);
    const r = await sync(["--log-level", "debug"]);
    expect(r.code, r.stderr).toBe(0);
    // The walk stopped at stored rows: the detail and one history page for that SKU, not all of its pages.
    expect(savedLine(r.stderr, sku.item.id)).toMatchObject({ requests: 2, complete: false });
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("a SET rewritten at the very end of the newest page: the walk goes on a page rather than keep both versions", async () => {
    // The SET at index j: the movement rewriteSet adds and PAGE − 2 − j receipts on top put it at index PAGE − 1, the last row of the first page. The walk
    // cannot tell a stored row at that moment it did not return from one on the next page: it reads the next page.
    const { sku, set } = skuWithRecentSet(2, 90, done, 30);
    done.push(sku.item.id);
    const j = sku.history.indexOf(set);
    rewriteSet(sku, set);
    for (let i = 0; i < PAGE - 2 - j; i++) sim.model.movement(sku.item.id, set.locationId, 1);
    const now = sim.groundTruth().skus.find((s) => s.item.id === sku.item.id)!;
    expect(now.history.findIndex((r) => r.kind === "set" && r.occurredAt === set.occurredAt && r.locationId === set.locationId)).toBe(PAGE - 1);
    const r = await sync(["--log-level", "debug"]);
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    expect(Number(savedLine(r.stderr, sku.item.id)?.requests)).toBeGreaterThan(2);
  });

  it("a rerun adds no row and removes none", async () => {
    const before = historyCount();
    const r = await sync(["--full"]);
    expect(r.code, r.stderr).toBe(0);
    expect(historyCount()).toBe(before);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });
});
