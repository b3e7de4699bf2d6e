/**
 * The documented example queries (docs/schema.md shows each one verbatim, and
 * test/analysis checks that, that each runs against the simulator's workspace with the
 * answer its ground truth gives, and that its query plan uses an index).
 *
 * Parameters are named `:name` (the sqlite3 shell: `.param set :sku_id '...'`). Timestamps
 * are compared as text, so pass them in the API's form: 2026-03-01T00:00:00.000Z.
 */
export interface DocumentedQuery {
  id: string;
  question: string;
  sql: string;
  params: Record<string, string>;
}

export const DOCUMENTED_QUERIES: readonly DocumentedQuery[] = [
  {
    id: "sku-by-leaf",
    question: "Where is this SKU, shelf by shelf?",
    params: { sku_id: "the SKU's id (skus.id)" },
    sql: `SELECT location_id, display_path, quantity, freshness_status, scan_not_reflected
FROM stock_by_location
WHERE sku_id = :sku_id
ORDER BY display_path, location_id;`,
  },
  {
    id: "sku-by-root",
    question: "How much of this SKU is in each root location (warehouse)?",
    params: { sku_id: "the SKU's id" },
    sql: `SELECT root_id, root_name, quantity, leaf_count, leaves_not_reflected
FROM stock_by_root
WHERE sku_id = :sku_id
ORDER BY root_name, root_id;`,
  },
  {
    id: "sku-by-section",
    question: "How much of this SKU is in each section?",
    params: { sku_id: "the SKU's id" },
    sql: `SELECT section_id, section_display_path, quantity, leaf_count, leaves_not_reflected
FROM stock_by_section
WHERE sku_id = :sku_id
ORDER BY section_display_path, section_id;`,
  },
  {
    id: "leaf-contents",
    question: "What is on this shelf (leaf location)?",
    params: { location_id: "a leaf location's id" },
    sql: `SELECT sku_id, sku_code, sku_name, quantity, freshness_status
FROM stock_by_location
WHERE location_id = :location_id AND quantity <> 0
ORDER BY sku_code, sku_id;`,
  },
  {
    id: "root-contents",
    question: "What is in this root location, SKU by SKU?",
    params: { root_id: "a root location's id" },
    sql: `SELECT sku_id, sku_code, sku_name, quantity, leaves_not_reflected
FROM stock_by_root
WHERE root_id = :root_id AND quantity <> 0
ORDER BY quantity DESC, sku_code, sku_id;`,
  },
  {
    id: "section-contents",
    question: "What is in this section, SKU by SKU?",
    params: { section_id: "a section's id" },
    sql: `SELECT sku_id, sku_code, sku_name, quantity, leaves_not_reflected
FROM stock_by_section
WHERE section_id = :section_id AND quantity <> 0
ORDER BY quantity DESC, sku_code, sku_id;`,
  },
  {
    id: "root-totals",
    question: "Total stock and number of SKUs per root location.",
    params: {},
    sql: `SELECT root_id, root_name, sum(quantity) AS quantity, count(*) AS skus
FROM stock_by_root
GROUP BY root_id, root_name
ORDER BY root_name, root_id;`,
  },
  {
    id: "not-reflected",
    question: "Where may the latest scan not be reflected yet, and since when?",
    params: {},
    sql: `SELECT sku_id, sku_code, location_id, display_path, quantity, freshness_status,
       last_replayed_at, rows_after_replay, not_clean_since, seconds_not_clean
FROM stock_not_reflected
ORDER BY not_clean_since, sku_code, location_id;`,
  },
  {
    id: "sku-timeline",
    question: "The history of this SKU, per location, with the running balance.",
    params: { sku_id: "the SKU's id" },
    sql: `SELECT location_id, seq, occurred_at, kind, delta, observed_quantity, balance_before, running_balance
FROM history_timeline
WHERE sku_id = :sku_id
ORDER BY location_id, seq;`,
  },
  {
    id: "sku-stock-as-of",
    question: "How much of this SKU was at each leaf at a past moment (from its history)?",
    params: { sku_id: "the SKU's id", at: "a timestamp in the API's form, e.g. 2026-03-01T00:00:00.000Z" },
    sql: `SELECT location_id, running_balance AS quantity
FROM (SELECT location_id, running_balance,
             row_number() OVER (PARTITION BY location_id ORDER BY seq DESC) AS newest_first
      FROM history_timeline
      WHERE sku_id = :sku_id AND occurred_at <= :at)
WHERE newest_first = 1 AND abs(running_balance) > 1e-9
ORDER BY location_id;`,
  },
  {
    id: "totals-over-time",
    question: "Overall stock after each sync run, for a chart.",
    params: {},
    sql: `SELECT taken_at, run_id, sku_count, total_quantity
FROM inventory_snapshots
WHERE root_id IS NULL
ORDER BY taken_at, run_id;`,
  },
  {
    id: "root-over-time",
    question: "One root location's stock after each sync run.",
    params: { root_id: "a root location's id" },
    sql: `SELECT taken_at, run_id, sku_count, total_quantity
FROM inventory_snapshots
WHERE root_id = :root_id
ORDER BY taken_at, run_id;`,
  },
  {
    id: "search",
    question: "Find SKUs by part of their name, code, custom code, barcode, product name or brand.",
    params: { text: "at least 3 characters, matched anywhere in one field, case-insensitive" },
    sql: `SELECT s.id, s.code, s.sku_code, s.name, s.barcode, s.product_name, s.product_brand
FROM sku_search f
JOIN skus s ON s.rowid = f.rowid
WHERE sku_search MATCH '"' || replace(:text, '"', '""') || '"' AND s.deleted_at IS NULL
ORDER BY f.rank, s.code, s.id;`,
  },
  {
    id: "find-by-code",
    question: "The SKU with exactly this code, custom code or barcode.",
    params: { code: "a code, custom SKU code or barcode" },
    sql: `SELECT id, code, sku_code, name, barcode, total_quantity
FROM skus
WHERE (code = :code OR sku_code = :code OR barcode = :code) AND deleted_at IS NULL
ORDER BY code, id;`,
  },
  {
    id: "top-movers",
    question: "The ten SKUs that moved the most units in a period.",
    params: { from: "start of the period (inclusive), API timestamp form", to: "end of the period (exclusive)" },
    sql: `SELECT h.sku_id, s.code AS sku_code, s.name AS sku_name,
       count(*) AS movements,
       sum(abs(h.quantity)) AS units_moved,
       sum(CASE h.direction WHEN 'out' THEN -abs(h.quantity) WHEN 'in' THEN abs(h.quantity) ELSE h.quantity END) AS net_change
FROM history h
JOIN skus s ON s.id = h.sku_id AND s.deleted_at IS NULL
WHERE h.kind = 'movement' AND h.occurred_at >= :from AND h.occurred_at < :to
GROUP BY h.sku_id
ORDER BY units_moved DESC, sku_code, h.sku_id
LIMIT 10;`,
  },
];

export function documentedQuery(id: string): DocumentedQuery {
  const q = DOCUMENTED_QUERIES.find((d) => d.id === id);
  if (!q) throw new Error(`no documented query ${id}`);
  return q;
}
