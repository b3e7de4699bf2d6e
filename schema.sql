-- inventory-mirror: the complete current schema (generated from migrations/ by 'npm run schema'; do not edit by hand).
-- A database at this schema has PRAGMA user_version = 2.

CREATE TABLE history (
  sku_id            TEXT NOT NULL,
  row_key           TEXT NOT NULL,
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
  PRIMARY KEY (sku_id, row_key)
);

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
, skus_new INTEGER NOT NULL DEFAULT 0, skus_changed INTEGER NOT NULL DEFAULT 0, skus_repolled INTEGER NOT NULL DEFAULT 0, skus_retried INTEGER NOT NULL DEFAULT 0, skus_reverified INTEGER NOT NULL DEFAULT 0, requests_by_status TEXT NOT NULL DEFAULT '{}', request_budget INTEGER);

CREATE TABLE workspace (
  id          TEXT PRIMARY KEY,          -- workspace.id
  name        TEXT NOT NULL,             -- workspace.name
  scope       TEXT,                      -- scope ("read")
  checked_at  TEXT NOT NULL              -- when a run last confirmed the key still points here
);

CREATE INDEX history_location_time ON history(location_id, occurred_at);

CREATE INDEX history_sku_time ON history(sku_id, occurred_at);

CREATE INDEX locations_parent ON locations(parent_id);

CREATE INDEX sku_sync_fetched_at ON sku_sync(fetched_at);

CREATE INDEX sku_sync_pending ON sku_sync(pending_walk_id) WHERE pending_walk_id IS NOT NULL;

CREATE INDEX slq_location ON sku_location_quantities(location_id);

CREATE INDEX sync_journal_run ON sync_journal(run_id);

CREATE VIEW stock_by_location AS
SELECT q.sku_id,
       q.location_id,
       l.display_path,
       q.quantity,
       q.freshness_status,
       CASE WHEN q.freshness_status = 'clean' THEN 0 ELSE 1 END AS scan_not_reflected
FROM sku_location_quantities q
JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
LEFT JOIN locations l ON l.id = q.location_id
WHERE l.deleted_at IS NULL;

PRAGMA user_version = 2;
