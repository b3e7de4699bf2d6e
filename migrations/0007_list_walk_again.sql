-- inventory-mirror schema, migration 7: the list's walk again outlives the run that decided it.
-- When the workspace's SKU count moved under a list walk (a server paging by offset skips a SKU when
-- one ahead of its position is removed), the list is walked once more (src/sync/list-walk.ts). That
-- decision is stored with the walk's last page, so a run stopped during the walk again (kill -9, a
-- request budget) leaves it to the run that resumes the walk, instead of ending without the SKU.
ALTER TABLE sync_runs ADD COLUMN list_walk_again INTEGER NOT NULL DEFAULT 0;  -- 1: walk the list once more (its count moved under the walk); 0 when done
