/**
 * The daemon's continuous publish (publish.postgres.enabled): after each run that committed,
 * the same `publishToPostgres` as `publish --postgres`, in-process. The first time it loads in
 * bulk, then it follows the change feed (src/publish/). PostgreSQL being down, slow or refusing
 * never stops the mirror: the failure is logged (its message scrubbed of the connection
 * string, which is never logged), counted, and the next run's publish tries again from the
 * seq PostgreSQL recorded; the feed keeps what it has not confirmed (a registered consumer).
 */
import type { ResolvedConfig } from "../core/config.js";
import type { Logger } from "../core/logger.js";
import { redactSecrets, type Secret } from "../core/secret.js";
import { publishToPostgres, type PublishOptions, type PublishReport } from "../publish/publish.js";
import type { DaemonMetrics } from "./metrics.js";

/** What the daemon calls to publish: `publishToPostgres` or a test double. */
export type PublishFunction = (opts: PublishOptions) => Promise<PublishReport>;

export interface ContinuousPublisherOptions {
  config: ResolvedConfig;
  url: Secret;
  logger: Logger;
  metrics: DaemonMetrics;
  publish?: PublishFunction;
}

export class ContinuousPublisher {
  private readonly publish: PublishFunction;

  constructor(private readonly o: ContinuousPublisherOptions) {
    this.publish = o.publish ?? publishToPostgres;
  }

  /**
   * Publishes the mirror's current point; never throws. Returns the report, or null when it failed.
   * `signal` (the daemon stopping) ends a publish that follows the feed between two batches.
   */
  async afterRun(runId: number | null, signal?: AbortSignal): Promise<PublishReport | null> {
    const { config, logger, metrics } = this.o;
    const started = Date.now();
    try {
      const r = await this.publish({ dbPath: config.db, url: this.o.url, schema: config.publish.postgres.schema, batchChanges: config.publish.postgres.batchChanges, signal });
      metrics.publish.observe(r, Date.now());
      const fields = { runId, schema: r.schema, load: r.load, feedSequence: r.feedSequence, changes: r.changes, batches: r.batches, rows: r.rows, ms: r.ms, confirmed: r.confirmed };
      if (r.load === "bulk") logger.info({ ...fields, reason: r.bulkReason }, `published into PostgreSQL in bulk (${r.bulkReason})`);
      else logger.info(fields, `published ${r.changes} changes into PostgreSQL`);
      return r;
    } catch (err) {
      metrics.publish.observe(null, Date.now());
      const e = err as { message?: string; sqlState?: string | null };
      const message = redactSecrets(e?.message ?? String(err));
      logger.error({ runId, sqlState: e?.sqlState ?? null, ms: Date.now() - started, error: message }, `publish into PostgreSQL failed: ${message}; the mirror goes on, the next run publishes again`);
      return null;
    }
  }
}
