-- inventory-mirror: the complete current schema (generated from migrations/ by 'npm run schema'; do not edit by hand).
-- A database at this schema has PRAGMA user_version = 7.

CREATE TABLE changes (
  seq       INTEGER PRIMARY KEY AUTOINCREMENT, -- strictly increasing, in commit order
  run_id    INTEGER NOT NULL,       -- sync_runs.id of the run whose unit of work made the change
  at        TEXT NOT NULL,          -- when the unit of work wrote it (ISO 8601, UTC)
  entity    TEXT NOT NULL,          -- sku | location | leaf_quantity | history
  entity_id TEXT NOT NULL,          -- skus.id | locations.id | the leaf's location id | the SKU id (history)
  sku_id    TEXT,                   -- leaf_quantity and history: the SKU; NULL otherwise
  change    TEXT NOT NULL,          -- created | updated | deleted | revived | removed | appended
  data      TEXT NOT NULL           -- JSON {"before": {...}|null, "after": {...}|null}
);

CREATE TABLE feed_consumers (
  name          TEXT PRIMARY KEY,
  confirmed_seq INTEGER NOT NULL DEFAULT 0, -- every change with seq <= this has been handled
  registered_at TEXT NOT NULL,
  confirmed_at  TEXT
);

CREATE TABLE "history" (
  sku_id            TEXT NOT NULL,
  row_key           TEXT NOT NULL,         -- ours: SHA-1 of all the row's fields
  dup_index         INTEGER NOT NULL DEFAULT 0, -- ours: ordinal of this copy among the SKU's rows identical in every field
  kind              TEXT NOT NULL,         -- movement | set
  occurred_at       TEXT NOT NULL,
  direction         TEXT,                  -- in | out | none
  quantity          REAL NOT NULL,         -- change amount; for a set, the delta against the projection before
  location_id       TEXT NOT NULL,
  location_name     TEXT,
  location_code     TEXT,
  event_id          TEXT,                  -- NULL on a set row
  event_type_code   TEXT,
  event_type_name   TEXT,
  set_session_id    TEXT,                  -- set rows
  set_type_code     TEXT,
  observed_quantity REAL,                  -- set rows: the absolute count observed
  note              TEXT,
  first_seen_run_id INTEGER,               -- ours: the run that stored it
  PRIMARY KEY (sku_id, row_key, dup_index)
);

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

CREATE TABLE learned_quota (
  server      TEXT PRIMARY KEY,
  low         REAL NOT NULL,     -- req/s proven within the quota: the next run holds at it
  high        REAL,              -- the least rate that drew a 429 since (req/s); NULL: none known
  burst_low   REAL NOT NULL,     -- the least burst the server's bucket has shown (requests)
  burst_high  REAL,              -- the most its first requests allow (requests); NULL: not bounded
  one_token   INTEGER NOT NULL,  -- 1: a bucket of one token (each request spaced from the last answer)
  run_id      INTEGER NOT NULL,  -- sync_runs.id of the run that learned it
  learned_at  TEXT NOT NULL      -- when that run ended (ISO 8601, UTC)
);

CREATE TABLE location_ancestors (
  ancestor_id    TEXT NOT NULL,            -- pathIds[ancestor_depth]
  location_id    TEXT NOT NULL,            -- locations.id
  ancestor_depth INTEGER NOT NULL,         -- 0 = the root; equals the location's depth for itself
  PRIMARY KEY (ancestor_id, location_id)
) WITHOUT ROWID;

CREATE TABLE locations (
  id            TEXT PRIMARY KEY,        -- id (UUID)
  name          TEXT,
  code          TEXT,
  parent_id     TEXT,                    -- parentId; NULL for a root
  parent_name   TEXT,
  node_kind     TEXT,                    -- nodeKind; a root is "location"
  depth         INTEGER,                 -- 0 for a root
  path_ids      TEXT,                    -- pathIds, JSON array, root first
  path_names    TEXT,                    -- pathNames, JSON array
  display_path  TEXT,
  is_leaf       INTEGER,                 -- 0/1
  child_count   INTEGER,
  selectable    INTEGER,                 -- 0/1
  status        TEXT,                    -- "active" is queried for stock
  updated_at    TEXT,                    -- updatedAt (server's)
  first_seen_at TEXT NOT NULL,           -- ours: first run that saw it
  last_seen_at  TEXT NOT NULL,           -- ours: last run that saw it
  missed_walks  INTEGER NOT NULL DEFAULT 0, -- ours: consecutive complete walks it was absent from
  deleted_at    TEXT                     -- ours: set when the server stopped returning it; NULL = current
);

CREATE TABLE sku_location_quantities (
  sku_id                      TEXT NOT NULL,
  location_id                 TEXT NOT NULL, -- locations[].id (a leaf)
  quantity                    REAL NOT NULL,
  freshness_status            TEXT,          -- clean | dirty | rebuilding | failed | (unknown)
  freshness_last_replayed_at  TEXT,
  freshness_last_source_kind  TEXT,
  location_name               TEXT,          -- as the detail response named it
  location_code               TEXT,
  parent_id                   TEXT,
  fetched_at                  TEXT NOT NULL, -- ours: when this row was last read from the server
  not_clean_since             TEXT,          -- ours: first fetch that saw a status other than clean, NULL when clean
  PRIMARY KEY (sku_id, location_id)
) WITHOUT ROWID;

CREATE TABLE sku_root_quantities (
  sku_id           TEXT NOT NULL,
  root_location_id TEXT NOT NULL,
  quantity         REAL NOT NULL,
  PRIMARY KEY (sku_id, root_location_id)
) WITHOUT ROWID;

CREATE VIRTUAL TABLE sku_search USING fts5(
  name, code, sku_code, barcode, product_name, product_brand,
  content = 'skus', content_rowid = 'rowid', tokenize = 'trigram'
);

CREATE TABLE sku_sync (
  sku_id           TEXT PRIMARY KEY,
  list_fingerprint TEXT,                   -- hash of the list item: SKU fields, totalQuantity, locationQuantities
  listed_walk_id   INTEGER,                -- last list walk that returned it
  pending_walk_id  INTEGER,                -- set: detail+history still to fetch for that walk (the work queue)
  fetched_walk_id  INTEGER,                -- last walk whose detail+history were stored
  fetched_at       TEXT,                   -- when detail+history were last stored
  fail_count       INTEGER NOT NULL DEFAULT 0,
  last_error       TEXT
);

CREATE TABLE skus (
  id             TEXT PRIMARY KEY,       -- id (stable UUID; the only integration key)
  code           TEXT,
  sku_code       TEXT,                   -- skuCode
  name           TEXT,
  barcode        TEXT,
  unit           TEXT,
  product_id     TEXT,                   -- product.id
  product_name   TEXT,                   -- product.name
  product_brand  TEXT,                   -- product.brand
  options        TEXT NOT NULL DEFAULT '{}', -- options, JSON object
  total_quantity REAL,                   -- list totalQuantity (no scope = whole workspace)
  first_seen_at  TEXT NOT NULL,
  last_seen_at   TEXT NOT NULL,
  missed_walks   INTEGER NOT NULL DEFAULT 0,
  deleted_at     TEXT                    -- set when absent from complete list walks; history and last quantities stay
);

CREATE TABLE sync_journal (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id      INTEGER NOT NULL,
  at          TEXT NOT NULL,
  kind        TEXT NOT NULL,               -- backoff | retry | error | freshness | sku_failed | sku_vanished | interrupted | resume | info
  endpoint    TEXT,                        -- endpoint template, never a URL with the key
  status      INTEGER,                     -- HTTP status
  retry_after TEXT,                        -- Retry-After as received
  wait_ms     INTEGER,                     -- wait actually applied
  sku_id      TEXT,
  location_id TEXT,
  message     TEXT
);

CREATE TABLE sync_runs (
  id                  INTEGER PRIMARY KEY AUTOINCREMENT,
  mode                TEXT NOT NULL,       -- full | incremental
  started_at          TEXT NOT NULL,
  finished_at         TEXT,
  status              TEXT NOT NULL,       -- running | succeeded | partial | failed | interrupted
  walk_id             INTEGER,             -- id of the run that began this walk
  pid                 INTEGER,
  list_cursor         TEXT,                -- checkpoint: cursor of the next list page to fetch
  list_done           INTEGER NOT NULL DEFAULT 0,
  skus_listed         INTEGER NOT NULL DEFAULT 0,
  skus_planned        INTEGER NOT NULL DEFAULT 0,
  skus_fetched        INTEGER NOT NULL DEFAULT 0,
  skus_failed         INTEGER NOT NULL DEFAULT 0,
  skus_deleted        INTEGER NOT NULL DEFAULT 0,
  locations_seen      INTEGER NOT NULL DEFAULT 0,
  history_rows_added  INTEGER NOT NULL DEFAULT 0,
  requests            INTEGER NOT NULL DEFAULT 0,
  requests_by_endpoint TEXT NOT NULL DEFAULT '{}', -- JSON: endpoint -> count
  responses_429       INTEGER NOT NULL DEFAULT 0,
  responses_503       INTEGER NOT NULL DEFAULT 0,
  retries             INTEGER NOT NULL DEFAULT 0,
  wait_ms             INTEGER NOT NULL DEFAULT 0,
  resume_after        TEXT,                -- partial runs: do not retry before this
  error               TEXT
, skus_new INTEGER NOT NULL DEFAULT 0, skus_changed INTEGER NOT NULL DEFAULT 0, skus_repolled INTEGER NOT NULL DEFAULT 0, skus_retried INTEGER NOT NULL DEFAULT 0, skus_reverified INTEGER NOT NULL DEFAULT 0, requests_by_status TEXT NOT NULL DEFAULT '{}', request_budget INTEGER, list_walk_again INTEGER NOT NULL DEFAULT 0);

CREATE TABLE workspace (
  id          TEXT PRIMARY KEY,          -- workspace.id
  name        TEXT NOT NULL,             -- workspace.name
  scope       TEXT,                      -- scope ("read")
  checked_at  TEXT NOT NULL              -- when a run last confirmed the key still points here
);

CREATE INDEX changes_at ON changes(at);

CREATE INDEX history_location_time ON history(location_id, occurred_at);

CREATE INDEX history_sku_location_time ON history(sku_id, location_id, occurred_at);

CREATE INDEX history_sku_time ON history(sku_id, occurred_at);

CREATE INDEX history_time ON history(occurred_at);

CREATE INDEX inventory_snapshots_root_time ON inventory_snapshots(root_id, taken_at);

CREATE UNIQUE INDEX inventory_snapshots_run_root ON inventory_snapshots(run_id, ifnull(root_id, ''));

CREATE INDEX location_ancestors_location ON location_ancestors(location_id, ancestor_depth);

CREATE INDEX locations_parent ON locations(parent_id);

CREATE INDEX sku_sync_fetched_at ON sku_sync(fetched_at);

CREATE INDEX sku_sync_pending ON sku_sync(pending_walk_id) WHERE pending_walk_id IS NOT NULL;

CREATE INDEX skus_barcode ON skus(barcode);

CREATE INDEX skus_code ON skus(code);

CREATE INDEX skus_sku_code ON skus(sku_code);

CREATE INDEX slq_location_quantity ON sku_location_quantities(location_id, quantity, freshness_status);

CREATE INDEX slq_not_reflected ON sku_location_quantities(not_clean_since, sku_id, location_id)
  WHERE freshness_status IS NOT 'clean';

CREATE INDEX sync_journal_run ON sync_journal(run_id);

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
       sum(q.freshness_status IS NOT 'clean') AS leaves_not_reflected
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
JOIN locations l ON l.id = q.location_id AND l.deleted_at IS NULL
JOIN location_ancestors a ON a.location_id = q.location_id AND a.ancestor_depth = 0
JOIN locations r ON r.id = a.ancestor_id AND r.deleted_at IS NULL
GROUP BY q.sku_id, a.ancestor_id;

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

CREATE TRIGGER locations_ancestors_after_delete AFTER DELETE ON locations BEGIN
  DELETE FROM location_ancestors WHERE location_id = old.id;
END;

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

CREATE TRIGGER skus_search_after_delete AFTER DELETE ON skus BEGIN
  INSERT INTO sku_search(sku_search, rowid, name, code, sku_code, barcode, product_name, product_brand)
  VALUES ('delete', old.rowid, old.name, old.code, old.sku_code, old.barcode, old.product_name, old.product_brand);
END;

CREATE TRIGGER skus_search_after_insert AFTER INSERT ON skus BEGIN
  INSERT INTO sku_search(rowid, name, code, sku_code, barcode, product_name, product_brand)
  VALUES (new.rowid, new.name, new.code, new.sku_code, new.barcode, new.product_name, new.product_brand);
END;

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

PRAGMA user_version = 7;
