/**
 * Read-only places (issue 11, B8): a directory the user cannot write to, and a mirror the user
 * can read but not write. The real CLI runs as another user (setpriv, uid 65534) so that file
 * modes bite (root ignores them). Each is exit 2 with the path and what to do, before any
 * request, and nothing is created beside the database.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { execFileSync, spawn } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { BIN, cliEnv } from "../helpers/cli.js";

const NOBODY = "65534";
const canSwitchUser = (() => {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return false;
  try {
    execFileSync("setpriv", [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "true"]);
    return true;
  } catch {
    return false;
  }
})();

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "im-ro-"));
  chmodSync(dir, 0o755);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function syncAsNobody(db: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn("setpriv", [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", process.execPath, BIN, "sync", "--db", db], {
      env: cliEnv({ INVENTORY_API_KEY: "imk_read_only_test_0123456789", INVENTORY_BASE_URL: "http://127.0.0.1:9" }),
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (d) => (stderr += d));
    child.on("exit", (code) => resolve({ code, stderr }));
  });
}

describe.skipIf(!canSwitchUser)("read-only places (run as uid 65534; needs root and setpriv)", () => {
  it("a directory this user cannot write: exit 2 naming it, nothing created", async () => {
    const roDir = join(dir, "read-only-dir");
    mkdirSync(roDir, { mode: 0o755 });
    const r = await syncAsNobody(join(roDir, "x.db"));
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/database directory .*read-only-dir is not writable by this user \(uid 65534\)/);
    expect(r.stderr).not.toMatch(/EACCES/);
    expect(readdirSync(roDir)).toEqual([]);
  });

  it("a mirror this user can read but not write: exit 2 naming it, no -wal, -shm or .lock left", async () => {
    const shared = join(dir, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    const db = join(shared, "m.db");
    const d = new Database(db);
    d.exec(
      "CREATE TABLE workspace (id TEXT); CREATE TABLE locations (id TEXT); CREATE TABLE skus (id TEXT); CREATE TABLE sync_runs (id INTEGER); CREATE TABLE sync_journal (id INTEGER); PRAGMA user_version = 4;",
    );
    d.close();
    chmodSync(db, 0o644);
    const r = await syncAsNobody(db);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/database .*m\.db is read-only for this user \(uid 65534\)/);
    for (const suffix of ["-wal", "-shm", ".lock"]) expect(existsSync(db + suffix), suffix).toBe(false);
    writeFileSync(join(shared, "done"), "");
  });
});
