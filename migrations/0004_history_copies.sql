-- inventory-mirror schema, migration 4: history is a multiset.
-- Two history rows can be identical in every field (one event with two equal lines: one
-- eventId, one occurredAt, two rows of 17 at the same leaf), and both count: the leaf's
-- quantity only replays from its history with every copy. Until now a row's identity was
-- the hash of its fields alone, so the second copy was dropped. The identity becomes
-- (sku_id, row_key, dup_index): dup_index is the copy's ordinal (0, 1, ...) among the rows
-- of that SKU identical to it, counted in the server's order of one fetch, so a rerun, a
-- resumed run or an incremental walk that sees the same copies again adds nothing, and a
-- walk that sees one more copy than is stored adds exactly that one (src/store/store.ts).
--
-- SQLite cannot change a primary key in place: the table is rebuilt, rowids kept (within
-- one run the rowid is the server's order, which replay and history_timeline use).
-- Existing rows become copy 0; a database written before this migration gains the missing
-- copies when each SKU's whole history is next walked (README, "Upgrading").
-- legacy_alter_table: the rename must not rewrite (or re-check) the views that name the table.
PRAGMA legacy_alter_table = ON;

CREATE TABLE history_copies (
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

INSERT INTO history_copies (rowid, sku_id, row_key, dup_index, kind, occurred_at, direction, quantity, location_id,
    location_name, location_code, event_id, event_type_code, event_type_name, set_session_id, set_type_code,
    observed_quantity, note, first_seen_run_id)
  SELECT rowid, sku_id, row_key, 0, kind, occurred_at, direction, quantity, location_id,
    location_name, location_code, event_id, event_type_code, event_type_name, set_session_id, set_type_code,
    observed_quantity, note, first_seen_run_id
  FROM history ORDER BY rowid;

DROP TABLE history;
ALTER TABLE history_copies RENAME TO history;
PRAGMA legacy_alter_table = OFF;

-- The same indexes as before, by the same definitions (store.ts HISTORY_INDEXES compares the text).
CREATE INDEX history_sku_time ON history(sku_id, occurred_at);
CREATE INDEX history_location_time ON history(location_id, occurred_at);
CREATE INDEX history_sku_location_time ON history(sku_id, location_id, occurred_at);
CREATE INDEX history_time ON history(occurred_at);
