-- inventory-mirror schema, migration 6: what a run learned of the server's quota, for the next run.
-- A run that meets the quota learns its rate from 429s (src/scheduler/rate-control.ts): the first
-- refusal, a pause the server names, a ramp, a probe or two. A daemon's incremental cycle is a few
-- dozen requests, and finding the quota afresh each time cost every cycle its first 429s (4-6 % of
-- its requests, over the 2 % the quota allows us). The run that learned a steady rate keeps it here;
-- the next run against the same server, within an hour, starts at it (src/sync/sync.ts).
-- One row per server (origin and path prefix: never a key, the config refuses credentials in a URL).
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
