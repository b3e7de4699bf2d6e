/** `inventory-mirror reconcile`: check the mirror against itself. Exit 0 when consistent, 1 with mismatches. Read-only. */
import { loadConfig } from "../../core/config.js";
import { EXIT } from "../../core/errors.js";
import { openReadOnly } from "../../analysis/open.js";
import { reconcile, type Mismatch, type ReconcileReport } from "../../analysis/reconcile.js";
import { flagsFrom, skuIdOf } from "../common.js";
import type { CliValues } from "../options.js";
import { fmt } from "./stock.js";
import { forTerminal } from "../../core/terminal.js";

export default async function reconcileCommand(v: CliValues): Promise<number> {
  const config = loadConfig(flagsFrom(v));
  const db = openReadOnly(config.db);
  let report: ReconcileReport;
  try {
    report = reconcile(db, { skuId: typeof v.sku === "string" ? skuIdOf(db, v.sku, config.db) : null });
  } finally {
    db.close();
  }
  process.stdout.write((v.json ? JSON.stringify(report) : forTerminal(render(report))) + "\n");
  return report.ok ? EXIT.ok : EXIT.syncFailed;
}

function describe(m: Mismatch): string {
  const where = m.locationId ? ` at ${m.displayPath ?? m.locationName ?? "?"} (${m.locationId})` : "";
  const what =
    m.check === "leaf_history"
      ? `history replay says ${fmt(m.expected)}, mirrored quantity is ${fmt(m.found)}`
      : m.check === "root_sum"
        ? `list root quantity is ${fmt(m.expected)}, leaf rows add up to ${fmt(m.found)}`
        : `list totalQuantity is ${fmt(m.expected)}, leaf rows add up to ${fmt(m.found)}`;
  const also = m.alsoDisagrees.length ? `; also makes ${m.alsoDisagrees.join(" and ")} disagree` : "";
  return `  ${m.check.padEnd(12)} SKU ${m.skuCode ?? ""} (${m.skuId})${where}: ${what} (difference ${fmt(m.difference)})${also}. ${m.explanation}`;
}

function render(r: ReconcileReport): string {
  const lines = [
    `reconcile${r.skuId ? ` of SKU ${r.skuId}` : ""}: ${r.counts.skus} SKUs, ${r.counts.skuLeaves} SKU × leaf, ${r.counts.skuRoots} SKU × root, ${r.counts.historyRows} history rows checked`,
  ];
  const byFreshness = r.mismatches.filter((m) => m.explainedByFreshness);
  const byPending = r.mismatches.filter((m) => m.explainedByPendingFetch);
  const unexplained = r.mismatches.filter((m) => !m.explained);
  if (byFreshness.length) {
    lines.push(`${byFreshness.length} difference(s) explained by freshness (latest scan not reflected yet):`);
    lines.push(...byFreshness.map(describe));
  }
  if (byPending.length) {
    lines.push(`${byPending.length} difference(s) explained by a fetch still queued (run 'inventory-mirror sync' to finish it):`);
    lines.push(...byPending.map(describe));
  }
  if (unexplained.length) {
    lines.push(`${unexplained.length} mismatch(es):`);
    lines.push(...unexplained.map(describe));
  }
  for (const a of r.advisories) {
    lines.push(`  note: ${a.check}${a.rootName ? ` ${a.rootName} (${a.rootId})` : ""}: snapshot says ${fmt(a.expected)}, leaf rows add up to ${fmt(a.found)}. ${a.explanation}`);
  }
  lines.push(r.ok ? "result: consistent" : `result: ${unexplained.length} unexplained mismatch(es)`);
  return lines.join("\n");
}
