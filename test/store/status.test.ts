/**
 * The status read model (store/status.ts) on a real database file: responses by endpoint
 * and status derived from a run's journal, and the report `status` prints.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase, type DB } from "../../src/store/db.js";
import { latestQuotaWall, peekDatabase } from "../../src/store/runs.js";
import { Store } from "../../src/store/store.js";
import { mirrorState, readStatus, readStatusOf, responsesByEndpointStatus } from "../../src/store/status.js";
import { formatStatus } from "../../src/cli/commands/status.js";
import { insertRun as insertRunRow, type RunRow } from "../helpers/run-rows.js";

let dir: string;
let path: string;
let db: DB;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "im-store-status-"));
  path = join(dir, "m.db");
  db = openDatabase(path);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const insertRun = (r: RunRow) => insertRunRow(db, r);

describe("responsesByEndpointStatus", () => {
  it("non-2xx attempts from the run's backoff and error journal entries; the rest of each endpoint's requests are 2xx", () => {
    const run = insertRun({ status: "succeeded", started: "2026-03-01T12:00:00.000Z", finished: "2026-03-01T12:01:00.000Z" });
    const j = db.prepare("INSERT INTO sync_journal (run_id, at, kind, endpoint, status, message) VALUES (?, '2026-03-01T12:00:30.000Z', ?, ?, ?, 'x')");
    j.run(run, "backoff", "list", 429);
    j.run(run, "backoff", "list", 429);
    j.run(run, "backoff", "detail", 503);
    j.run(run, "error", "history", null);
    j.run(run, "error", null, null); // the run's own error line: no endpoint, not a response
    j.run(run, "sku_failed", "history", null); // same failure as the 'error' entry above: not counted twice
    j.run(run, "rate", null, null);
    expect(responsesByEndpointStatus(db, run, { workspace: 1, list: 5, detail: 3, history: 4 })).toEqual({
      workspace: { "2xx": 1 },
      list: { "429": 2, "2xx": 3 },
      detail: { "503": 1, "2xx": 2 },
      history: { error: 1, "2xx": 3 },
    });
  });
});

describe("readStatus", () => {
  function seedStock() {
    const now = "2026-03-01T10:00:00.000Z";
    db.prepare("INSERT INTO workspace (id, name, scope, checked_at) VALUES ('ws-1', 'Acme', 'read', ?)").run("2026-03-01T12:10:00.000Z");
    const loc = db.prepare("INSERT INTO locations (id, name, display_path, is_leaf, first_seen_at, last_seen_at, deleted_at) VALUES (?, ?, ?, 1, ?, ?, ?)");
    loc.run("L1", "Shelf 1", "WH / A / Shelf 1", now, now, null);
    loc.run("L2", "Shelf 2", "WH / A / Shelf 2", now, now, null);
    loc.run("L3", "Gone", "WH / Gone", now, now, now);
    const sku = db.prepare("INSERT INTO skus (id, code, name, first_seen_at, last_seen_at, deleted_at) VALUES (?, ?, ?, ?, ?, ?)");
    sku.run("S1", "SKU-1", "One", now, now, null);
    sku.run("S2", "SKU-2", "Two", now, now, null);
    sku.run("S3", "SKU-3", "Deleted", now, now, now);
    const q = db.prepare("INSERT INTO sku_location_quantities (sku_id, location_id, quantity, freshness_status, fetched_at, not_clean_since) VALUES (?, ?, 1, ?, ?, ?)");
    q.run("S1", "L1", "dirty", now, "2026-03-01T09:00:00.000Z");
    q.run("S1", "L2", "clean", now, null);
    q.run("S2", "L1", "failed", now, "2026-03-01T08:00:00.000Z");
    q.run("S2", "L2", "rebuilding", now, "2026-03-01T11:00:00.000Z");
    q.run("S3", "L1", "dirty", now, "2026-03-01T07:00:00.000Z"); // deleted SKU: not current
    q.run("S1", "L3", "dirty", now, "2026-03-01T07:00:00.000Z"); // deleted location: not current
  }

  it("the last runs with counters, the quota state, and the current SKU × locations not clean, oldest first", () => {
    seedStock();
    const ok = insertRun({ mode: "full", status: "succeeded", started: "2026-03-01T11:00:00.000Z", finished: "2026-03-01T11:30:00.000Z" });
    const partial = insertRun({ status: "partial", started: "2026-03-01T12:00:00.000Z", finished: "2026-03-01T12:02:00.000Z", resumeAfter: "2026-03-01T12:30:00.000Z", error: "quota wall" });
    const running = insertRun({ status: "running", started: "2026-03-01T12:10:00.000Z", pid: 4242, byEndpoint: { workspace: 1, list: 3 } });
    db.prepare("INSERT INTO sync_journal (run_id, at, kind, endpoint, status, retry_after, wait_ms, message) VALUES (?, ?, 'backoff', 'list', 429, '20', 20000, 'paused')").run(
      running,
      "2026-03-01T12:10:05.000Z",
    );
    const now = Date.parse("2026-03-01T12:10:10.000Z");

    const r = readStatus(db, { database: path, runs: 2, notCleanLimit: 2, now });
    expect(r.workspace).toEqual({ id: "ws-1", name: "Acme", checkedAt: "2026-03-01T12:10:00.000Z" });
    expect(r.running).toEqual({ id: running, mode: "incremental", startedAt: "2026-03-01T12:10:00.000Z", pid: 4242 });
    expect(r.lastSuccess).toEqual({ id: ok, mode: "full", finishedAt: "2026-03-01T11:30:00.000Z" });
    expect(r.lastFullSuccess).toEqual({ id: ok, finishedAt: "2026-03-01T11:30:00.000Z" });
    expect(r.runs.map((x) => [x.id, x.status, x.durationMs])).toEqual([
      [running, "running", 10_000],
      [partial, "partial", 120_000],
    ]);
    expect(r.runs[0]!.counters).toMatchObject({ skusListed: 30, skusFetched: 3, requests: 9, requestsByEndpoint: { workspace: 1, list: 3 }, responses429: 2, waitMs: 1500 });
    expect(r.quota).toEqual({
      state: "paused",
      lastBackoff: {
        runId: running,
        at: "2026-03-01T12:10:05.000Z",
        endpoint: "list",
        status: 429,
        retryAfter: "20",
        waitMs: 20000,
        until: "2026-03-01T12:10:25.000Z",
        inForce: true,
        message: "paused",
      },
      resumeAfter: { runId: partial, at: "2026-03-01T12:30:00.000Z", inForce: true },
      learned: [],
    });
    expect(r.notClean.pairs).toBe(3);
    expect(r.notClean.skus).toBe(2);
    expect(r.notClean.shown.map((i) => [i.skuId, i.locationId, i.status, i.notCleanSince, i.location])).toEqual([
      ["S2", "L1", "failed", "2026-03-01T08:00:00.000Z", "WH / A / Shelf 1"],
      ["S1", "L1", "dirty", "2026-03-01T09:00:00.000Z", "WH / A / Shelf 1"],
    ]);

    const text = formatStatus(r);
    expect(text).toContain(`running       run ${running} (incremental) since 2026-03-01T12:10:00.000Z, pid 4242`);
    expect(text).toContain("quota         paused until 2026-03-01T12:10:25.000Z (run 3: 429 on list, Retry-After 20)");
    expect(text).toContain("scan not reflected: 3 SKU × location (2 SKUs) with freshness other than clean");
    expect(text).toMatch(/2026-03-01T08:00:00.000Z\s+failed\s+SKU-2\s+Two\s+WH \/ A \/ Shelf 1/);
    expect(text).toContain(`run ${partial}: requests list 1; resume after 2026-03-01T12:30:00.000Z; quota wall`);

    // Later: the backoff is over, the wall too.
    const later = readStatus(db, { database: path, runs: 10, notCleanLimit: 20, now: Date.parse("2026-03-01T13:00:00.000Z") });
    expect(later.quota.state).toBe("clear");
    expect(later.quota.lastBackoff?.inForce).toBe(false);
    expect(later.quota.resumeAfter?.inForce).toBe(false);
    expect(later.runs).toHaveLength(3);
  });

  it("an empty database", () => {
    const r = readStatus(db, { database: path, runs: 10, notCleanLimit: 20 });
    expect(r).toMatchObject({
      workspace: null,
      running: null,
      lastSuccess: null,
      runs: [],
      quota: { state: "clear", lastBackoff: null, resumeAfter: null },
      notClean: { pairs: 0, skus: 0, shown: [] },
    });
    expect(formatStatus(r)).toContain("workspace     (none yet)");
  });
});

describe("readStatusOf", () => {
  it("reads a mirror file as readStatus reads a connection, and refuses a missing file", () => {
    insertRun({ status: "succeeded", started: "2026-03-01T12:00:00.000Z", finished: "2026-03-01T12:01:00.000Z" });
    const viaPath = readStatusOf(path, { runs: 5, notCleanLimit: 5 });
    expect(viaPath).toEqual(readStatus(db, { database: path, runs: 5, notCleanLimit: 5, now: Date.parse(viaPath.generatedAt) }));
    expect(viaPath.lastSuccess?.finishedAt).toBe("2026-03-01T12:01:00.000Z");
    expect(() => readStatusOf(join(dir, "missing.db"), { runs: 5, notCleanLimit: 5 })).toThrow(/does not exist/);
  });
});

describe("the quota wall", () => {
  it("is read one way: sync's peek, status and the daemon see the latest finished run's wall, and a later finished run clears it", () => {
    db.prepare("INSERT INTO workspace (id, name, scope, checked_at) VALUES ('ws-1', 'Acme', 'read', '2026-03-01T12:00:00.000Z')").run();
    const walled = insertRun({ status: "partial", started: "2026-03-01T12:00:00.000Z", finished: "2026-03-01T12:01:00.000Z", resumeAfter: "2026-03-01T12:30:00.000Z" });
    insertRun({ status: "running", started: "2026-03-01T12:02:00.000Z" }); // a run in progress does not hide the wall
    const before = Date.parse("2026-03-01T12:10:00.000Z");
    expect(latestQuotaWall(db)).toEqual({ runId: walled, at: "2026-03-01T12:30:00.000Z" });
    expect(peekDatabase(path, before)?.resumeAfter).toBe(Date.parse("2026-03-01T12:30:00.000Z"));
    expect(peekDatabase(path, Date.parse("2026-03-01T12:31:00.000Z"))?.resumeAfter).toBeNull();
    expect(mirrorState(path).quotaWallAt()).toBe(Date.parse("2026-03-01T12:30:00.000Z"));
    expect(readStatus(db, { database: path, runs: 5, notCleanLimit: 5, now: before }).quota.resumeAfter).toEqual({ runId: walled, at: "2026-03-01T12:30:00.000Z", inForce: true });

    insertRun({ status: "succeeded", started: "2026-03-01T12:03:00.000Z", finished: "2026-03-01T12:04:00.000Z" });
    expect(latestQuotaWall(db)).toBeNull();
    expect(peekDatabase(path, before)?.resumeAfter).toBeNull();
    expect(mirrorState(path).quotaWallAt()).toBeNull();
    expect(readStatus(db, { database: path, runs: 5, notCleanLimit: 5, now: before }).quota).toMatchObject({ state: "clear", resumeAfter: null });
  });
});

describe("the quota a run learned", () => {
  const quota = { low: 39.2, high: 41, burstLow: 9, burstHigh: 12, oneToken: false };
  const server = "http://127.0.0.1:8080/api";

  it("is kept per server for the next run, read by sync's peek within an hour, replaced by a later lesson and forgotten on request", () => {
    db.prepare("INSERT INTO workspace (id, name, scope, checked_at) VALUES ('ws-1', 'Acme', 'read', '2026-03-01T12:00:00.000Z')").run();
    const run = insertRun({ status: "succeeded", started: "2026-03-01T12:00:00.000Z", finished: "2026-03-01T12:01:00.000Z" });
    const store = new Store(db);
    expect(peekDatabase(path, Date.now(), server)?.learnedQuota).toBeNull();
    store.keepLearnedQuota(server, run, quota);
    const kept = peekDatabase(path, Date.now(), server)?.learnedQuota;
    expect(kept).toMatchObject({ quota, runId: run });
    // `status` shows it, and whether the next run will start from it.
    const shown = readStatus(db, { database: path, runs: 5, notCleanLimit: 5, now: Date.now() });
    expect(shown.quota.learned).toEqual([{ server, low: 39.2, high: 41, runId: run, learnedAt: kept!.learnedAt, usable: true }]);
    expect(formatStatus(shown)).toContain(`learned rate  39.2 req/s, 429 at 41.0 for ${server}, learned by run ${run} at ${kept!.learnedAt}; the next run against it starts there`);
    const later2h = readStatus(db, { database: path, runs: 5, notCleanLimit: 5, now: Date.parse(kept!.learnedAt) + 2 * 3_600_000 });
    expect(formatStatus(later2h)).toContain("too old: the next run finds the quota afresh");
    // Another server (another port, another path) starts afresh; without a server nothing is read.
    expect(peekDatabase(path, Date.now(), "http://127.0.0.1:8081/api")?.learnedQuota).toBeNull();
    expect(peekDatabase(path, Date.now())?.learnedQuota).toBeNull();
    // An hour on, what was learned is too old to start from.
    expect(peekDatabase(path, Date.parse(kept!.learnedAt) + 59 * 60_000, server)?.learnedQuota).not.toBeNull();
    expect(peekDatabase(path, Date.parse(kept!.learnedAt) + 61 * 60_000, server)?.learnedQuota).toBeNull();
    // A later run's lesson replaces it (null bounds stay null: a one-token bucket with nothing above known).
    const later = { low: 4.8, high: null, burstLow: 1, burstHigh: null, oneToken: true };
    store.keepLearnedQuota(server, run + 1, later);
    expect(peekDatabase(path, Date.now(), server)?.learnedQuota).toMatchObject({ quota: later, runId: run + 1 });
    store.forgetLearnedQuota(server);
    expect(peekDatabase(path, Date.now(), server)?.learnedQuota).toBeNull();
  });
});
