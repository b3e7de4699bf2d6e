/**
 * `inventory-mirror publish --postgres` end to end: the real CLI in a child process, mirrors
 * filled by the real CLI from the real simulator, published into a real PostgreSQL server
 * (test/helpers/postgres.ts), and compared with the SQLite mirror row by row.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { profileOptions } from "../../src/simulator/profiles.js";
import { CONTRACT_TABLES } from "../../src/store/contract-rows.js";
import { DOCUMENTED_QUERIES } from "../../src/analysis/queries.js";
import { PUBLISHER_APPLICATION_NAME } from "../../src/publish/publish.js";
import { schemaNameFor } from "../../src/publish/schema-name.js";
import { runCli, spawnCli, type CliResult } from "../helpers/cli.js";
import { startPostgres, type RunningPostgres } from "../helpers/postgres.js";
import { canonical, connect, expectTablesEqual, pgRows, type Row, sqliteRows } from "../helpers/pg-compare.js";

const KEY = "sim_e2e_publish_7d2c9b0a1e4f5a6b";

let server: RunningPostgres;
let simA: RunningSimulator;
let simB: RunningSimulator;
let dir: string;
let dbA: string;
let dbB: string;
/** Every CLI result of this file, to check none of them shows the connection string. */
const outputs: CliResult[] = [];

const syncEnv = (sim: RunningSimulator, db: string) => ({ INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db });
async function cli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const r = await runCli(args, { env });
  outputs.push(r);
  return r;
}
async function publish(db: string, url: string, extra: string[] = []): Promise<CliResult> {
  return cli(["publish", "--postgres", "--db", db, ...extra], { INVENTORY_PG_URL: url });
}

beforeAll(async () => {
  server = await startPostgres();
  console.log(`PostgreSQL test server: initdb ${server.initMs} ms, start ${server.startMs} ms`);
  // Identical history rows and long runs of ties (the document allows both) must publish as every copy.
  simA = await startSimulator({ seed: 7, skus: 150, historyDepth: 25, apiKey: KEY, ...profileOptions(["history-identical-rows", "history-ties"]) });
  simB = await startSimulator({ seed: 11, skus: 60, apiKey: KEY, workspaceName: "Second Workspace" });
  dir = mkdtempSync(join(tmpdir(), "im-publish-"));
  dbA = join(dir, "a.db");
  dbB = join(dir, "b.db");
  for (const [sim, db] of [
    [simA, dbA],
    [simB, dbB],
  ] as const) {
    const r = await cli(["sync", "--full"], syncEnv(sim, db));
    expect(r.code, r.stderr).toBe(0);
  }
});
afterAll(async () => {
  await simA?.close();
  await simB?.close();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function schemaOf(r: CliResult): string {
  return (JSON.parse(r.stdout) as { schema: string }).schema;
}

describe("publish --postgres", () => {
  it("loads a backfill's every contract table equal row by row to the SQLite mirror, and records the mirror's point", async () => {
    const url = await server.createDatabase("one");
    const r = await publish(dbA, url, ["--json"]);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { schema: string; rows: number; mirrorRunId: number; feedSequence: number | null };
    const counts = await expectTablesEqual(dbA, url, report.schema);
    console.log(`row-by-row comparison: ${JSON.stringify(counts)}`);
    expect(counts.history).toBeGreaterThan(1000);
    expect(report.rows).toBe(Object.values(counts).reduce((a, b) => a + b, 0));

    const lastRun = sqliteRows(dbA, "SELECT max(id) AS id FROM sync_runs WHERE finished_at IS NOT NULL")[0]!.id;
    const ws = sqliteRows(dbA, "SELECT id, name FROM workspace")[0]!;
    const entry = await pgRows(url, "inventory_mirror", "SELECT id, name, schema_name, mirror_run_id, feed_sequence, load_kind FROM workspaces");
    // The change feed's latest seq in the snapshot: where following the feed resumes.
    const feedSeq = sqliteRows(dbA, "SELECT max(seq) AS s FROM changes")[0]!.s as number;
    expect(feedSeq).toBeGreaterThan(0);
    expect(entry).toEqual([{ id: ws.id, name: ws.name, schema_name: report.schema, mirror_run_id: lastRun, feed_sequence: feedSeq, load_kind: "bulk" }]);
    expect(report.mirrorRunId).toBe(lastRun);
    expect(report.feedSequence).toBe(feedSeq);
    expect(report.schema).toBe(schemaNameFor(String(ws.id)));
    expect(report.schema).toMatch(/^ws_[0-9a-f_]{36}$/);

    // A second publish of the same mirror replaces the load: still equal, nothing doubled.
    const again = await publish(dbA, url);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain(`into schema ${report.schema}`);
    await expectTablesEqual(dbA, url, report.schema);
  });

  it("the BI views answer the same in both databases: every view whole, and the documented queries", async () => {
    const url = await server.createDatabase("views");
    const r = await publish(dbA, url, ["--json"]);
    expect(r.code, r.stderr).toBe(0);
    const schema = schemaOf(r);
    for (const view of ["stock_by_location", "stock_by_root", "stock_by_section", "stock_not_reflected", "history_timeline"]) {
      const lite = sqliteRows(dbA, `SELECT * FROM ${view}`);
      const pub = await pgRows(url, schema, `SELECT * FROM ${view}`);
      expect(lite.length, view).toBeGreaterThan(0);
      // seconds_*: "now" is read at a different moment by each database.
      const drop = ["seconds_not_clean", "seconds_since_replay"];
      expect(canonical(pub, drop), view).toEqual(canonical(lite, drop));
    }
    const sku = sqliteRows(dbA, "SELECT sku_id, count(*) AS n FROM history GROUP BY sku_id ORDER BY n DESC, sku_id LIMIT 1")[0]!.sku_id;
    const leaf = sqliteRows(dbA, "SELECT location_id FROM sku_location_quantities GROUP BY location_id ORDER BY count(*) DESC, location_id LIMIT 1")[0]!.location_id;
    const root = sqliteRows(dbA, "SELECT root_id FROM stock_by_root ORDER BY root_id LIMIT 1")[0]!.root_id;
    const section = sqliteRows(dbA, "SELECT section_id FROM stock_by_section ORDER BY section_id LIMIT 1")[0]!.section_id;
    const at = sqliteRows(dbA, "SELECT occurred_at FROM history WHERE sku_id = ? ORDER BY occurred_at LIMIT 1 OFFSET 10".replace("?", `'${sku}'`))[0]!.occurred_at;
    const params: Row = { sku_id: sku, location_id: leaf, root_id: root, section_id: section, at };
    const ids = ["sku-by-leaf", "sku-by-root", "sku-by-section", "leaf-contents", "root-contents", "section-contents", "root-totals", "sku-timeline", "sku-stock-as-of"];
    for (const id of ids) {
      const q = DOCUMENTED_QUERIES.find((d) => d.id === id)!;
      const lite = sqliteRows(dbA, q.sql, Object.fromEntries(Object.keys(q.params).map((k) => [k, params[k]])));
      const pub = await pgRows(url, schema, q.sql, params);
      expect(lite.length, id).toBeGreaterThan(0);
      expect(canonical(pub), id).toEqual(canonical(lite));
    }
  });

  it("two workspaces into one database stay apart, and the cross-workspace views see both", async () => {
    const url = await server.createDatabase("two");
    const a = await publish(dbA, url, ["--json"]);
    const b = await publish(dbB, url, ["--json"]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    const [schemaA, schemaB] = [schemaOf(a), schemaOf(b)];
    expect(schemaA).not.toBe(schemaB);
    await expectTablesEqual(dbA, url, schemaA);
    await expectTablesEqual(dbB, url, schemaB);

    const wsA = sqliteRows(dbA, "SELECT id FROM workspace")[0]!.id;
    const wsB = sqliteRows(dbB, "SELECT id FROM workspace")[0]!.id;
    const perWorkspace = await pgRows(url, "inventory_mirror", "SELECT workspace_id, count(*) AS n FROM stock_by_root GROUP BY workspace_id ORDER BY workspace_id");
    const expected = [
      { workspace_id: wsA, n: sqliteRows(dbA, "SELECT count(*) AS n FROM stock_by_root")[0]!.n },
      { workspace_id: wsB, n: sqliteRows(dbB, "SELECT count(*) AS n FROM stock_by_root")[0]!.n },
    ].sort((x, y) => String(x.workspace_id).localeCompare(String(y.workspace_id)));
    expect(perWorkspace).toEqual(expected);
    const registered = await pgRows(url, "inventory_mirror", "SELECT id, schema_name FROM workspaces ORDER BY id");
    expect(canonical(registered)).toEqual(
      canonical([
        { id: wsA, schema_name: schemaA },
        { id: wsB, schema_name: schemaB },
      ]),
    );

    // Workspace B into A's schema is refused, and A's tables are untouched.
    const clash = await publish(dbB, url, ["--schema", schemaA]);
    expect(clash.code).toBe(1);
    expect(clash.stderr).toContain(`schema ${schemaA} already holds workspace ${wsA}`);
    await expectTablesEqual(dbA, url, schemaA);
  });

  it("a kill -9 of the publisher mid-load leaves PostgreSQL as it was, and a rerun completes", async () => {
    const url = await server.createDatabase("kill");
    const first = await publish(dbA, url, ["--json"]);
    expect(first.code, first.stderr).toBe(0);
    const schema = schemaOf(first);
    const runBefore = (await pgRows(url, "inventory_mirror", "SELECT mirror_run_id FROM workspaces"))[0]!.mirror_run_id;
    const dumpBefore: Record<string, string[]> = {};
    for (const t of CONTRACT_TABLES) dumpBefore[t] = canonical(await pgRows(url, schema, `SELECT * FROM ${t}`));

    // The mirror moves on: another run (new run id, new snapshot rows, new last_seen_at).
    const sync = await cli(["sync"], syncEnv(simA, dbA));
    expect(sync.code, sync.stderr).toBe(0);

    // Hold the last table the publisher loads, so it is caught after loading every other one.
    const holder = await connect(url);
    await holder.query("BEGIN");
    await holder.query(`LOCK TABLE "${schema}".inventory_snapshots IN ACCESS EXCLUSIVE MODE`);
    // --bulk: this mirror could follow the feed since the first publish; this is about the bulk load.
    const child = spawnCli(["publish", "--postgres", "--bulk", "--db", dbA], { env: { INVENTORY_PG_URL: url } });
    let childExited = false;
    const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    child.on("exit", () => (childExited = true));
    let childErr = "";
    child.stderr!.on("data", (d) => (childErr += d));
    // pg_stat_activity is read by another connection: inside the holder's transaction it would be a snapshot.
    const watcher = await connect(url);
    const waitingOnLock = async () =>
      (await watcher.query("SELECT query FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE 'TRUNCATE%inventory_snapshots%'", [PUBLISHER_APPLICATION_NAME]))
        .rowCount === 1;
    while (!(await waitingOnLock())) {
      if (childExited) throw new Error(`the publisher exited before reaching the held table: ${childErr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // By now history and every other table were emptied and reloaded inside its transaction.
    child.kill("SIGKILL");
    await exited;
    await holder.query("COMMIT");
    const publisherGone = async () => (await watcher.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1", [PUBLISHER_APPLICATION_NAME])).rowCount === 0;
    while (!(await publisherGone())) await new Promise((r) => setTimeout(r, 50));
    await holder.end();
    await watcher.end();

    for (const t of CONTRACT_TABLES) expect(canonical(await pgRows(url, schema, `SELECT * FROM ${t}`)), t).toEqual(dumpBefore[t]);
    expect((await pgRows(url, "inventory_mirror", "SELECT mirror_run_id FROM workspaces"))[0]!.mirror_run_id).toBe(runBefore);

    // The rerun follows the feed from the point the killed load left recorded.
    const rerun = await publish(dbA, url, ["--json"]);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect((JSON.parse(rerun.stdout) as { load: string }).load).toBe("feed");
    await expectTablesEqual(dbA, url, schema);
    const lastRun = sqliteRows(dbA, "SELECT max(id) AS id FROM sync_runs WHERE finished_at IS NOT NULL")[0]!.id;
    expect(lastRun).toBeGreaterThan(runBefore as number);
    expect((await pgRows(url, "inventory_mirror", "SELECT mirror_run_id FROM workspaces"))[0]!.mirror_run_id).toBe(lastRun);
  });

  it("the connection string is read from INVENTORY_PG_URL_FILE, refused in the config file, and never shown", async () => {
    const url = await server.createDatabase("secret");
    const file = join(dir, "pg-url");
    writeFileSync(file, `${url}\n`, { mode: 0o600 });
    const viaFile = await cli(["publish", "--postgres", "--db", dbB, "--log-level", "debug"], { INVENTORY_PG_URL_FILE: file });
    expect(viaFile.code, viaFile.stderr).toBe(0);

    const wrong = url.replace(server.password, "wrong_password_123");
    const refused = await cli(["publish", "--postgres", "--db", dbB], { INVENTORY_PG_URL: wrong });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/password authentication failed/);
    expect(refused.stderr).not.toContain("wrong_password_123");

    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ publish: { postgres: { url } } }));
    const inConfig = await cli(["publish", "--postgres", "--db", dbB, "--config", config], { INVENTORY_PG_URL: url });
    expect(inConfig.code).toBe(2);
    expect(inConfig.stderr).toContain("looks like a PostgreSQL connection string");
    writeFileSync(config, JSON.stringify({ publish: { postgres: { schema: "from_config" } }, note: url }));
    const asValue = await cli(["publish", "--postgres", "--db", dbB, "--config", config], { INVENTORY_PG_URL: url });
    expect(asValue.code).toBe(2);

    const noUrl = await cli(["publish", "--postgres", "--db", dbB], {});
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toContain("INVENTORY_PG_URL");

    // Every run of this file, syncs and publishes alike: neither the URL nor its password anywhere.
    for (const o of outputs) {
      for (const text of [o.stdout, o.stderr]) {
        expect(text).not.toContain(server.password);
        expect(text).not.toContain(`127.0.0.1:${server.port}/`);
      }
    }
  });
});
