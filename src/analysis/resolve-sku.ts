/** A SKU named on the command line, by its UUID or its code: the id, or null when none matches. */
import type { DB } from "../store/db.js";

export function resolveSku(db: DB, idOrCode: string): { id: string; code: string } | null {
  const v = idOrCode.trim();
  const row =
    (db.prepare("SELECT id, code FROM skus WHERE lower(id) = lower(?) LIMIT 1").get(v) as { id: string; code: string } | undefined) ??
    (db.prepare("SELECT id, code FROM skus WHERE code = ? ORDER BY deleted_at IS NOT NULL, id LIMIT 1").get(v) as { id: string; code: string } | undefined) ??
    (db.prepare("SELECT id, code FROM skus WHERE lower(code) = lower(?) ORDER BY deleted_at IS NOT NULL, id LIMIT 1").get(v) as { id: string; code: string } | undefined);
  return row ?? null;
}
