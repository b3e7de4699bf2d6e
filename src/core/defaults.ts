/**
 * Every default in one place. Each has a reason; change the reason with the number.
 */
export const DEFAULTS = {
  /** Where the mirror lives unless --db / INVENTORY_DB / config.db say otherwise. */
  dbPath: "./data/inventory.db",
  /**
   * Ceiling of requests in flight (and per-SKU workers; the SKUs they hold at once follow the
   * requests allowed in flight, plus 4). The scheduler keeps fewer in flight when fewer reach the
   * rate (Little's law: rate × latency × 1.5 + 2; 4 on loopback); 32 reaches
   * 200 req/s against a server 100 ms away, or 100 req/s 200 ms away (16 capped that at 80 req/s:
   * 1.38x its least time). Not 64: behind 200 ms every request in flight when the quota runs dry
   * is a 429, and at 64 a 100 req/s bucket drew 2.5 % 429s where 32 drew 1.3 %.
   */
  concurrency: 32,
  /** The API's maximum page size for the list: fewest requests for a full walk. */
  listPageSize: 100,
  /** The API's maximum page size for history. */
  historyPageSize: 100,
  /**
   * Client-side ceiling on requests per second. null = no ceiling (only the server's
   * 429s and our adaptive rate limit us). A sidecar sharing a quota with its app may set one.
   */
  requestsPerSecond: null as number | null,
  /**
   * Learn the rate the server accepts from its 429s (decrease on a 429, recover slowly): a
   * server's quota is rarely documented, and without it every request over it costs a 429.
   */
  adaptiveRate: true,
  /** Connect timeout: a loopback or LAN server answers a SYN in far less. */
  connectTimeoutMs: 10_000,
  /** Whole-response timeout (headers + body). A 100-row page is small; 30 s means something is wrong. */
  responseTimeoutMs: 30_000,
  /** Largest response body we accept. A 100-item page is ~60 KB; this is ample and bounds memory. */
  maxResponseBytes: 8 * 1024 * 1024,
  /** Retries of one request on 503, network errors and timeouts before the request fails. */
  maxRetries: 6,
  /** Retries of 429s are not counted against maxRetries (the server told us when), but bounded overall. */
  max429Retries: 50,
  /**
   * Exponential backoff (equal jitter, retry-policy.ts) base and cap, for failures that carry no Retry-After. The
   * base is the AWS SDK's for transient errors (100 ms): a 503 burst not about quota is short, and
   * at the end of a run the last requests' backoffs are the run's tail (at 500 ms the bench's
   * 503-burst cell spent ~2.5 s waiting on them with nothing else to send).
   */
  backoffBaseMs: 100,
  backoffCapMs: 30_000,
  /**
   * An unparsable Retry-After still waits this long: no hot retry loop. So do 0 and a past date inside a fixed
   * window or once a 429 of the run named over 250 ms (scheduler.ts, NO_WAIT_UNTIL_NAMED_MS); otherwise they
   * name no wait and get our own short backoff.
   */
  minRetryAfterMs: 1_000,
  /**
   * Longest single wait we will sit through. Beyond it the run ends `partial`, journals
   * "resume after T", and the next run continues. Long enough for per-minute quotas.
   */
  maxWaitMs: 15 * 60_000,
  /**
   * The most any one Retry-After may impose: a day. A quota that resets daily still fits; a
   * server that names years (or a number no date can hold) is treated as naming this, and
   * the run journals it as suspicious, so one response cannot stop the mirror for longer.
   */
  maxServerWaitMs: 24 * 60 * 60_000,
  /**
   * A run starts at the rate the last run against the same server proved within its quota, if that
   * run learned it less than this long ago (store/runs.ts, learned_quota). A daemon's incremental
   * cycles (every 5 minutes by default) then skip finding the quota, which cost each cycle 4-6 % of its
   * requests in 429s; once an hour one cycle finds it afresh, so a quota raised since (a larger plan)
   * is found within the hour. A quota lowered since costs the run one 429, then it learns afresh.
   */
  learnedQuotaMaxAgeMs: 60 * 60_000,
  /**
   * Most history rows one SKU may have. Far beyond any real SKU's history (a busy one gains a
   * few thousand rows a year); a server that keeps returning pages past it is looping, and
   * the SKU fails for this run (journaled, retried by a later one) instead of growing memory.
   */
  maxHistoryRowsPerSku: 100_000,
  /**
   * A SKU's history past this many rows is walked by one worker at a time (walker.ts): rows
   * are held until the SKU commits, so memory stays near workers × this plus one long walk
   * (about 4 MB per 10,000 rows) instead of workers × maxHistoryRowsPerSku.
   */
  longHistoryRows: 10_000,
  /**
   * The list walk may take this many more pages than the workspace's SKU count needs
   * (summary.skuCount ÷ page size): SKUs created during the walk shift pages, but not by
   * a hundred pages; beyond it the server is looping and the walk stops.
   */
  listPageMargin: 100,
  /**
   * A run that takes longer ends `partial` (resumable) so a stuck run cannot hold the daemon
   * for every later tick: a day covers a backfill of 100,000 SKUs at 5 req/s.
   */
  maxRunMs: 24 * 60 * 60_000,
  /**
   * Connections the daemon's HTTP port keeps open at once (probes and scrapers need a few);
   * more are closed as they arrive, so nobody can take the descriptors a sync needs.
   */
  daemonMaxConnections: 64,
  /**
   * Request budget of one run. null = none: a run ends when its work is done; an operator
   * sharing a quota sets one (--max-requests, sync.maxRequests).
   */
  maxRequests: null as number | null,
  /**
   * Every SKU is re-verified (detail and complete history) within this window, catching what
   * the list cannot show. A day spreads a workspace's re-verification thinly over the runs of
   * a day (N × interval ÷ window SKUs per run) while a missed change still lands the same day.
   */
  reverifyWindowHours: 24,
  /**
   * Known history rows an incremental walk reads past the first stored row (and its ties)
   * before it stops: a row that lands late with a slightly older occurredAt is usually among
   * the newest twenty; deeper ones are caught by the quantity check and re-verification.
   */
  historyOverlapRows: 20,
  /** The daemon's incremental sync: every 5 minutes, fresh enough for stock while costing only the list pages when nothing changed. */
  scheduleIncremental: "*/5 * * * *",
  /** The daemon's full sync: nightly, at 03:17, a quiet hour, and off the hour so that many mirrors do not all start at :00. */
  scheduleFull: "17 3 * * *",
  /**
   * Where the daemon's /healthz, /readyz and /metrics listen: loopback, so nothing is exposed
   * unless asked (the image sets 0.0.0.0); 9464 is the usual port of a Prometheus exporter.
   */
  daemonListen: "127.0.0.1:9464",
  /** /readyz fails when the last successful sync is older than this: six missed 5-minute ticks. */
  readyMaxAgeSeconds: 1800,
  /** The daemon serves GET /changes only when feed.serve says so: it hands out the customer's stock. */
  feedServe: false,
  /**
   * The change feed's retention by age: a week covers a consumer down over a long weekend,
   * and the outbox of a busy workspace stays a fraction of its history table.
   */
  feedRetentionDays: 7,
  /**
   * The change feed's retention by size: beyond this many changes the oldest go (about one
   * backfill of 100,000 SKUs with their leaves and history batches, a few hundred MB at most).
   */
  feedRetentionMaxChanges: 2_000_000,
  /**
   * How long GET /changes waits for a change before answering an empty page: under the
   * 30-60 s idle timeouts of common proxies and load balancers, so a long-poll is not cut.
   */
  feedLongPollSeconds: 25,
  /**
   * How often `changes --follow` and a waiting /changes look for new changes: one indexed
   * read-only query, cheap at twice a second, and a commit shows within half a second.
   */
  feedPollIntervalMs: 500,
  /** Most changes in one /changes answer or one read of `changes` (a consumer asks again from the last seq). */
  feedPageSize: 1_000,
  /**
   * The daemon publishes into PostgreSQL only when asked (publish.postgres.enabled): `npm start`
   * and a daemon without it stay SQLite only, and need no connection string.
   */
  publishPostgresEnabled: false,
  /**
   * Most changes of the feed a publisher applies to PostgreSQL in one transaction: large
   * enough that a churn cycle of a big workspace is a handful of commits, small enough that
   * a transaction holds its row locks for well under a second.
   */
  publishBatchChanges: 1_000,
  /**
   * How long the one-shot publisher waits for SQLite's write lock to register or confirm
   * itself as a feed consumer: a sync's transactions are short (one SKU, one page); a
   * confirm skipped because the lock stayed busy is safe (retention just keeps more).
   */
  publishConfirmBusyMs: 2_000,
  /**
   * How long the publisher waits for a PostgreSQL connection: a server that is down answers
   * at once, one that is unreachable must not hold the daemon's schedule for long.
   */
  publishConnectTimeoutMs: 10_000,
  /** Share of SKUs whose fetch may fail before a run gives up as failed (not partial). */
  maxFailedShare: 0.05,
  /** Non-TTY progress line interval. */
  progressIntervalMs: 5_000,
  /** SQLite busy timeout: a BI reader's checkpoint or a second opener waits this long. */
  busyTimeoutMs: 5_000,
  /**
   * WAL cap: BI readers that overlap continuously keep SQLite's own checkpoints from
   * rewinding the WAL; the guard forces it back under this size (store/wal-guard.ts).
   */
  walCapBytes: 64 * 1024 * 1024,
  /** How often the WAL guard looks at the WAL size. */
  walCheckIntervalMs: 1_000,
  /** Log level unless --log-level / config.logLevel: a line per run and per problem, not per request. */
  logLevel: "info" as const,
} as const;

/** Path templates of the five endpoints, relative to the base URL. Journals use these (never a full URL with ids). */
export const ENDPOINTS = {
  workspace: "/v1/external/workspace",
  locations: "/v1/external/locations",
  list: "/v1/external/inventory-status",
  detail: "/v1/external/inventory-status/{skuId}",
  history: "/v1/external/inventory-status/{skuId}/history",
} as const;
export type EndpointName = keyof typeof ENDPOINTS;
