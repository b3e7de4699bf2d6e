-- inventory-mirror PostgreSQL catalog, migration 1 (schema inventory_mirror).
-- One row per workspace published into this database: which schema holds it and which point
-- of its SQLite mirror that schema shows. Forward-only: never edit a released migration.
-- The cross-workspace views (inventory_mirror.stock_by_location, ...) are not migrations: the
-- publisher rebuilds them from this table whenever it publishes (src/publish/cross-views.ts).
CREATE TABLE workspaces (
  id                text PRIMARY KEY,          -- the workspace id (the mirror's workspace.id)
  name              text NOT NULL,             -- the workspace name, as last published
  schema_name       text NOT NULL UNIQUE,      -- the schema holding its tables and views
  schema_version    integer NOT NULL,          -- the workspace migration that schema is at
  published_at      timestamptz NOT NULL,      -- when the last publish committed
  mirror_run_id     bigint,                    -- the mirror's last finished sync run included (sync_runs.id)
  feed_sequence     bigint,                    -- the change feed's latest sequence number included; NULL for a mirror without a feed
  load_kind         text NOT NULL              -- how the last publish loaded it: 'bulk' (COPY of every table)
);
