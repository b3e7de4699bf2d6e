/**
 * Following the change feed into PostgreSQL, exactly once: the changes after the seq recorded in
 * `inventory_mirror.workspaces.feed_sequence`, in batches, each batch applied (apply-change.ts)
 * and the new seq recorded in ONE transaction. The seq is read under the schema's advisory lock
 * and the row's lock in that same transaction, so a publisher killed at any point leaves
 * PostgreSQL at the end of the last committed batch with the seq that says so, and the next
 * one (or another publisher running at once) resumes exactly there: nothing lost, nothing
 * applied twice. The batch that reaches the snapshot's point also brings what the feed does not
 * carry (unfed.ts), so the schema then equals the snapshot row by row.
 */
import pg from "pg";
import type { ClientBase } from "pg";
import type { ContractSnapshot } from "../store/contract-rows.js";
import { type ApplyContext, applyChange, FeedDivergence } from "./apply-change.js";
import { readPublishedState, recordFeedPoint } from "./catalog.js";
import { schemaLockKey } from "./migrations.js";
import { catchUpUnfed } from "./unfed.js";

export interface FollowOptions {
  schema: string;
  workspaceId: string;
  /** Most changes per transaction. */
  batchChanges: number;
  /** Hears each committed batch: its last seq and how many changes it held. */
  onBatch?: (b: { seq: number; changes: number }) => void;
  /** Once aborted, no further batch starts (PostgreSQL stays at the last one committed: a resumable point). */
  signal?: AbortSignal;
}

export interface FollowResult {
  /** The seq PostgreSQL held before, and holds now. */
  fromSequence: number;
  toSequence: number;
  changes: number;
  batches: number;
  /** Rows whose bookkeeping columns (first/last seen, misses, fetched_at) were brought up to date. */
  bookkeepingRows: number;
  /** Milliseconds spent applying the changes, and bringing up what the feed does not carry (unfed.ts). */
  applyMs: number;
  unfedMs: number;
}

async function tableColumns(client: ClientBase, schema: string): Promise<Map<string, Set<string>>> {
  const { rows } = await client.query<{ t: string; c: string }>("SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = $1", [schema]);
  const out = new Map<string, Set<string>>();
  for (const r of rows) out.set(r.t, (out.get(r.t) ?? new Set()).add(r.c));
  return out;
}

/** Opens a batch's transaction and returns the seq PostgreSQL holds, read under its locks. */
async function beginBatch(client: ClientBase, o: FollowOptions): Promise<number> {
  await client.query("BEGIN");
  await client.query(`SET LOCAL search_path TO ${pg.escapeIdentifier(o.schema)}`);
  await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [schemaLockKey(o.schema)]);
  const state = await readPublishedState(client, o.workspaceId, true);
  if (state?.feedSequence == null || state.schemaName !== o.schema) throw new FeedDivergence(`workspace ${o.workspaceId} has no feed sequence in schema ${o.schema} any more`);
  return state.feedSequence;
}

/** Applies the feed from PostgreSQL's seq up to the snapshot's point. The caller rolls back on a throw. */
export async function followFeed(client: ClientBase, snapshot: ContractSnapshot, o: FollowOptions): Promise<FollowResult> {
  const target = snapshot.point.feedSequence ?? 0;
  const ctx: ApplyContext = { columns: await tableColumns(client, o.schema), historyRowid: (s, k, d) => snapshot.historyRowid(s, k, d) };
  const result: FollowResult = { fromSequence: -1, toSequence: -1, changes: 0, batches: 0, bookkeepingRows: 0, applyMs: 0, unfedMs: 0 };
  for (;;) {
    if (o.signal?.aborted && result.fromSequence >= 0) return result;
    const at = await beginBatch(client, o);
    if (result.fromSequence < 0) result.fromSequence = at;
    if (at > target) {
      // Another publisher got further meanwhile (from a newer snapshot): nothing of ours to add.
      await client.query("ROLLBACK");
      return { ...result, toSequence: at };
    }
    const batch = snapshot.changesAfter(at, o.batchChanges);
    if (batch.length === 0 && at < target) throw new FeedDivergence(`the mirror's feed has no change after ${at} (its point is ${target})`);
    const t0 = Date.now();
    for (const c of batch) await applyChange(client, ctx, c);
    const reached = batch.length ? batch[batch.length - 1]!.seq : at;
    const last = reached >= target;
    const t1 = Date.now();
    if (last) result.bookkeepingRows = await catchUpUnfed(client, snapshot);
    result.applyMs += t1 - t0;
    result.unfedMs += Date.now() - t1;
    await recordFeedPoint(client, o.workspaceId, reached, last ? snapshot.point.lastFinishedRunId : null);
    await client.query("COMMIT");
    result.toSequence = reached;
    if (batch.length) {
      result.changes += batch.length;
      result.batches++;
      o.onBatch?.({ seq: reached, changes: batch.length });
    }
    if (last) return { ...result, toSequence: reached };
  }
}
