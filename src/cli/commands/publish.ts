/**
 * `inventory-mirror publish --postgres`: one shot, the mirror's contract tables and BI views into
 * the workspace's schema of a PostgreSQL database (src/publish/): in bulk the first time, then
 * by the change feed. The connection string comes from INVENTORY_PG_URL or
 * INVENTORY_PG_URL_FILE only and is never printed.
 */
import { loadConfig } from "../../core/config.js";
import { ConfigError } from "../../core/errors.js";
import { createLogger } from "../../core/logger.js";
import { loadPostgresUrl } from "../../core/pg-url.js";
import { forTerminal } from "../../core/terminal.js";
import { publishToPostgres, type PublishReport } from "../../publish/publish.js";
import { flagsFrom } from "../common.js";
import type { CliValues } from "../options.js";

export default async function publish(v: CliValues): Promise<number> {
  if (!v.postgres) throw new ConfigError("publish needs a target: --postgres (the only one so far)");
  const config = loadConfig(flagsFrom(v));
  const logger = createLogger(config.logLevel);
  const url = loadPostgresUrl(process.env, (msg) => logger.warn(msg));
  const schema = typeof v.schema === "string" ? v.schema : config.publish.postgres.schema;
  const report = await publishToPostgres({
    dbPath: config.db,
    url,
    schema,
    bulk: v.bulk === true,
    batchChanges: config.publish.postgres.batchChanges,
    onTable: (t) => logger.info({ table: t.table, rows: t.rows, ms: t.ms }, "table loaded"),
    onBatch: (b) => logger.debug({ seq: b.seq, changes: b.changes }, "feed batch committed"),
  });
  if (!report.confirmed && report.feedSequence !== null) {
    logger.warn({ consumer: report.consumer }, "feed consumer not confirmed (the mirror was busy or read-only): retention keeps more meanwhile; the next publish confirms");
  }
  process.stdout.write((v.json ? JSON.stringify(report) : forTerminal(render(report))) + "\n");
  return 0;
}

function render(r: PublishReport): string {
  const head = `publish --postgres: workspace ${r.workspaceId} into schema ${r.schema} (schema version ${r.schemaVersion})`;
  const point = `as of mirror run ${r.mirrorRunId ?? "(none finished)"}; feed sequence ${r.feedSequence ?? "(no change feed in this mirror)"}`;
  if (r.load === "feed") {
    return [
      head,
      `followed the change feed: ${r.changes} changes in ${r.batches} batches, sequence ${r.fromSequence} -> ${r.feedSequence}; ` +
        `${r.bookkeepingRows} rows' bookkeeping updated, in ${(r.ms / 1000).toFixed(1)} s, ${point}`,
    ].join("\n");
  }
  const perSecond = r.ms > 0 ? Math.round((r.rows * 1000) / r.ms) : r.rows;
  return [
    head,
    `bulk load: ${r.bulkReason}`,
    ...r.tables.map((t) => `  ${t.table.padEnd(24)} ${String(t.rows).padStart(9)} rows  ${t.ms} ms`),
    `loaded ${r.rows} rows in ${(r.ms / 1000).toFixed(1)} s (${perSecond} rows/s), ${point}`,
  ].join("\n");
}
