-- inventory-mirror schema, migration 3: a database BI tools can trust.
-- Views over leaf rows only (never parent + leaf), the history timeline with a running
-- balance, per-run inventory snapshots, full-text search over SKUs, and the indexes the
-- documented queries (docs/schema.md) use. Forward-only: never edit a released migration.
--
-- Conventions shared by every view below (docs/schema.md, "Assumptions"):
-- * Current = not deleted: skus.deleted_at IS NULL, locations.deleted_at IS NULL.
-- * Root and section of a leaf come from its locations.path_ids (root first), kept as rows in
--   location_ancestors: the root is the ancestor at depth 0, the section the one at depth 1
--   (a leaf directly under a root has no section).
-- * Signed effect of a history row: direction 'out' subtracts |quantity|, 'in' adds
--   |quantity|, anything else adds quantity as stored. A 'set' row with an observed count
--   resets the balance to observed_quantity.
-- * Order of history rows at one SKU x leaf: occurred_at, then the run that first stored the
--   row (earlier run = older), then, within one run, the server's order (the store inserts a
--   SKU's history newest first, so a larger rowid is older).

-- Full-text search over SKU name, codes, barcode, product name and brand. External content:
-- the text lives in skus, the index is kept in step by the triggers below. Trigram tokens give
-- substring matching (like the API's q), case-insensitive; a query needs at least 3 characters.
CREATE VIRTUAL TABLE sku_search USING fts5(
  name, code, sku_code, barcode, product_name, product_brand,
  content = 'skus', content_rowid = 'rowid', tokenize = 'trigram'
);
INSERT INTO sku_search(sku_search) VALUES ('rebuild');

CREATE TRIGGER skus_search_after_insert AFTER INSERT ON skus BEGIN
  INSERT INTO sku_search(rowid, name, code, sku_code, barcode, product_name, product_brand)
  VALUES (new.rowid, new.name, new.code, new.sku_code, new.barcode, new.product_name, new.product_brand);
END;

CREATE TRIGGER skus_search_after_delete AFTER DELETE ON skus BEGIN
  INSERT INTO sku_search(sku_search, rowid, name, code, sku_code, barcode, product_name, product_brand)
  VALUES ('delete', old.rowid, old.name, old.code, old.sku_code, old.barcode, old.product_name, old.product_brand);
END;

-- Only when a searched field changed: a sync rewrites every SKU row, usually unchanged.
CREATE TRIGGER skus_search_after_update AFTER UPDATE ON skus
WHEN old.name IS NOT new.name OR old.code IS NOT new.code OR old.sku_code IS NOT new.sku_code
  OR old.barcode IS NOT new.barcode OR old.product_name IS NOT new.product_name
  OR old.product_brand IS NOT new.product_brand OR old.rowid IS NOT new.rowid
BEGIN
  INSERT INTO sku_search(sku_search, rowid, name, code, sku_code, barcode, product_name, product_brand)
  VALUES ('delete', old.rowid, old.name, old.code, old.sku_code, old.barcode, old.product_name, old.product_brand);
  INSERT INTO sku_search(rowid, name, code, sku_code, barcode, product_name, product_brand)
  VALUES (new.rowid, new.name, new.code, new.sku_code, new.barcode, new.product_name, new.product_brand);
END;

-- Every location x each node on its path (itself included), from locations.path_ids: the
-- tree as rows, so "the leaves under root/section X" is an index lookup. Kept in step with
-- locations by the triggers below; filled for existing rows here.
CREATE TABLE location_ancestors (
  ancestor_id    TEXT NOT NULL,            -- pathIds[ancestor_depth]
  location_id    TEXT NOT NULL,            -- locations.id
  ancestor_depth INTEGER NOT NULL,         -- 0 = the root; equals the location's depth for itself
  PRIMARY KEY (ancestor_id, location_id)
) WITHOUT ROWID;
CREATE INDEX location_ancestors_location ON location_ancestors(location_id, ancestor_depth);
INSERT OR IGNORE INTO location_ancestors (ancestor_id, location_id, ancestor_depth)
  SELECT p.value, l.id, CAST(p.key AS INTEGER) FROM locations l, json_each(l.path_ids) p WHERE json_valid(l.path_ids);

CREATE TRIGGER locations_ancestors_after_insert AFTER INSERT ON locations WHEN json_valid(new.path_ids) BEGIN
  INSERT OR IGNORE INTO location_ancestors (ancestor_id, location_id, ancestor_depth)
    SELECT p.value, new.id, CAST(p.key AS INTEGER) FROM json_each(new.path_ids) p;
END;

CREATE TRIGGER locations_ancestors_after_update AFTER UPDATE OF id, path_ids ON locations
WHEN old.path_ids IS NOT new.path_ids OR old.id IS NOT new.id
BEGIN
  DELETE FROM location_ancestors WHERE location_id = old.id;
  INSERT OR IGNORE INTO location_ancestors (ancestor_id, location_id, ancestor_depth)
    SELECT p.value, new.id, CAST(p.key AS INTEGER) FROM json_each(new.path_ids) p WHERE json_valid(new.path_ids);
END;

CREATE TRIGGER locations_ancestors_after_delete AFTER DELETE ON locations BEGIN
  DELETE FROM location_ancestors WHERE location_id = old.id;
END;

-- Per sync run: the list response's root summaries (locations[]) and overall summary, as
-- the first list page of the run returned them. One row per root (root_id set) and one
-- overall row (root_id NULL) per run.
CREATE TABLE inventory_snapshots (
  run_id                   INTEGER NOT NULL, -- sync_runs.id
  taken_at                 TEXT NOT NULL,    -- ours: when the list response was stored
  root_id                  TEXT,             -- locations[].id; NULL = the overall summary
  name                     TEXT,             -- locations[].name (NULL on the overall row)
  code                     TEXT,             -- locations[].code
  child_count              INTEGER,          -- locations[].childCount
  leaf_location_ids        TEXT,             -- locations[].leafLocationIds, JSON array
  sku_count                INTEGER,          -- locations[].skuCount / summary.skuCount
  total_quantity           REAL,             -- locations[].totalQuantity / summary.totalQuantity
  average_quantity_per_sku REAL              -- locations[].averageQuantityPerSku / summary.averageQuantityPerSku
);
CREATE UNIQUE INDEX inventory_snapshots_run_root ON inventory_snapshots(run_id, ifnull(root_id, ''));
CREATE INDEX inventory_snapshots_root_time ON inventory_snapshots(root_id, taken_at);

-- Indexes for the documented queries.
CREATE INDEX skus_code ON skus(code);
CREATE INDEX skus_sku_code ON skus(sku_code);
CREATE INDEX skus_barcode ON skus(barcode);
-- Leaf rows by location, covering what the stock views read (a WITHOUT ROWID index carries sku_id).
DROP INDEX slq_location;
CREATE INDEX slq_location_quantity ON sku_location_quantities(location_id, quantity, freshness_status);
-- The few leaf rows whose latest scan may not be reflected.
CREATE INDEX slq_not_reflected ON sku_location_quantities(not_clean_since, sku_id, location_id)
  WHERE freshness_status IS NOT 'clean';
-- History: one SKU x leaf in time order (timeline, replay), and a time range (top movers, stock as of).
CREATE INDEX history_sku_location_time ON history(sku_id, location_id, occurred_at);
CREATE INDEX history_time ON history(occurred_at);

-- The existing view, with names added at the end (its first six columns are unchanged).
DROP VIEW stock_by_location;
CREATE VIEW stock_by_location AS
SELECT q.sku_id,
       q.location_id,
       l.display_path,
       q.quantity,
       q.freshness_status,
       CASE WHEN q.freshness_status = 'clean' THEN 0 ELSE 1 END AS scan_not_reflected,
       s.code AS sku_code,
       s.name AS sku_name,
       coalesce(l.name, q.location_name) AS location_name,
       coalesce(l.code, q.location_code) AS location_code,
       (SELECT a.ancestor_id FROM location_ancestors a WHERE a.location_id = q.location_id AND a.ancestor_depth = 0) AS root_id,
       (SELECT a.ancestor_id FROM location_ancestors a
         WHERE a.location_id = q.location_id AND a.ancestor_depth = 1 AND a.ancestor_id <> q.location_id) AS section_id,
       q.fetched_at
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
LEFT JOIN locations l ON l.id = q.location_id
WHERE l.deleted_at IS NULL;

-- Current stock per SKU x root: the sum of the SKU's leaf rows under the root.
CREATE VIEW stock_by_root AS
SELECT q.sku_id,
       s.code AS sku_code,
       s.name AS sku_name,
       s.unit,
       a.ancestor_id AS root_id,
       r.name AS root_name,
       r.code AS root_code,
       r.display_path AS root_display_path,
       sum(q.quantity) AS quantity,
       count(*) AS leaf_count,
       sum(q.freshness_status IS NOT 'clean') AS leaves_not_reflected
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
JOIN locations l ON l.id = q.location_id AND l.deleted_at IS NULL
JOIN location_ancestors a ON a.location_id = q.location_id AND a.ancestor_depth = 0
JOIN locations r ON r.id = a.ancestor_id AND r.deleted_at IS NULL
GROUP BY q.sku_id, a.ancestor_id;

-- Current stock per SKU x section (the depth-1 node above the leaf): the sum of its leaf rows.
CREATE VIEW stock_by_section AS
SELECT q.sku_id,
       s.code AS sku_code,
       s.name AS sku_name,
       s.unit,
       a.ancestor_id AS section_id,
       c.name AS section_name,
       c.code AS section_code,
       c.display_path AS section_display_path,
       c.parent_id AS root_id,
       c.parent_name AS root_name,
       sum(q.quantity) AS quantity,
       count(*) AS leaf_count,
       sum(q.freshness_status IS NOT 'clean') AS leaves_not_reflected
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
JOIN locations l ON l.id = q.location_id AND l.deleted_at IS NULL
JOIN location_ancestors a ON a.location_id = q.location_id AND a.ancestor_depth = 1 AND a.ancestor_id <> q.location_id
JOIN locations c ON c.id = a.ancestor_id AND c.deleted_at IS NULL
GROUP BY q.sku_id, a.ancestor_id;

-- SKU x leaf whose latest scan may not be reflected (freshness not clean), and for how long.
CREATE VIEW stock_not_reflected AS
SELECT q.sku_id,
       s.code AS sku_code,
       s.name AS sku_name,
       q.location_id,
       coalesce(l.name, q.location_name) AS location_name,
       l.display_path,
       q.quantity,
       q.freshness_status,
       q.freshness_last_replayed_at AS last_replayed_at,
       q.not_clean_since,
       max(0, CAST(round((julianday('now') - julianday(q.not_clean_since)) * 86400) AS INTEGER)) AS seconds_not_clean,
       max(0, CAST(round((julianday('now') - julianday(q.freshness_last_replayed_at)) * 86400) AS INTEGER)) AS seconds_since_replay,
       (SELECT count(*) FROM history h
         WHERE h.sku_id = q.sku_id AND h.location_id = q.location_id
           AND (q.freshness_last_replayed_at IS NULL OR h.occurred_at > q.freshness_last_replayed_at)) AS rows_after_replay,
       (SELECT min(h.occurred_at) FROM history h
         WHERE h.sku_id = q.sku_id AND h.location_id = q.location_id
           AND (q.freshness_last_replayed_at IS NULL OR h.occurred_at > q.freshness_last_replayed_at)) AS oldest_row_after_replay
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
LEFT JOIN locations l ON l.id = q.location_id
WHERE q.freshness_status IS NOT 'clean' AND l.deleted_at IS NULL;

-- Every history row of every SKU x leaf in time order, with a running balance: movements
-- add their signed effect, a SET resets the balance to its observed count. The last row's
-- running_balance is what the history says the leaf holds (reconcile compares it with the
-- mirrored quantity).
CREATE VIEW history_timeline AS
WITH ordered AS (
  SELECT h.rowid AS history_rowid,
         h.sku_id, h.location_id, h.occurred_at, h.kind, h.direction, h.quantity, h.observed_quantity,
         h.location_name, h.event_id, h.event_type_code, h.event_type_name, h.set_session_id, h.set_type_code,
         h.note, h.first_seen_run_id,
         CASE h.direction WHEN 'out' THEN -abs(h.quantity) WHEN 'in' THEN abs(h.quantity) ELSE h.quantity END AS delta,
         (h.kind = 'set' AND h.observed_quantity IS NOT NULL) AS resets,
         row_number() OVER w AS seq,
         sum(h.kind = 'set' AND h.observed_quantity IS NOT NULL) OVER w AS epoch,
         count(*) OVER (PARTITION BY h.sku_id, h.location_id) AS rows_at_leaf
  FROM history h
  WINDOW w AS (PARTITION BY h.sku_id, h.location_id
               ORDER BY h.occurred_at, coalesce(h.first_seen_run_id, 0), h.rowid DESC
               ROWS UNBOUNDED PRECEDING)
),
balanced AS (
  SELECT o.*,
         coalesce(max(CASE WHEN o.resets THEN o.observed_quantity END) OVER e, 0)
           + sum(CASE WHEN o.resets THEN 0 ELSE o.delta END) OVER e AS running_balance
  FROM ordered o
  WINDOW e AS (PARTITION BY o.sku_id, o.location_id, o.epoch ORDER BY o.seq ROWS UNBOUNDED PRECEDING)
)
SELECT b.sku_id,
       b.location_id,
       b.seq,
       b.occurred_at,
       b.kind,
       b.direction,
       b.quantity,
       b.delta,
       b.observed_quantity,
       coalesce(lag(b.running_balance) OVER (PARTITION BY b.sku_id, b.location_id ORDER BY b.seq), 0) AS balance_before,
       b.running_balance,
       b.seq = b.rows_at_leaf AS is_latest,
       b.event_id, b.event_type_code, b.event_type_name, b.set_session_id, b.set_type_code, b.note,
       b.location_name,
       b.first_seen_run_id,
       b.history_rowid
FROM balanced b;
