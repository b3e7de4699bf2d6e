-- inventory-mirror PostgreSQL workspace schema, migration 1: the contract tables and BI views of
-- the SQLite mirror (migrations/0001..0004, docs/schema.md), with the same names, columns and
-- meaning. Applied inside the workspace's own schema (search_path). Forward-only.
--
-- Types follow the mirror's: SQLite TEXT -> text, REAL -> double precision, INTEGER -> bigint
-- (0/1 flags stay 0/1 integers, so queries written for the mirror answer the same). Timestamps
-- and JSON stay text exactly as stored (ISO 8601 UTC text sorts correctly; cast with ::timestamptz
-- or ::jsonb in a query). history gains mirror_rowid, the row's rowid in the mirror (its order
-- among equal times). Not published: the operational tables (sku_sync, sync_runs, sync_journal)
-- and the full-text index sku_search (SQLite FTS5).

CREATE TABLE workspace (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  scope       text,
  checked_at  text NOT NULL
);

CREATE TABLE locations (
  id            text PRIMARY KEY,
  name          text,
  code          text,
  parent_id     text,
  parent_name   text,
  node_kind     text,
  depth         bigint,
  path_ids      text,
  path_names    text,
  display_path  text,
  is_leaf       bigint,
  child_count   bigint,
  selectable    bigint,
  status        text,
  updated_at    text,
  first_seen_at text NOT NULL,
  last_seen_at  text NOT NULL,
  missed_walks  bigint NOT NULL DEFAULT 0,
  deleted_at    text
);
CREATE INDEX locations_parent ON locations(parent_id);

CREATE TABLE location_ancestors (
  ancestor_id    text NOT NULL,
  location_id    text NOT NULL,
  ancestor_depth bigint NOT NULL,
  PRIMARY KEY (ancestor_id, location_id)
);
CREATE INDEX location_ancestors_location ON location_ancestors(location_id, ancestor_depth);

CREATE TABLE skus (
  id             text PRIMARY KEY,
  code           text,
  sku_code       text,
  name           text,
  barcode        text,
  unit           text,
  product_id     text,
  product_name   text,
  product_brand  text,
  options        text NOT NULL DEFAULT '{}',
  total_quantity double precision,
  first_seen_at  text NOT NULL,
  last_seen_at   text NOT NULL,
  missed_walks   bigint NOT NULL DEFAULT 0,
  deleted_at     text
);
CREATE INDEX skus_code ON skus(code);
CREATE INDEX skus_sku_code ON skus(sku_code);
CREATE INDEX skus_barcode ON skus(barcode);

CREATE TABLE sku_root_quantities (
  sku_id           text NOT NULL,
  root_location_id text NOT NULL,
  quantity         double precision NOT NULL,
  PRIMARY KEY (sku_id, root_location_id)
);

CREATE TABLE sku_location_quantities (
  sku_id                      text NOT NULL,
  location_id                 text NOT NULL,
  quantity                    double precision NOT NULL,
  freshness_status            text,
  freshness_last_replayed_at  text,
  freshness_last_source_kind  text,
  location_name               text,
  location_code               text,
  parent_id                   text,
  fetched_at                  text NOT NULL,
  not_clean_since             text,
  PRIMARY KEY (sku_id, location_id)
);
CREATE INDEX slq_location_quantity ON sku_location_quantities(location_id, quantity, freshness_status);
CREATE INDEX slq_not_reflected ON sku_location_quantities(not_clean_since, sku_id, location_id)
  WHERE freshness_status IS DISTINCT FROM 'clean';

CREATE TABLE history (
  sku_id            text NOT NULL,
  row_key           text NOT NULL,
  dup_index         bigint NOT NULL DEFAULT 0,
  kind              text NOT NULL,
  occurred_at       text NOT NULL,
  direction         text,
  quantity          double precision NOT NULL,
  location_id       text NOT NULL,
  location_name     text,
  location_code     text,
  event_id          text,
  event_type_code   text,
  event_type_name   text,
  set_session_id    text,
  set_type_code     text,
  observed_quantity double precision,
  note              text,
  first_seen_run_id bigint,
  mirror_rowid      bigint NOT NULL,        -- the row's rowid in the SQLite mirror
  PRIMARY KEY (sku_id, row_key, dup_index)
);
CREATE INDEX history_sku_time ON history(sku_id, occurred_at);
CREATE INDEX history_location_time ON history(location_id, occurred_at);
CREATE INDEX history_sku_location_time ON history(sku_id, location_id, occurred_at);
CREATE INDEX history_time ON history(occurred_at);

CREATE TABLE inventory_snapshots (
  run_id                   bigint NOT NULL,
  taken_at                 text NOT NULL,
  root_id                  text,
  name                     text,
  code                     text,
  child_count              bigint,
  leaf_location_ids        text,
  sku_count                bigint,
  total_quantity           double precision,
  average_quantity_per_sku double precision
);
CREATE UNIQUE INDEX inventory_snapshots_run_root ON inventory_snapshots(run_id, coalesce(root_id, ''));
CREATE INDEX inventory_snapshots_root_time ON inventory_snapshots(root_id, taken_at);

-- The views: migrations/0003_analysis.sql, written for PostgreSQL. Same columns, same order,
-- same meaning; counts are bigint, flags 0/1 integers.

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
       sum(CASE WHEN q.freshness_status IS DISTINCT FROM 'clean' THEN 1 ELSE 0 END) AS leaves_not_reflected
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
JOIN locations l ON l.id = q.location_id AND l.deleted_at IS NULL
JOIN location_ancestors a ON a.location_id = q.location_id AND a.ancestor_depth = 0
JOIN locations r ON r.id = a.ancestor_id AND r.deleted_at IS NULL
GROUP BY q.sku_id, s.id, a.ancestor_id, r.id;

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
       sum(CASE WHEN q.freshness_status IS DISTINCT FROM 'clean' THEN 1 ELSE 0 END) AS leaves_not_reflected
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
JOIN locations l ON l.id = q.location_id AND l.deleted_at IS NULL
JOIN location_ancestors a ON a.location_id = q.location_id AND a.ancestor_depth = 1 AND a.ancestor_id <> q.location_id
JOIN locations c ON c.id = a.ancestor_id AND c.deleted_at IS NULL
GROUP BY q.sku_id, s.id, a.ancestor_id, c.id;

-- seconds_*: SQLite's max(0, x) is NULL when x is NULL; greatest() would skip the NULL, hence the CASE.
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
       CASE WHEN q.not_clean_since IS NULL THEN NULL
            ELSE greatest(0, round(extract(epoch FROM now() - q.not_clean_since::timestamptz)))::bigint END AS seconds_not_clean,
       CASE WHEN q.freshness_last_replayed_at IS NULL THEN NULL
            ELSE greatest(0, round(extract(epoch FROM now() - q.freshness_last_replayed_at::timestamptz)))::bigint END AS seconds_since_replay,
       (SELECT count(*) FROM history h
         WHERE h.sku_id = q.sku_id AND h.location_id = q.location_id
           AND (q.freshness_last_replayed_at IS NULL OR h.occurred_at > q.freshness_last_replayed_at)) AS rows_after_replay,
       (SELECT min(h.occurred_at) FROM history h
         WHERE h.sku_id = q.sku_id AND h.location_id = q.location_id
           AND (q.freshness_last_replayed_at IS NULL OR h.occurred_at > q.freshness_last_replayed_at)) AS oldest_row_after_replay
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
LEFT JOIN locations l ON l.id = q.location_id
WHERE q.freshness_status IS DISTINCT FROM 'clean' AND l.deleted_at IS NULL;

-- Text comparisons of ISO timestamps: COLLATE "C" orders them byte by byte, as SQLite does.
CREATE VIEW history_timeline AS
WITH ordered AS (
  SELECT h.mirror_rowid AS history_rowid,
         h.sku_id, h.location_id, h.occurred_at, h.kind, h.direction, h.quantity, h.observed_quantity,
         h.location_name, h.event_id, h.event_type_code, h.event_type_name, h.set_session_id, h.set_type_code,
         h.note, h.first_seen_run_id,
         CASE h.direction WHEN 'out' THEN -abs(h.quantity) WHEN 'in' THEN abs(h.quantity) ELSE h.quantity END AS delta,
         (h.kind = 'set' AND h.observed_quantity IS NOT NULL) AS resets,
         row_number() OVER w AS seq,
         sum(CASE WHEN h.kind = 'set' AND h.observed_quantity IS NOT NULL THEN 1 ELSE 0 END) OVER w AS epoch,
         count(*) OVER (PARTITION BY h.sku_id, h.location_id) AS rows_at_leaf
  FROM history h
  WINDOW w AS (PARTITION BY h.sku_id, h.location_id
               ORDER BY h.occurred_at COLLATE "C", coalesce(h.first_seen_run_id, 0), h.mirror_rowid DESC
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
       CASE WHEN b.seq = b.rows_at_leaf THEN 1 ELSE 0 END AS is_latest,
       b.event_id, b.event_type_code, b.event_type_name, b.set_session_id, b.set_type_code, b.note,
       b.location_name,
       b.first_seen_run_id,
       b.history_rowid
FROM balanced b;
