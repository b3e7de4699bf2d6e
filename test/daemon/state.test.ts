/**
 * What the daemon reads from and writes to a real database file, through the store:
 * skipped ticks journaled against the run in hand (through that run's writer), and the
 * daemon's reads of the last success, the quota wall and the SKUs not clean.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "../../src/core/logger.js";
import { openDatabase, type DB } from "../../src/store/db.js";
import { Store } from "../../src/store/store.js";
import { DbTickJournal, dbStateReader } from "../../src/daemon/state.js";
import { insertRun as insertRunRow, type RunRow } from "../helpers/run-rows.js";

const logger = createLogger("silent");
let dir: string;
let path: string;
let db: DB;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "im-daemon-state-"));
  path = join(dir, "m.db");
  db = openDatabase(path);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const insertRun = (r: RunRow) => insertRunRow(db, r);
const journalRows = (runId: number) => db.prepare("SELECT kind, at, message FROM sync_journal WHERE run_id = ? ORDER BY id").all(runId) as Array<{ kind: string; at: string; message: string }>;

describe("DbTickJournal", () => {
  it("journals a skipped tick against the run this process has in hand, as kind tick_skipped", () => {
    // A row left 'running' with this very pid (a killed daemon of an earlier container had the same pid):
    // not the run in hand, so it must not get the entry.
    const stale = insertRun({ status: "running", started: "2026-03-01T11:00:00.000Z", pid: process.pid });
    const other = insertRun({ status: "running", started: "2026-03-01T11:30:00.000Z", pid: process.pid + 1 });
    const store = new Store(db);
    const mine = store.startRun("incremental").id;
    const j = new DbTickJournal(path, logger);
    j.skipped({ mode: "incremental", at: Date.parse("2026-03-01T12:05:00.000Z"), message: "incremental tick (schedule) skipped: a full run is in progress" });
    expect(journalRows(mine).filter((r) => r.kind === "tick_skipped")).toEqual([
      { kind: "tick_skipped", at: "2026-03-01T12:05:00.000Z", message: "incremental tick (schedule) skipped: a full run is in progress" },
    ]);
    expect(journalRows(stale)).toEqual([]);
    expect(journalRows(other)).toEqual([]);
  });

  it("joins the transaction the run's writer has open (one writer: no wait on a second connection)", async () => {
    const store = new Store(db);
    const run = store.startRun("full");
    const j = new DbTickJournal(path, logger);
    // A group transaction is open until the next turn of the event loop.
    const unit = store.grouped(() => store.journal(run.id, { kind: "info", message: "unit" }));
    expect(db.inTransaction).toBe(true);
    j.skipped({ mode: "incremental", at: Date.parse("2026-03-01T12:05:00.000Z"), message: "during a group" });
    await unit;
    expect(db.inTransaction).toBe(false);
    expect(journalRows(run.id).map((r) => r.message)).toEqual(["unit", "during a group"]);
  });

  it("a tick skipped before the run in hand has its row is written at the run's first progress report", () => {
    const j = new DbTickJournal(path, logger);
    j.skipped({ mode: "full", at: Date.parse("2026-03-01T12:00:01.000Z"), message: "early" });
    expect(db.prepare("SELECT count(*) AS n FROM sync_journal").get()).toEqual({ n: 0 });
    const run = new Store(db).startRun("full");
    j.flush();
    expect(journalRows(run.id).map((r) => r.message)).toEqual(["early"]);
    j.flush(); // nothing pending: nothing written twice
    expect(journalRows(run.id)).toHaveLength(1);
  });

  it("entries for a run that never started are dropped, not written anywhere", () => {
    const j = new DbTickJournal(path, logger);
    j.skipped({ mode: "full", at: Date.now(), message: "orphan" });
    j.runEnded(null);
    new Store(db).startRun("full");
    j.flush();
    expect(db.prepare("SELECT count(*) AS n FROM sync_journal").get()).toEqual({ n: 0 });
  });

  it("once the run's writer is closed, nothing more is written to its journal", () => {
    const other = openDatabase(join(dir, "other.db"));
    const store = new Store(other);
    const run = store.startRun("full");
    store.close();
    const j = new DbTickJournal(join(dir, "other.db"), logger);
    j.skipped({ mode: "full", at: Date.now(), message: "late" });
    j.runEnded(run.id);
    const check = openDatabase(join(dir, "other.db"));
    try {
      expect(check.prepare("SELECT count(*) AS n FROM sync_journal WHERE kind = 'tick_skipped'").get()).toEqual({ n: 0 });
    } finally {
      check.close();
    }
  });

  it("does nothing without a database file (and creates none)", () => {
    const missing = join(dir, "missing.db");
    const j = new DbTickJournal(missing, logger);
    expect(() => {
      j.skipped({ mode: "full", at: Date.now(), message: "x" });
      j.runEnded(null);
    }).not.toThrow();
    expect(existsSync(missing)).toBe(false);
  });
});

describe("dbStateReader", () => {
  it("reads the last success, a quota wall and the SKUs not clean; null without a database", () => {
    insertRun({ status: "succeeded", started: "2026-03-01T12:00:00.000Z", finished: "2026-03-01T12:01:00.000Z" });
    insertRun({ status: "partial", started: "2026-03-01T12:05:00.000Z", finished: "2026-03-01T12:06:00.000Z", resumeAfter: "2026-03-01T12:20:00.000Z" });
    const r = dbStateReader(path);
    expect(r.lastSuccess()).toBe(Date.parse("2026-03-01T12:01:00.000Z"));
    expect(r.resumeAfter()).toBe(Date.parse("2026-03-01T12:20:00.000Z"));
    expect(r.skusNotClean()).toBe(0);
    const none = dbStateReader(join(dir, "missing.db"));
    expect([none.lastSuccess(), none.resumeAfter(), none.skusNotClean()]).toEqual([null, null, null]);
  });
});
