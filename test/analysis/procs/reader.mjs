#!/usr/bin/env node
/**
 * A BI reader in its own process, for the readers-during-writes tests. Opens the mirror
 * read-only with busy_timeout = 0 (any wait on a lock would be an error, so "never
 * blocked" is checked, not assumed) and reads in transactions until a stop file appears.
 *
 *   node reader.mjs '<json options>'
 *   { db, stopFile, mode: "short" | "long", minTxMs, maxTxMs, truth?, latestVersion, holdMs? }
 *
 * short: back-to-back transactions of minTxMs..maxTxMs each (readers coming and going).
 * long:  one transaction opened once the first SKU is stored, re-read every 100 ms, held
 *        until the stop file appears (or holdMs): its snapshot must never change.
 * With `truth` (a JSON file: skuId -> { leaves: [[leafId, quantity]], history: n }), every
 * read checks that each SKU is either wholly stored (detail + all history) or not at all.
 * Prints one JSON line with what it saw when it stops.
 */
import Database from "better-sqlite3";
import { existsSync, readFileSync } from "node:fs";

const o = JSON.parse(process.argv[2]);
const truth = o.truth ? JSON.parse(readFileSync(o.truth, "utf8")) : null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = { mode: o.mode, transactions: 0, reads: 0, failures: [], maxReadMs: 0, fetchedSeen: [], txStart: null, txEnd: null, snapshotStable: null, startedAt: Date.now() };
const stop = () => existsSync(o.stopFile) || (o.holdMs && out.txStart && Date.now() - out.txStart > o.holdMs);

// Wait until the writer has created and migrated the file (errors are expected only here).
let db = null;
while (!db) {
  if (existsSync(o.stopFile)) break;
  try {
    if (existsSync(o.db)) {
      const d = new Database(o.db, { readonly: true, fileMustExist: true });
      d.pragma("busy_timeout = 0");
      const ok = d.pragma("user_version", { simple: true }) === o.latestVersion && d.prepare("SELECT count(*) AS n FROM sync_runs").get().n > 0;
      if (ok) db = d;
      else d.close();
    }
  } catch {
    /* the writer is still creating the file */
  }
  if (!db) await sleep(5);
}

/** One consistent read: counts, and (with truth) the all-or-nothing check of every SKU. */
function read() {
  const t0 = performance.now();
  const fetched = db.prepare("SELECT count(*) AS n FROM sku_sync WHERE fetched_at IS NOT NULL").get().n;
  const summary = db.prepare("SELECT (SELECT count(*) FROM history) AS h, (SELECT count(*) FROM sku_location_quantities) AS q, (SELECT total(quantity) FROM sku_location_quantities) AS s").get();
  if (truth) {
    const leaves = new Map();
    for (const r of db.prepare("SELECT sku_id, location_id, quantity FROM sku_location_quantities").iterate()) {
      if (!leaves.has(r.sku_id)) leaves.set(r.sku_id, []);
      leaves.get(r.sku_id).push([r.location_id, r.quantity]);
    }
    const hist = new Map(
      db
        .prepare("SELECT sku_id, count(*) AS n FROM history GROUP BY sku_id")
        .all()
        .map((r) => [r.sku_id, r.n]),
    );
    const done = new Set(
      db
        .prepare("SELECT sku_id FROM sku_sync WHERE fetched_at IS NOT NULL")
        .all()
        .map((r) => r.sku_id),
    );
    for (const [id, want] of Object.entries(truth)) {
      const got = (leaves.get(id) ?? []).sort((a, b) => (a[0] < b[0] ? -1 : 1));
      const n = hist.get(id) ?? 0;
      const whole = JSON.stringify(got) === JSON.stringify(want.leaves) && n === want.history;
      const none = got.length === 0 && n === 0;
      if (done.has(id) ? !whole : !none) {
        out.failures.push(`SKU ${id} seen half-stored (fetched=${done.has(id)}): ${got.length} leaf rows, ${n} history rows; want ${want.leaves.length} and ${want.history}`);
      }
    }
  }
  const ms = performance.now() - t0;
  out.maxReadMs = Math.max(out.maxReadMs, ms);
  out.reads++;
  return { fetched, ...summary };
}

try {
  if (db && o.mode === "long") {
    while (!stop() && db.prepare("SELECT count(*) AS n FROM sku_sync WHERE fetched_at IS NOT NULL").get().n === 0) await sleep(2);
    db.exec("BEGIN");
    const first = read();
    out.txStart = Date.now();
    out.fetchedSeen.push(first.fetched);
    out.snapshotStable = true;
    while (!stop()) {
      await sleep(100);
      const again = read();
      if (JSON.stringify(again) !== JSON.stringify(first)) out.snapshotStable = false;
    }
    db.exec("COMMIT");
    out.txEnd = Date.now();
  } else if (db) {
    while (!stop()) {
      const span = o.minTxMs + Math.random() * (o.maxTxMs - o.minTxMs);
      const t0 = Date.now();
      db.exec("BEGIN");
      const r = read();
      out.fetchedSeen.push(r.fetched);
      while (Date.now() - t0 < span) {
        await sleep(Math.min(10, span));
        read();
      }
      db.exec("COMMIT");
      out.transactions++;
    }
  }
} catch (err) {
  out.failures.push(`${err.code ?? ""} ${err.message}`);
}
db?.close();
out.fetchedSeen = [...new Set(out.fetchedSeen)];
process.stdout.write(JSON.stringify(out) + "\n");
