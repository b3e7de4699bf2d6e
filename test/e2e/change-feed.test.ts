/**
 * The change feed end to end (README, "The change feed"; docs/schema.md): the real CLI against
 * the real simulator, a real SQLite file. A backfill and churn cycles (a SKU deleted and revived), replayed from seq 0 onto
 * an empty copy, give the mirror's tables; a rerun on an unchanged workspace appends nothing;
 * `changes --follow` prints a run committed while it follows; the daemon's GET /changes
 * long-poll answers once a run commits, and beyond loopback wants its bearer token (401, unlogged);
 * retention never prunes past a registered consumer's confirmed seq.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import Database from "better-sqlite3";
import { diffAgainstTruth } from "../helpers/ground-truth.js";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { profileOptions } from "../../src/simulator/profiles.js";
import { openDatabase } from "../../src/store/db.js";
import { confirmFeedConsumer, registerFeedConsumer } from "../../src/store/outbox.js";
import { runCli, spawnCli } from "../helpers/cli.js";
import { applyChange, feedTables, type FeedChange } from "../helpers/feed-replay.js";
import { waitFor } from "../helpers/wait-for.js";

const KEY = "sim_e2e_feed_4a7c1e9b3d5f2a8c6e0b";
const TOKEN = "feed-token-9f8e7d6c5b4a39281706";
let sim: RunningSimulator;
let dir: string;
let db: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  // Against every variance the document allows at once (all-variance: order, paging, nulls, extra
  // fields, zero roots and leaves, other kinds), with identical history rows and long runs of ties:
  // the feed must carry every copy of an identical row, told apart by its ordinal.
  sim = await startSimulator({ seed: 13, skus: 80, historyDepth: 8, apiKey: KEY, ...profileOptions(["all-variance", "history-identical-rows", "history-ties"]) });
  dir = mkdtempSync(join(tmpdir(), "im-feed-"));
  db = join(dir, "feed.db");
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = (extra: Record<string, string> = {}) => ({ INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db, ...extra });

async function sync(args: string[] = [], extraEnv: Record<string, string> = {}) {
  const r = await runCli(["sync", "--log-level", "warn", ...args], { env: env(extraEnv) });
  expect(r.code, r.stderr).toBe(0);
  return r;
}

function read<T>(sql: string, ...params: unknown[]): T[] {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare(sql).all(...params) as T[];
  } finally {
    d.close();
  }
}
const latestSeq = () => read<{ s: number | null }>("SELECT max(seq) AS s FROM changes")[0]!.s ?? 0;
const feedFromCli = async (since = 0): Promise<FeedChange[]> => {
  const r = await runCli(["changes", "--json", "--since", String(since)], { env: { INVENTORY_DB: db } });
  expect(r.code, r.stderr).toBe(0);
  return r.stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as FeedChange);
};

describe("the change feed", () => {
  it("replayed from 0 onto an empty copy gives the mirror's tables, after a backfill and churn cycles", async () => {
    await sync(["--full"]);
    // The identical copies are there to be carried (a second copy has ordinal 1).
    const copies = new Database(db, { readonly: true });
    expect((copies.prepare("SELECT count(*) AS n FROM history WHERE dup_index > 0").get() as { n: number }).n).toBeGreaterThan(0);
    copies.close();
    const ids = sim.model.skuIds();
    // From the model (its own ids and units): ground truth says it as the server does (all-variance: upper-case ids, quantities x 0.1).
    const leafWithStock = (id: string) => sim.model.detail(id, null).locations.find((l) => l.quantity > 2)!.id;
    for (let cycle = 0; cycle < 3; cycle++) {
      sim.model.randomChurn(0.15);
      if (cycle === 0) {
        sim.model.removeSku(ids[5]!);
        sim.model.renameSku(ids[6]!, "Renamed for the feed");
        sim.model.lateRow(ids[7]!, leafWithStock(ids[7]!), 3, 1_000);
      }
      await sync(cycle === 2 ? ["--full"] : []);
    }
    // The removed SKU comes back (same id, fields and history): the mirror takes it back, a revival.
    expect(read<{ d: string | null }>("SELECT deleted_at AS d FROM skus WHERE id = ? COLLATE NOCASE", ids[5]!)[0]!.d).not.toBeNull();
    sim.model.reviveSku(ids[5]!);
    await sync(["--full"]);
    expect(read<{ d: string | null }>("SELECT deleted_at AS d FROM skus WHERE id = ? COLLATE NOCASE", ids[5]!)[0]!.d).toBeNull();
    // ...and is equal to the server again, row by row (history as a multiset), its history included.
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    const feed = await feedFromCli(0);
    expect(feed.length).toBe(latestSeq());
    expect(feed.map((c) => c.seq)).toEqual(feed.map((_, i) => i + 1)); // in order, no gap
    const kinds = new Set(feed.map((c) => `${c.entity}:${c.change}`));
    for (const k of ["sku:created", "sku:updated", "sku:deleted", "sku:revived", "location:created", "leaf_quantity:created", "leaf_quantity:updated", "history:appended", "history:removed"]) {
      expect(kinds, k).toContain(k);
    }

    const copy = openDatabase(join(dir, "replay.db"));
    try {
      copy.transaction(() => {
        for (const c of feed) applyChange(copy, c);
      })();
      const mirror = new Database(db, { readonly: true });
      try {
        const want = feedTables(mirror);
        const got = feedTables(copy);
        for (const t of Object.keys(want)) {
          expect(got[t]!.length, t).toBe(want[t]!.length);
          expect(got[t], t).toEqual(want[t]);
        }
        expect(want.history!.length).toBeGreaterThan(0);
      } finally {
        mirror.close();
      }
    } finally {
      copy.close();
    }
  }, 240_000);

  it("appends 0 changes on a rerun over an unchanged workspace (full, then incremental)", async () => {
    await sync(["--full"]);
    const before = latestSeq();
    await sync(["--full"]);
    expect(latestSeq()).toBe(before);
    await sync();
    expect(latestSeq()).toBe(before);
  }, 120_000);

  it("`changes --follow` prints the changes of a run committed while it follows", async () => {
    const since = latestSeq();
    const child = spawnCli(["changes", "--follow", "--json", "--since", String(since)], { env: { INVENTORY_DB: db } });
    children.push(child);
    let out = "";
    let err = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (err += d));
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));

    const printedSeqs = () =>
      out
        .split("\n")
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as FeedChange).seq);
    // Two runs: once the first one's changes are printed, the follower is surely following when the second commits.
    for (let round = 0; round < 2; round++) {
      sim.model.randomChurn(0.2);
      await sync();
      const committed = read<{ seq: number }>("SELECT seq FROM changes WHERE seq > ? ORDER BY seq", since).map((r) => r.seq);
      expect(committed.length).toBeGreaterThan(0);
      const printed = await waitFor(
        () => printedSeqs().length >= committed.length && printedSeqs(),
        () => `follow printed ${printedSeqs().length} of ${committed.length} changes\n${err}`,
        20_000,
      );
      expect(printed).toEqual(committed);
    }
    child.kill("SIGTERM");
    expect(await exit).toBe(0);
  }, 120_000);

  it("retention never prunes past a registered consumer's confirmed seq; a reader behind it learns of the gap", async () => {
    const w = new Database(db);
    const confirmed = Math.floor(latestSeq() / 2);
    try {
      expect(registerFeedConsumer(w, "publisher")).toBe(0);
      confirmFeedConsumer(w, "publisher", confirmed);
      confirmFeedConsumer(w, "publisher", 1); // never moves back
    } finally {
      w.close();
    }
    // Retention that would drop everything: any age, at most 1 change.
    const cfg = join(dir, "retention.json");
    writeFileSync(cfg, JSON.stringify({ feed: { retentionDays: 0.000001, retentionMaxChanges: 1 } }));
    sim.model.randomChurn(0.1);
    await sync(["--config", cfg]);
    expect(read<{ s: number }>("SELECT min(seq) AS s FROM changes")[0]!.s).toBe(confirmed + 1);
    expect(read<{ c: number }>("SELECT confirmed_seq AS c FROM feed_consumers WHERE name = 'publisher'")[0]!.c).toBe(confirmed);

    const behind = await runCli(["changes", "--since", "0"], { env: { INVENTORY_DB: db } });
    expect(behind.code).toBe(1);
    expect(behind.stderr).toMatch(/pruned/);
    const resumed = await feedFromCli(confirmed);
    expect(resumed[0]!.seq).toBe(confirmed + 1);
  }, 120_000);
});

describe("the daemon's GET /changes", () => {
  async function startDaemon(name: string, listen: string, extraEnv: Record<string, string>) {
    const cfg = join(dir, `${name}.json`);
    writeFileSync(cfg, JSON.stringify({ db, schedule: { incremental: "*/2 * * * * *", full: "0 0 1 1 *" }, daemon: { listen }, feed: { serve: true, longPollSeconds: 60 } }));
    const child = spawnCli(["daemon", "--config", cfg], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, ...extraEnv } });
    children.push(child);
    let stderr = "";
    child.stderr!.on("data", (d) => (stderr += d));
    child.stdout!.resume();
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    return { child, stderr: () => stderr, exit };
  }

  it("refuses to serve it beyond loopback without a token (exit 2)", async () => {
    const d = await startDaemon("no-token", "0.0.0.0:0", {});
    expect(await d.exit).toBe(2);
    expect(d.stderr()).toMatch(/INVENTORY_FEED_TOKEN/);
  }, 30_000);

  it("answers a long-poll once a run commits; beyond loopback 401 without or with a wrong token, and no token in the logs", async () => {
    const d = await startDaemon("served", "0.0.0.0:0", { INVENTORY_FEED_TOKEN: TOKEN });
    const port = await waitFor(
      () => /"port":(\d+)/.exec(d.stderr())?.[1],
      () => `daemon did not listen:\n${d.stderr()}`,
      15_000,
    );
    const url = `http://127.0.0.1:${port}/changes`;
    const auth = { authorization: `Bearer ${TOKEN}` };

    expect((await fetch(`${url}?since=0`)).status).toBe(401);
    expect((await fetch(`${url}?since=0`, { headers: { authorization: "Bearer wrong-token-0123456789" } })).status).toBe(401);
    expect((await fetch(`${url}?since=0`, { headers: { authorization: TOKEN } })).status).toBe(401);

    // Wait until the daemon's runs over the unchanged workspace have settled (they append nothing).
    await waitFor(() => read<{ n: number }>("SELECT count(*) AS n FROM sync_runs WHERE pid IS NOT NULL AND status = 'succeeded' AND mode = 'incremental'")[0]!.n >= 2, d.stderr, 30_000);
    const since = latestSeq();
    const idle = await fetch(`${url}?since=${since}&wait=0`, { headers: auth });
    expect(idle.status).toBe(200);
    expect(await idle.text()).toBe("");

    const poll = fetch(`${url}?since=${since}`, { headers: auth });
    sim.model.randomChurn(0.2);
    const res = await poll;
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    const lines = (await res.text())
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as FeedChange);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines[0]!.seq).toBe(since + 1);
    expect(lines.map((c) => c.seq)).toEqual(lines.map((_, i) => since + 1 + i));
    expect(Number(res.headers.get("x-feed-last-seq"))).toBe(lines[lines.length - 1]!.seq);
    const stored = read<{ seq: number; data: string }>("SELECT seq, data FROM changes WHERE seq > ? ORDER BY seq LIMIT ?", since, lines.length);
    expect(lines.map((c) => JSON.stringify({ before: c.before, after: c.after }))).toEqual(stored.map((r) => r.data));

    expect((await fetch(`${url}?since=abc`, { headers: auth })).status).toBe(400);
    d.child.kill("SIGTERM");
    expect(await d.exit).toBe(0);
    expect(d.stderr()).not.toContain(TOKEN);
    expect(d.stderr()).not.toContain("wrong-token-0123456789");
    // The refused requests are not logged: no line has a status of 401 or names the refusal. Read
    // as JSON, field by field: a bare /401/ over the text also matches any timestamp with those digits.
    const refusals = d
      .stderr()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((e) => Object.entries(e).some(([k, v]) => (/status/i.test(k) && Number(v) === 401) || (typeof v === "string" && /unauthori[sz]ed|bearer|\/changes/i.test(v))));
    expect(refusals).toEqual([]);
  }, 120_000);
});
