/**
 * `publish --postgres` follows the change feed after its first bulk load (README, "Publishing
 * into PostgreSQL"): the real CLI in a child process, mirrors filled by the real CLI from the
 * real simulator over HTTP, a real PostgreSQL server (test/helpers/postgres.ts). Each publish
 * after churn applies only the feed's new changes, and PostgreSQL then equals the SQLite mirror
 * row by row; a publisher killed with SIGKILL mid-batch resumes where its last batch committed;
 * retention never prunes past the publisher's confirmed seq; an outbox pruned past it, or a
 * PostgreSQL that no longer holds what the feed starts from, makes the next publish load in bulk.
 * The daemon with publish.postgres.enabled publishes after its runs, and syncs on while
 * PostgreSQL is missing or refuses connections.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { profileOptions } from "../../src/simulator/profiles.js";
import { PUBLISHER_APPLICATION_NAME, type PublishReport } from "../../src/publish/publish.js";
import { runCli, spawnCli, type CliResult } from "../helpers/cli.js";
import { startPostgres, type RunningPostgres } from "../helpers/postgres.js";
import { connect, expectTablesEqual, expectViewsEqual, pgRows, sqliteRows } from "../helpers/pg-compare.js";
import { waitFor } from "../helpers/wait-for.js";

/** Longest wait for a daemon's state (runs and publishes on a loaded 2-core machine); no assertion depends on it. */
const DAEMON_WAIT_MS = 90_000;

const KEY = "sim_e2e_follow_3b8e1f0c7a2d4e6f";

let server: RunningPostgres;
let sim: RunningSimulator;
let dir: string;
const outputs: CliResult[] = [];

beforeAll(async () => {
  server = await startPostgres();
  // Every variance the document allows at once (order, paging, nulls, extra fields, zero roots and leaves, other kinds),
  // with identical history rows and long runs of ties: each copy must be inserted and removed as its own row.
  sim = await startSimulator({ seed: 23, skus: 120, historyDepth: 20, apiKey: KEY, ...profileOptions(["all-variance", "history-identical-rows", "history-ties"]) });
  dir = mkdtempSync(join(tmpdir(), "im-follow-"));
});
afterAll(async () => {
  await sim?.close();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function cli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const r = await runCli(args, { env });
  outputs.push(r);
  return r;
}

/** A sync of `db` (with a config file when given: the feed's retention). */
async function sync(db: string, args: string[] = [], config?: string): Promise<void> {
  const r = await cli(["sync", "--log-level", "warn", ...args, ...(config ? ["--config", config] : [])], { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db });
  expect(r.code, r.stderr).toBe(0);
}

async function publish(db: string, url: string, extra: string[] = []): Promise<PublishReport> {
  const r = await cli(["publish", "--postgres", "--db", db, "--json", ...extra], { INVENTORY_PG_URL: url });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as PublishReport;
}

const latestSeq = (db: string) => (sqliteRows(db, "SELECT seq FROM sqlite_sequence WHERE name = 'changes'")[0]?.seq as number | undefined) ?? 0;
const oldestSeq = (db: string) => sqliteRows(db, "SELECT min(seq) AS s FROM changes")[0]!.s as number | null;
const confirmedSeq = (db: string, consumer: string) => sqliteRows(db, "SELECT confirmed_seq AS s FROM feed_consumers WHERE name = :consumer", { consumer })[0]?.s;
async function pgSeq(url: string): Promise<number> {
  return (await pgRows(url, "inventory_mirror", "SELECT feed_sequence FROM workspaces"))[0]!.feed_sequence as number;
}

/** A mirror of the simulator as it is now, published once (in bulk). */
async function mirrorAndBulk(name: string, config?: string): Promise<{ db: string; url: string; first: PublishReport }> {
  const db = join(dir, `${name}.db`);
  await sync(db, ["--full"], config);
  const url = await server.createDatabase(name);
  const first = await publish(db, url);
  expect(first.load).toBe("bulk");
  expect(first.bulkReason).toMatch(/first publish/);
  return { db, url, first };
}

function churn(fraction: number): void {
  sim.model.randomChurn(fraction);
}

describe("publish --postgres follows the change feed", () => {
  it("after a bulk load, each publish after churn and an incremental sync applies only the new changes, and PostgreSQL equals the mirror row by row", async () => {
    const { db, url, first } = await mirrorAndBulk("cycles");
    expect(sqliteRows(db, "SELECT count(*) AS n FROM history WHERE dup_index > 0")[0]!.n).toBeGreaterThan(0);
    expect(first.feedSequence).toBe(latestSeq(db));
    const ids = sim.model.skuIds();
    let seq = first.feedSequence!;
    const kinds = new Set<string>();
    for (let cycle = 0; cycle < 5; cycle++) {
      churn(0.2);
      if (cycle === 1) {
        sim.model.removeSku(ids[3]!);
        sim.model.renameSku(ids[4]!, "Renamed while published");
      }
      // Deleted by the full sync of cycle 3, it comes back in cycle 4: a revival to publish.
      if (cycle === 4) sim.model.reviveSku(ids[3]!);
      await sync(db, cycle >= 3 ? ["--full"] : []);
      const latest = latestSeq(db);
      for (const r of sqliteRows(db, "SELECT DISTINCT entity || ':' || change AS k FROM changes WHERE seq > :seq", { seq })) kinds.add(String(r.k));
      const report = await publish(db, url, cycle === 2 ? ["--batch-size", "7"] : []);
      expect(report.load, JSON.stringify(report)).toBe("feed");
      expect(report.bulkReason).toBeNull();
      expect(report.fromSequence).toBe(seq);
      expect(report.feedSequence).toBe(latest);
      expect(report.changes).toBe(latest - seq);
      expect(report.changes).toBeGreaterThan(0);
      expect(report.batches).toBe(Math.ceil(report.changes / (cycle === 2 ? 7 : 1000)));
      expect(report.tables).toEqual([]);
      expect(report.confirmed).toBe(true);
      expect(confirmedSeq(db, report.consumer)).toBe(latest);
      expect(await pgSeq(url)).toBe(latest);
      const counts = await expectTablesEqual(db, url, report.schema);
      console.log(`cycle ${cycle}: ${report.changes} changes in ${report.batches} batches; row-by-row comparison ${JSON.stringify(counts)}`);
      seq = latest;
    }
    await expectViewsEqual(db, url, first.schema);
    for (const k of ["sku:updated", "sku:deleted", "sku:revived", "leaf_quantity:updated", "history:appended"]) expect(kinds, k).toContain(k);

    // A rerun over an unchanged mirror: still by the feed, no change to apply, still equal.
    const idle = await publish(db, url);
    expect([idle.load, idle.changes, idle.batches, idle.feedSequence]).toEqual(["feed", 0, 0, seq]);
    await expectTablesEqual(db, url, first.schema);
    // `status` shows the publisher as a feed consumer, caught up.
    const status = await cli(["status", "--db", db], {});
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(`consumers: ${idle.consumer} confirmed ${seq} (0 behind)`);
  }, 300_000);

  it("a kill -9 of the publisher mid-batch, at six points (five by how far it got, one held inside a batch), resumes where its last batch committed: nothing lost or doubled", async () => {
    const { db, url, first } = await mirrorAndBulk("kill9");
    const watcher = await connect(url);
    const fractions = [0.1, 0.3, 0.5, 0.7, 0.9];
    const outcomes: string[] = [];
    try {
      for (const [trial, fraction] of fractions.entries()) {
        churn(0.35);
        await sync(db, trial % 2 ? ["--full"] : []);
        const from = await pgSeq(url);
        const latest = latestSeq(db);
        expect(latest).toBeGreaterThan(from);
        const killAt = from + Math.max(1, Math.floor(fraction * (latest - from)));
        // Batches of 2 changes: many commits, so the kill lands between or inside them.
        const child = spawnCli(["publish", "--postgres", "--db", db, "--batch-size", "2"], { env: { INVENTORY_PG_URL: url } });
        let exited = false;
        const gone = new Promise<void>((resolve) => child.on("exit", () => resolve()));
        child.on("exit", () => (exited = true));
        child.stdout!.resume();
        child.stderr!.resume();
        let state = "";
        for (;;) {
          const seqNow = Number((await watcher.query("SELECT feed_sequence FROM inventory_mirror.workspaces")).rows[0].feed_sequence);
          if (exited) {
            state = "finished before the kill";
            break;
          }
          if (seqNow >= killAt) {
            const s = await watcher.query("SELECT state FROM pg_stat_activity WHERE application_name = $1", [PUBLISHER_APPLICATION_NAME]);
            state = `killed at seq ${seqNow} of ${from}..${latest} (publisher ${s.rows[0]?.state ?? "between queries"})`;
            child.kill("SIGKILL");
            break;
          }
          await new Promise((r) => setTimeout(r, 5));
        }
        await gone;
        const backendGone = async () => (await watcher.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1", [PUBLISHER_APPLICATION_NAME])).rowCount === 0;
        while (!(await backendGone())) await new Promise((r) => setTimeout(r, 20));
        const left = await pgSeq(url);
        expect(left).toBeGreaterThanOrEqual(from);
        expect(left).toBeLessThanOrEqual(latest);

        const rerun = await publish(db, url);
        expect(rerun.load, JSON.stringify(rerun)).toBe("feed");
        expect(rerun.fromSequence).toBe(left);
        expect(rerun.changes).toBe(latest - left);
        expect(rerun.feedSequence).toBe(latest);
        expect(await pgSeq(url)).toBe(latest);
        const counts = await expectTablesEqual(db, url, first.schema);
        outcomes.push(`trial ${trial + 1}: ${state}; rerun applied ${rerun.changes} changes; equal row by row ${JSON.stringify(counts)}`);
      }
      outcomes.push(await killInsideBatch(db, url, first.schema, watcher));
    } finally {
      await watcher.end();
    }
    console.log(outcomes.join("\n"));
    expect(outcomes.filter((o) => o.includes("killed at")).length).toBeGreaterThanOrEqual(3);
  }, 300_000);

  /**
   * The sixth trial, surely inside a batch: another session holds history, so the publisher's
   * first history statement waits inside its batch's transaction, after that batch's earlier
   * statements; killed there, PostgreSQL keeps the seq before the batch and none of its rows.
   */
  async function killInsideBatch(db: string, url: string, schema: string, watcher: Awaited<ReturnType<typeof connect>>): Promise<string> {
    churn(0.35);
    await sync(db);
    const from = await pgSeq(url);
    const latest = latestSeq(db);
    const holder = await connect(url);
    await holder.query("BEGIN");
    await holder.query(`LOCK TABLE "${schema}".history IN SHARE MODE`);
    const child = spawnCli(["publish", "--postgres", "--db", db, "--batch-size", "50"], { env: { INVENTORY_PG_URL: url } });
    const gone = new Promise<void>((resolve) => child.on("exit", () => resolve()));
    child.stdout!.resume();
    child.stderr!.resume();
    const waiting = async () =>
      (await watcher.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND state = 'active'", [PUBLISHER_APPLICATION_NAME])).rowCount === 1;
    while (!(await waiting())) await new Promise((r) => setTimeout(r, 10));
    child.kill("SIGKILL");
    await gone;
    await holder.query("COMMIT");
    await holder.end();
    while ((await watcher.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1", [PUBLISHER_APPLICATION_NAME])).rowCount) await new Promise((r) => setTimeout(r, 20));
    const left = await pgSeq(url);
    const rerun = await publish(db, url);
    expect(rerun.fromSequence).toBe(left);
    expect(rerun.feedSequence).toBe(latest);
    const counts = await expectTablesEqual(db, url, schema);
    return `trial 6: killed at seq ${left} of ${from}..${latest} (publisher waiting inside a batch on a history insert); rerun applied ${rerun.changes} changes; equal row by row ${JSON.stringify(counts)}`;
  }

  it("retention never prunes past the publisher's confirmed seq, and prunes up to it once confirmed", async () => {
    const config = join(dir, "tiny-retention.json");
    writeFileSync(config, JSON.stringify({ feed: { retentionMaxChanges: 5 } }));
    const { db, url, first } = await mirrorAndBulk("retention", config);
    const confirmed = confirmedSeq(db, first.consumer) as number;
    expect(confirmed).toBe(first.feedSequence);

    churn(0.2);
    await sync(db, [], config);
    const latest = latestSeq(db);
    expect(latest - confirmed).toBeGreaterThan(5);
    // Beyond the 5 changes retention allows, but every change after the confirmed seq is kept.
    expect(oldestSeq(db)).toBe(confirmed + 1);
    const followed = await publish(db, url);
    expect(followed.load).toBe("feed");
    expect(followed.changes).toBe(latest - confirmed);
    await expectTablesEqual(db, url, first.schema);
    expect(confirmedSeq(db, first.consumer)).toBe(latest);

    churn(0.2);
    await sync(db, [], config);
    expect(oldestSeq(db)).toBe(latest + 1);
  }, 240_000);

  it("an outbox pruned past PostgreSQL's seq makes the next publish load in bulk, equal row by row", async () => {
    const config = join(dir, "tiny-retention-2.json");
    writeFileSync(config, JSON.stringify({ feed: { retentionMaxChanges: 5 } }));
    const { db, url, first } = await mirrorAndBulk("pruned", config);
    // A publisher that is no longer registered: retention does not wait for it.
    const w = new Database(db);
    w.prepare("DELETE FROM feed_consumers").run();
    w.close();
    churn(0.2);
    await sync(db, [], config);
    expect(oldestSeq(db)!).toBeGreaterThan(first.feedSequence! + 1);
    const again = await publish(db, url);
    expect(again.load).toBe("bulk");
    expect(again.bulkReason).toBe(`the change feed was pruned past sequence ${first.feedSequence}`);
    expect(again.feedSequence).toBe(latestSeq(db));
    await expectTablesEqual(db, url, first.schema);
    // Registered again by that publish, and following from there.
    expect(confirmedSeq(db, again.consumer)).toBe(again.feedSequence);
    churn(0.1);
    await sync(db, [], config);
    const next = await publish(db, url);
    expect(next.load).toBe("feed");
    await expectTablesEqual(db, url, first.schema);
  }, 240_000);
  it("a PostgreSQL that no longer holds what the feed starts from (rows deleted by hand) is loaded in bulk instead, equal row by row", async () => {
    const { db, url, first } = await mirrorAndBulk("diverged");
    const c = await connect(url);
    try {
      await c.query(`DELETE FROM "${first.schema}".sku_location_quantities`);
    } finally {
      await c.end();
    }
    churn(0.2);
    await sync(db);
    const again = await publish(db, url);
    expect(again.load).toBe("bulk");
    expect(again.bulkReason).toMatch(/^PostgreSQL does not match the feed \(/);
    await expectTablesEqual(db, url, first.schema);
    const next = await publish(db, url);
    expect(next.load).toBe("feed");
  }, 240_000);
});

describe("the daemon's continuous publish (publish.postgres.enabled)", () => {
  async function startDaemon(name: string, db: string, pgUrl: string) {
    const cfg = join(dir, `${name}.json`);
    writeFileSync(cfg, JSON.stringify({ db, schedule: { incremental: "*/2 * * * * *", full: "0 0 1 1 *" }, daemon: { listen: "127.0.0.1:0" }, publish: { postgres: { enabled: true } } }));
    const child = spawnCli(["daemon", "--config", cfg], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_PG_URL: pgUrl } });
    let stderr = "";
    child.stderr!.on("data", (d) => (stderr += d));
    child.stdout!.resume();
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exit;
    };
    return { child, stderr: () => stderr, exit, stop };
  }
  /** Succeeded runs of the daemon (0 while its database or its tables are not there yet). */
  const daemonRuns = (db: string): number => {
    if (!existsSync(db)) return 0;
    try {
      return sqliteRows(db, "SELECT count(*) AS n FROM sync_runs WHERE pid IS NOT NULL AND status = 'succeeded'")[0]!.n as number;
    } catch {
      return 0; // the daemon is still creating the schema
    }
  };
  /** PostgreSQL's recorded point, or null while the database or the workspace is not there. */
  async function published(url: string): Promise<{ seq: number; run: number } | null> {
    try {
      const r = (await pgRows(url, "inventory_mirror", "SELECT feed_sequence AS seq, mirror_run_id AS run FROM workspaces"))[0];
      return r ? { seq: Number(r.seq), run: Number(r.run) } : null;
    } catch {
      return null;
    }
  }
  /** The bookkeeping moves with every run of a daemon that keeps syncing: compared are the contract's columns the feed carries. */
  const MOVING = {
    tables: ["workspace", "locations", "location_ancestors", "skus", "sku_root_quantities", "sku_location_quantities", "history"],
    drop: ["first_seen_at", "last_seen_at", "missed_walks", "fetched_at", "checked_at"],
  };

  it("publishes after each run: PostgreSQL down (no such database) does not stop syncing; once it is there it loads in bulk, then follows churn by the feed", async () => {
    const db = join(dir, "daemon.db");
    const dbName = "daemon_target";
    const url = `${server.url.replace(/\/postgres$/, "")}/${dbName}`;
    const d = await startDaemon("daemon", db, url);
    try {
      // Runs go on while every publish fails.
      await waitFor(() => daemonRuns(db) >= 2 && (d.stderr().match(/publish into PostgreSQL failed/g) ?? []).length >= 2, d.stderr, DAEMON_WAIT_MS);
      const port = Number(/"port":(\d+)/.exec(d.stderr())![1]);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(Number(/inventory_mirror_publish_runs_total\{load="failed"\} (\d+)/.exec(metrics)![1])).toBeGreaterThanOrEqual(2);

      await server.createDatabase(dbName);
      // PostgreSQL's commit comes before the daemon's log line: wait for both.
      const first = await waitFor(
        async () => {
          const p = await published(url);
          return p && p.seq === latestSeq(db) && /published into PostgreSQL in bulk/.test(d.stderr()) && p;
        },
        d.stderr,
        DAEMON_WAIT_MS,
      );
      const schema = (await pgRows(url, "inventory_mirror", "SELECT schema_name FROM workspaces"))[0]!.schema_name as string;
      await expectTablesEqual(db, url, schema, MOVING);

      // A run in progress may see part of the churn: wait for a run that started after it, published.
      const runAtChurn = sqliteRows(db, "SELECT max(id) AS id FROM sync_runs")[0]!.id as number;
      churn(0.25);
      const caughtUp = await waitFor(
        async () => {
          const latest = latestSeq(db);
          const p = await published(url);
          return latest > first.seq && p && p.run > runAtChurn && p.seq === latest && /published [1-9]\d* changes into PostgreSQL/.test(d.stderr()) && p;
        },
        d.stderr,
        DAEMON_WAIT_MS,
      );
      const counts = await expectTablesEqual(db, url, schema, MOVING);
      console.log(`daemon: PostgreSQL caught up to seq ${caughtUp.seq} (from ${first.seq}); compared ${JSON.stringify(counts)}`);
      const after = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(Number(/inventory_mirror_publish_runs_total\{load="feed"\} (\d+)/.exec(after)![1])).toBeGreaterThanOrEqual(1);
      expect(Number(/inventory_mirror_publish_feed_sequence (\d+)/.exec(after)![1])).toBeGreaterThanOrEqual(caughtUp.seq);
    } finally {
      expect(await d.stop()).toBe(0);
    }
    expect(d.stderr()).not.toContain(server.password);
    expect(d.stderr()).not.toContain(`127.0.0.1:${server.port}/`);
  }, 240_000);

  it("a PostgreSQL server that is not there (connection refused): the daemon syncs on, counts and logs each failed publish, never the URL", async () => {
    const db = join(dir, "daemon-refused.db");
    const password = "refused_pw_5e6f7a8b9c";
    const url = `postgres://mirror:${password}@127.0.0.1:1/nowhere`;
    const d = await startDaemon("daemon-refused", db, url);
    try {
      await waitFor(() => daemonRuns(db) >= 3 && (d.stderr().match(/publish into PostgreSQL failed/g) ?? []).length >= 3, d.stderr, DAEMON_WAIT_MS);
      const port = Number(/"port":(\d+)/.exec(d.stderr())![1]);
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(200);
    } finally {
      expect(await d.stop()).toBe(0);
    }
    expect(d.stderr()).not.toContain(password);
    expect(d.stderr()).not.toContain("127.0.0.1:1/");
  }, 120_000);
});

describe("secrets", () => {
  it("never shows the connection string", () => {
    for (const o of outputs) {
      for (const text of [o.stdout, o.stderr]) {
        expect(text).not.toContain(server.password);
        expect(text).not.toContain(`127.0.0.1:${server.port}/`);
      }
    }
  });
});
