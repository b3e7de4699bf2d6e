/**
 * `publish --postgres`, one shot: the mirror's contract tables into the workspace's schema of a
 * PostgreSQL database, in bulk, in one transaction that also records which point of the mirror
 * it loaded (catalog.ts). Reads one consistent snapshot of the mirror (store/contract-rows.ts)
 * and never writes to it.
 */
import pg from "pg";
import type { ClientBase } from "pg";
import { PublishError } from "../core/errors.js";
import type { Secret } from "../core/secret.js";
import { openContractSnapshot } from "../store/contract-rows.js";
import { bulkLoad, type TableLoad } from "./bulk-load.js";
import { CATALOG_SCHEMA, checkSchemaOwner, dropCrossViews, rebuildCrossViews, recordPublishedPoint } from "./catalog.js";
import { migrateSchema, schemaLockKey } from "./migrations.js";
import { asPublishError } from "./pg-error.js";
import { chooseSchemaName } from "./schema-name.js";

/** How the publisher names itself to PostgreSQL (pg_stat_activity.application_name). */
export const PUBLISHER_APPLICATION_NAME = "inventory-mirror publish";

export interface PublishOptions {
  dbPath: string;
  url: Secret;
  /** publish.postgres.schema; null = derived from the workspace id. */
  schema: string | null;
  onTable?: (t: TableLoad) => void;
}

export interface PublishReport {
  workspaceId: string;
  schema: string;
  schemaVersion: number;
  mirrorRunId: number | null;
  feedSequence: number | null;
  tables: TableLoad[];
  rows: number;
  ms: number;
}

async function connect(url: Secret): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url.reveal(), application_name: PUBLISHER_APPLICATION_NAME });
  // An error on an idle connection is reported by the query that needs it; do not crash on the event.
  client.on("error", () => {});
  await client.connect();
  return client;
}

async function lock(client: ClientBase, schema: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [schemaLockKey(schema)]);
}

export async function publishToPostgres(opts: PublishOptions): Promise<PublishReport> {
  const started = Date.now();
  const snapshot = openContractSnapshot(opts.dbPath);
  let client: pg.Client | null = null;
  try {
    const { workspaceId, workspaceName, lastFinishedRunId, feedSequence } = snapshot.point;
    if (!workspaceId) throw new PublishError(`${opts.dbPath} holds no workspace yet; run 'inventory-mirror sync --full' first`);
    const schema = chooseSchemaName(opts.schema, workspaceId);
    client = await connect(opts.url);
    const c = client;
    await migrateSchema(c, CATALOG_SCHEMA, "catalog");
    await checkSchemaOwner(c, workspaceId, schema);
    const { to: schemaVersion } = await migrateSchema(c, schema, "workspace", async () => {
      await lock(c, CATALOG_SCHEMA);
      await dropCrossViews(c);
    });
    await c.query("BEGIN");
    await lock(c, schema);
    const tables = await bulkLoad(c, schema, snapshot, opts.onTable);
    await lock(c, CATALOG_SCHEMA);
    await checkSchemaOwner(c, workspaceId, schema);
    await recordPublishedPoint(c, {
      workspaceId,
      workspaceName: workspaceName ?? workspaceId,
      schemaName: schema,
      schemaVersion,
      mirrorRunId: lastFinishedRunId,
      feedSequence,
      loadKind: "bulk",
    });
    await rebuildCrossViews(c, schemaVersion);
    await c.query("COMMIT");
    const rows = tables.reduce((n, t) => n + t.rows, 0);
    return { workspaceId, schema, schemaVersion, mirrorRunId: lastFinishedRunId, feedSequence, tables, rows, ms: Date.now() - started };
  } catch (err) {
    if (client) await client.query("ROLLBACK").catch(() => {});
    throw asPublishError(err);
  } finally {
    snapshot.close();
    await client?.end().catch(() => {});
  }
}
