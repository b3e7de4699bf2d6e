/**
 * A mirror left world-readable (an older release, a copy with a loose umask) is tightened to
 * 0600 by the next writing run, with its -wal and -shm (issue 11, B9). Real CLI, real simulator.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli } from "../helpers/cli.js";

const KEY = "sim_e2e_db_mode_1029384756abcdef0123";
let sim: RunningSimulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 61, skus: 5, historyDepth: 3, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-mode-"));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("database file permissions", () => {
  it("a 644 mirror and its -wal/-shm are 600 after the next sync", async () => {
    const db = join(dir, "m.db");
    const env = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db };
    expect((await runCli(["sync", "--full", "--no-progress"], { env })).code).toBe(0);
    const files = [db, `${db}-wal`, `${db}-shm`].filter((p) => existsSync(p));
    for (const p of files) chmodSync(p, 0o644);
    const r = await runCli(["sync", "--no-progress"], { env });
    expect(r.code, r.stderr).toBe(0);
    for (const p of [db, `${db}-wal`, `${db}-shm`].filter((f) => existsSync(f))) expect((statSync(p).mode & 0o777).toString(8), p).toBe("600");
  });
});
