/** `inventory-mirror stock --at T [--location ID] [--sku ID]`: stock at a past moment. Read-only. */
import { loadConfig } from "../../core/config.js";
import { ConfigError } from "../../core/errors.js";
import { openReadOnly } from "../../analysis/open.js";
import { stockAt, type StockAtResult } from "../../analysis/stock-at.js";
import { flagsFrom, skuIdOf } from "../common.js";
import type { CliValues } from "../options.js";
import { forTerminal } from "../../core/terminal.js";

export default async function stock(v: CliValues): Promise<number> {
  const config = loadConfig(flagsFrom(v));
  const atRaw = v.at;
  if (typeof atRaw !== "string" || atRaw === "") throw new ConfigError("--at is required: a timestamp such as 2026-03-01T00:00:00Z");
  const at = parseTimestamp(atRaw);
  if (at > Date.now()) process.stderr.write(`inventory-mirror stock: note: --at ${new Date(at).toISOString()} is in the future; the stock shown is the current stock\n`);
  const db = openReadOnly(config.db);
  try {
    const result = stockAt(db, {
      at,
      locationId: typeof v.location === "string" ? v.location : null,
      skuId: typeof v.sku === "string" ? skuIdOf(db, v.sku, config.db) : null,
    });
    process.stdout.write((v.json ? JSON.stringify(result) : forTerminal(render(result))) + "\n");
    return 0;
  } finally {
    db.close();
  }
}

/** ISO 8601; a date or a time without a zone is read as UTC (the API's timestamps are UTC). */
export function parseTimestamp(raw: string): number {
  const s = raw.trim();
  if (!/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$/i.test(s)) {
    throw new ConfigError(`--at: "${raw}" is not an ISO 8601 timestamp; expected e.g. 2026-03-01T00:00:00Z or 2026-03-01`);
  }
  // Date.parse rolls 2026-02-30 over to March 2: every field is checked against the calendar first.
  const [, y, mo, d, h, mi, se] = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?/i.exec(s)!.map(Number) as number[];
  const daysInMonth = new Date(Date.UTC(y!, mo!, 0)).getUTCDate();
  if (mo! < 1 || mo! > 12 || d! < 1 || d! > daysInMonth || (h ?? 0) > 23 || (mi ?? 0) > 59 || (se ?? 0) > 59) {
    throw new ConfigError(`--at: "${raw}" is not a date on the calendar${mo! >= 1 && mo! <= 12 && d! > daysInMonth ? ` (${s.slice(0, 7)} has ${daysInMonth} days)` : ""}`);
  }
  const hasZone = /(Z|[+-]\d{2}:?\d{2})$/i.test(s) && s.length > 10;
  const t = Date.parse(hasZone || s.length === 10 ? s.replace(" ", "T") : `${s.replace(" ", "T")}Z`);
  if (!Number.isFinite(t)) throw new ConfigError(`--at: "${raw}" is not a valid date`);
  return t;
}

function render(r: StockAtResult): string {
  const lines: string[] = [];
  const where = r.location ? ` in ${r.location.displayPath ?? r.location.name ?? r.location.id} (${r.location.leaves} leaves)` : "";
  lines.push(`stock as of ${r.at}${where}, reconstructed from current quantities and history`);
  const approx = r.leaves.filter((l) => l.approximate).length;
  if (r.location) {
    lines.push(
      table(
        ["SKU", "name", "quantity"],
        r.skus.map((s) => [s.skuCode ?? s.skuId, s.skuName ?? "", fmt(s.quantity)]),
        [2],
      ),
    );
  } else {
    lines.push(
      table(
        ["SKU", "location", "quantity"],
        r.leaves.map((l) => [l.skuCode ?? l.skuId, l.displayPath ?? l.locationId, fmt(l.quantity) + (l.approximate ? " *" : "")]),
        [2],
      ),
    );
  }
  lines.push(`total ${fmt(r.total)} over ${r.skus.length} SKU(s), ${r.leaves.length} SKU × leaf row(s) with stock`);
  if (approx) lines.push(`* ${approx} leaf row(s) whose freshness is not clean now: rows after the last replay were taken as not yet reflected`);
  return lines.join("\n");
}

export function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : String(Number(n.toFixed(6)));
}

export function table(head: string[], rows: string[][], rightAligned: number[] = []): string {
  if (rows.length === 0) return "(none)";
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (rightAligned.includes(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(head), ...rows.map(line)].join("\n");
}
