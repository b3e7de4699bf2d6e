-- inventory-mirror schema, migration 2: what each run decided and why (incremental sync, request budgets).
ALTER TABLE sync_runs ADD COLUMN skus_new INTEGER NOT NULL DEFAULT 0;         -- queued: never fetched before
ALTER TABLE sync_runs ADD COLUMN skus_changed INTEGER NOT NULL DEFAULT 0;     -- queued: the list showed a change
ALTER TABLE sync_runs ADD COLUMN skus_repolled INTEGER NOT NULL DEFAULT 0;    -- queued: stored freshness was not clean
ALTER TABLE sync_runs ADD COLUMN skus_retried INTEGER NOT NULL DEFAULT 0;     -- queued: failed or left over by an earlier run
ALTER TABLE sync_runs ADD COLUMN skus_reverified INTEGER NOT NULL DEFAULT 0;  -- queued: rotating re-verification (verified longest ago)
ALTER TABLE sync_runs ADD COLUMN requests_by_status TEXT NOT NULL DEFAULT '{}'; -- JSON: HTTP status (or error kind) -> count
ALTER TABLE sync_runs ADD COLUMN request_budget INTEGER;                      -- --max-requests for this run, NULL = none
-- Rotating re-verification picks the SKUs fetched longest ago.
CREATE INDEX sku_sync_fetched_at ON sku_sync(fetched_at);
