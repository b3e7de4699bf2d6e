/**
 * The shared schema of a PostgreSQL database that holds many workspaces: `inventory_mirror`,
 * with the `workspaces` table (pg-migrations/catalog) and the cross-workspace views. Each
 * cross-workspace view has the name of a BI view (stock_by_location, ...) and is the union of
 * that view over every published workspace, with a `workspace_id` column first; the publisher
 * rebuilds them in the transaction that registers a workspace, so they always name exactly the
 * schemas in `workspaces`.
 */
import pg from "pg";
import type { ClientBase } from "pg";
import { PublishError } from "../core/errors.js";

export const CATALOG_SCHEMA = "inventory_mirror";

/** The BI views of a workspace schema (pg-migrations/workspace), each unioned across workspaces. */
const BI_VIEWS = ["stock_by_location", "stock_by_root", "stock_by_section", "stock_not_reflected", "history_timeline"] as const;

const catalog = pg.escapeIdentifier(CATALOG_SCHEMA);

/**
 * Refuses a publish that would mix two workspaces: the schema already holds another workspace,
 * or this workspace is already published in another schema. Read inside the publish's
 * transaction, after its catalog lock.
 */
export async function checkSchemaOwner(client: ClientBase, workspaceId: string, schema: string): Promise<void> {
  const { rows } = await client.query<{ id: string; schema_name: string }>(`SELECT id, schema_name FROM ${catalog}.workspaces WHERE id = $1 OR schema_name = $2`, [workspaceId, schema]);
  for (const r of rows) {
    if (r.schema_name === schema && r.id !== workspaceId) {
      throw new PublishError(`PostgreSQL schema ${schema} already holds workspace ${r.id}; publish workspace ${workspaceId} into another schema (publish.postgres.schema)`);
    }
    if (r.id === workspaceId && r.schema_name !== schema) {
      throw new PublishError(`workspace ${workspaceId} is already published in schema ${r.schema_name}; set publish.postgres.schema to "${r.schema_name}" or drop that schema first`);
    }
  }
}

/** The point of the mirror a publish loaded, recorded with it. */
export interface PublishedPoint {
  workspaceId: string;
  workspaceName: string;
  schemaName: string;
  schemaVersion: number;
  mirrorRunId: number | null;
  /** The change feed's sequence number loaded; null while the mirror has no feed. */
  feedSequence: number | null;
  loadKind: "bulk";
}

/** What PostgreSQL says it holds of a workspace (null: never published into this database). */
export interface PublishedState {
  schemaName: string;
  schemaVersion: number;
  feedSequence: number | null;
}

/** The workspace's row of `workspaces`; `forUpdate` locks it for the caller's transaction. */
export async function readPublishedState(client: ClientBase, workspaceId: string, forUpdate = false): Promise<PublishedState | null> {
  const { rows } = await client.query<{ schema_name: string; schema_version: number; feed_sequence: string | number | null }>(
    `SELECT schema_name, schema_version, feed_sequence FROM ${catalog}.workspaces WHERE id = $1${forUpdate ? " FOR UPDATE" : ""}`,
    [workspaceId],
  );
  const r = rows[0];
  return r ? { schemaName: r.schema_name, schemaVersion: Number(r.schema_version), feedSequence: r.feed_sequence === null ? null : Number(r.feed_sequence) } : null;
}

/**
 * A batch of the feed applied: its last seq recorded in the batch's transaction (so a kill
 * leaves PostgreSQL at a batch boundary, with the seq that says which). `mirrorRunId` only on
 * the batch that reaches the snapshot's point (null keeps the one recorded).
 */
export async function recordFeedPoint(client: ClientBase, workspaceId: string, feedSequence: number, mirrorRunId: number | null): Promise<void> {
  await client.query(`UPDATE ${catalog}.workspaces SET feed_sequence = $2, published_at = now(), load_kind = 'feed', mirror_run_id = coalesce($3, mirror_run_id) WHERE id = $1`, [
    workspaceId,
    feedSequence,
    mirrorRunId,
  ]);
}

export async function recordPublishedPoint(client: ClientBase, p: PublishedPoint): Promise<void> {
  await client.query(
    `INSERT INTO ${catalog}.workspaces (id, name, schema_name, schema_version, published_at, mirror_run_id, feed_sequence, load_kind)
     VALUES ($1, $2, $3, $4, now(), $5, $6, $7)
     ON CONFLICT (id) DO UPDATE SET name = excluded.name, schema_name = excluded.schema_name, schema_version = excluded.schema_version,
       published_at = excluded.published_at, mirror_run_id = excluded.mirror_run_id, feed_sequence = excluded.feed_sequence,
       load_kind = excluded.load_kind`,
    [p.workspaceId, p.workspaceName, p.schemaName, p.schemaVersion, p.mirrorRunId, p.feedSequence, p.loadKind],
  );
}

/** Drops the cross-workspace views (before a workspace schema's views change; rebuilt afterwards). */
export async function dropCrossViews(client: ClientBase): Promise<void> {
  for (const v of BI_VIEWS) await client.query(`DROP VIEW IF EXISTS ${catalog}.${pg.escapeIdentifier(v)}`);
}

/**
 * Rebuilds every cross-workspace view over the workspaces at `schemaVersion` (a workspace schema
 * still at an older version is left out until its next publish migrates it, since its views may
 * have other columns).
 */
export async function rebuildCrossViews(client: ClientBase, schemaVersion: number): Promise<void> {
  const { rows } = await client.query<{ id: string; schema_name: string }>(`SELECT id, schema_name FROM ${catalog}.workspaces WHERE schema_version = $1 ORDER BY id`, [schemaVersion]);
  await dropCrossViews(client);
  if (rows.length === 0) return;
  for (const v of BI_VIEWS) {
    const parts = rows.map((r) => `SELECT ${pg.escapeLiteral(r.id)}::text AS workspace_id, v.* FROM ${pg.escapeIdentifier(r.schema_name)}.${pg.escapeIdentifier(v)} v`);
    await client.query(`CREATE VIEW ${catalog}.${pg.escapeIdentifier(v)} AS ${parts.join("\nUNION ALL\n")}`);
  }
}
