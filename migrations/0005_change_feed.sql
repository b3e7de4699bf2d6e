-- inventory-mirror schema, migration 5: the change feed (an outbox).
-- Every unit of work that changes the mirror (the locations tree, a list page, one SKU's
-- detail + history, the end of a walk) appends what it changed here, in its own
-- transaction, so a consumer that reads the feed in seq order sees every change once
-- the transaction that made it has committed, in commit order, and never a gap
-- (src/store/outbox.ts; the shapes are documented in docs/schema.md, "The change feed").
-- AUTOINCREMENT: a seq is never reused, even after the newest rows are pruned.
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

CREATE INDEX changes_at ON changes(at);

-- Consumers of the feed that retention must wait for (the PostgreSQL publisher): the outbox
-- is never pruned past the lowest confirmed seq of a registered consumer.
CREATE TABLE feed_consumers (
  name          TEXT PRIMARY KEY,
  confirmed_seq INTEGER NOT NULL DEFAULT 0, -- every change with seq <= this has been handled
  registered_at TEXT NOT NULL,
  confirmed_at  TEXT
);
