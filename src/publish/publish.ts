/**
 * `publish --postgres` (one shot) and the daemon's continuous publish: the mirror into the
 * workspace's schema of a PostgreSQL database. The first publish loads every contract table in
 * bulk (bulk-load.ts) in one transaction that records the point of the mirror it loaded
 * (catalog.ts); every later one follows the change feed from the seq PostgreSQL records
 * (follow.ts), batch by batch, each batch with its seq in one transaction. It loads in bulk
 * again when the schema is new or was migrated, when the outbox was pruned past that seq, or
 * when PostgreSQL no longer holds what the feed starts from. Reads one consistent snapshot of
 * the mirror (store/contract-rows.ts); its only write to the mirror is the feed consumer's
 * row (store/outbox.ts, markFeedConsumer), so retention never prunes what PostgreSQL lacks.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import type { ClientBase } from "pg";
import { DEFAULTS } from "../core/defaults.js";
import { PublishError } from "../core/errors.js";
import type { Secret } from "../core/secret.js";
import { type ContractSnapshot, openContractSnapshot } from "../store/contract-rows.js";
import { markFeedConsumer } from "../store/outbox.js";
import { FeedDivergence } from "./apply-change.js";
import { bulkLoad, type TableLoad } from "./bulk-load.js";
import { CATALOG_SCHEMA, checkSchemaOwner, dropCrossViews, type PublishedState, readPublishedState, rebuildCrossViews, recordPublishedPoint } from "./catalog.js";
import { followFeed } from "./follow.js";
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
  /** Most changes of the feed per PostgreSQL transaction (default DEFAULTS.publishBatchChanges). */
  batchChanges?: number;
  /** Load in bulk even when the feed could be followed. */
  bulk?: boolean;
  onTable?: (t: TableLoad) => void;
  onBatch?: (b: { seq: number; changes: number }) => void;
  /** Stops following the feed between two batches (the daemon stopping); PostgreSQL keeps what committed. */
  signal?: AbortSignal;
}

export interface PublishReport {
  workspaceId: string;
  schema: string;
  schemaVersion: number;
  /** How this publish brought PostgreSQL to the mirror's point: every table in bulk, or the feed's changes. */
  load: "bulk" | "feed";
  /** Why it loaded in bulk (null when it followed the feed). */
  bulkReason: string | null;
  mirrorRunId: number | null;
  /** The feed's seq PostgreSQL holds now (null for a mirror without a feed). */
  feedSequence: number | null;
  /** Following the feed: the seq it started from, the changes applied and in how many transactions. */
  fromSequence: number | null;
  changes: number;
  batches: number;
  /** Following the feed: rows whose bookkeeping columns (last seen, fetched at, ...) were brought up to date. */
  bookkeepingRows: number;
  /** Following the feed: ms applying its changes, and bringing up what it does not carry (bookkeeping, ancestors, snapshots). */
  applyMs: number;
  unfedMs: number;
  /** The bulk load's tables (empty when it followed the feed) and their rows. */
  tables: TableLoad[];
  rows: number;
  /** The feed consumer this publisher confirms as (feed_consumers), and whether this publish confirmed its seq there. */
  consumer: string;
  confirmed: boolean;
  ms: number;
}

async function connect(url: Secret): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url.reveal(), application_name: PUBLISHER_APPLICATION_NAME, connectionTimeoutMillis: DEFAULTS.publishConnectTimeoutMs });
  // An error on an idle connection is reported by the query that needs it; do not crash on the event.
  client.on("error", () => {});
  await client.connect();
  return client;
}

async function lock(client: ClientBase, schema: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [schemaLockKey(schema)]);
}

/**
 * The feed consumer's name: the schema, and which database (a hash of host, port and database
 * name: never the password, and not readable as an address), so publishers of one mirror into
 * two databases confirm each for itself even with the same schema name.
 */
function consumerName(url: Secret, schema: string): string {
  let where = "";
  try {
    const u = new URL(url.reveal());
    where = `${u.hostname}:${u.port}${u.pathname}`;
  } catch {
    where = "";
  }
  return `postgres:${schema}@${createHash("sha256").update(where).digest("hex").slice(0, 12)}`;
}

/** Why this publish must load in bulk, or null when it can follow the feed. */
function bulkReason(snapshot: ContractSnapshot, state: PublishedState | null, migrated: { from: number; to: number }, forced: boolean): string | null {
  const point = snapshot.point.feedSequence;
  if (forced) return "asked for (--bulk)";
  if (!state) return "first publish of this workspace into this database";
  if (migrated.from !== migrated.to) return `schema ${migrated.from === 0 ? "created" : `migrated from version ${migrated.from} to ${migrated.to}`}`;
  if (state.schemaVersion !== migrated.to) return `schema version recorded ${state.schemaVersion}, now ${migrated.to}`;
  if (point === null) return "the mirror has no change feed (run a sync to upgrade it)";
  if (state.feedSequence === null) return "PostgreSQL records no feed sequence for this workspace";
  if (state.feedSequence > point) return `PostgreSQL is at feed sequence ${state.feedSequence}, past the mirror's ${point} (another mirror file?)`;
  if (snapshot.feedGapAfter(state.feedSequence)) return `the change feed was pruned past sequence ${state.feedSequence}`;
  return null;
}

interface Loaded {
  tables: TableLoad[];
  feedSequence: number | null;
}

async function loadInBulk(c: ClientBase, snapshot: ContractSnapshot, schema: string, schemaVersion: number, onTable?: (t: TableLoad) => void): Promise<Loaded> {
  const { workspaceId, workspaceName, lastFinishedRunId, feedSequence } = snapshot.point;
  await c.query("BEGIN");
  await lock(c, schema);
  const tables = await bulkLoad(c, schema, snapshot, onTable);
  await lock(c, CATALOG_SCHEMA);
  await checkSchemaOwner(c, workspaceId!, schema);
  await recordPublishedPoint(c, {
    workspaceId: workspaceId!,
    workspaceName: workspaceName ?? workspaceId!,
    schemaName: schema,
    schemaVersion,
    mirrorRunId: lastFinishedRunId,
    feedSequence,
    loadKind: "bulk",
  });
  await rebuildCrossViews(c, schemaVersion);
  await c.query("COMMIT");
  return { tables, feedSequence };
}

async function prepareSchemas(c: ClientBase, workspaceId: string, schema: string): Promise<{ from: number; to: number }> {
  await migrateSchema(c, CATALOG_SCHEMA, "catalog");
  await checkSchemaOwner(c, workspaceId, schema);
  return migrateSchema(c, schema, "workspace", async () => {
    await lock(c, CATALOG_SCHEMA);
    await dropCrossViews(c);
  });
}

/** Publishes the mirror's current point; see the module comment for bulk or feed. */
export async function publishToPostgres(opts: PublishOptions): Promise<PublishReport> {
  const started = Date.now();
  const snapshot = openContractSnapshot(opts.dbPath);
  let client: pg.Client | null = null;
  try {
    const { workspaceId, lastFinishedRunId } = snapshot.point;
    if (!workspaceId) throw new PublishError(`${opts.dbPath} holds no workspace yet; run 'inventory-mirror sync --full' first`);
    const schema = chooseSchemaName(opts.schema, workspaceId);
    const consumer = consumerName(opts.url, schema);
    // Registered before anything is read from the feed: from here on retention keeps what this publisher has not confirmed.
    markFeedConsumer(opts.dbPath, consumer, null, DEFAULTS.publishConfirmBusyMs);
    client = await connect(opts.url);
    const c = client;
    const migrated = await prepareSchemas(c, workspaceId, schema);
    let reason = bulkReason(snapshot, await readPublishedState(c, workspaceId), migrated, opts.bulk === true);
    const report: PublishReport = {
      ...{ workspaceId, schema, schemaVersion: migrated.to, load: "feed", bulkReason: null, mirrorRunId: lastFinishedRunId, feedSequence: null },
      ...{ fromSequence: null, changes: 0, batches: 0, bookkeepingRows: 0, applyMs: 0, unfedMs: 0, tables: [], rows: 0, consumer, confirmed: false, ms: 0 },
    };
    if (!reason) {
      try {
        const f = await followFeed(c, snapshot, { schema, workspaceId, batchChanges: opts.batchChanges ?? DEFAULTS.publishBatchChanges, onBatch: opts.onBatch, signal: opts.signal });
        const { toSequence, fromSequence, changes, batches, bookkeepingRows, applyMs, unfedMs } = f;
        Object.assign(report, { feedSequence: toSequence, fromSequence, changes, batches, bookkeepingRows, applyMs, unfedMs });
      } catch (err) {
        if (!(err instanceof FeedDivergence)) throw err;
        await c.query("ROLLBACK");
        reason = `PostgreSQL does not match the feed (${err.message})`;
      }
    }
    if (reason) {
      const bulk = await loadInBulk(c, snapshot, schema, migrated.to, opts.onTable);
      Object.assign(report, { load: "bulk", bulkReason: reason, feedSequence: bulk.feedSequence, tables: bulk.tables, rows: bulk.tables.reduce((n, t) => n + t.rows, 0) });
    }
    // Only after PostgreSQL committed: confirming less than it holds is safe, more is not.
    if (report.feedSequence !== null) report.confirmed = markFeedConsumer(opts.dbPath, consumer, report.feedSequence, DEFAULTS.publishConfirmBusyMs);
    return { ...report, ms: Date.now() - started };
  } catch (err) {
    if (client) await client.query("ROLLBACK").catch(() => {});
    throw asPublishError(err);
  } finally {
    snapshot.close();
    await client?.end().catch(() => {});
  }
}
