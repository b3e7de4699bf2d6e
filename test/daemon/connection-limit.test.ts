/**
 * The daemon's port against a peer that opens connections and never finishes a request
 * (issue 11, A5): the real daemon in a child process with 256 file descriptors, 400
 * half-sent requests held open. Its runs must still open the database and succeed, and
 * /healthz must answer once the half-sent requests are gone.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { BIN, cliEnv } from "../helpers/cli.js";
import { waitFor } from "../helpers/wait-for.js";

const KEY = "sim_e2e_daemon_conn_5a4b3c2d1e0f9a8b7c6d";
let sim: RunningSimulator;
let dir: string;
let child: ChildProcess | null = null;
const sockets: Socket[] = [];

beforeAll(async () => {
  sim = await startSimulator({ seed: 71, skus: 10, historyDepth: 3, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-conn-"));
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

function runs(db: string): Array<{ status: string; error: string | null }> {
  try {
    const d = new Database(db, { readonly: true, fileMustExist: true });
    try {
      return d.prepare("SELECT status, error FROM sync_runs ORDER BY id").all() as Array<{ status: string; error: string | null }>;
    } finally {
      d.close();
    }
  } catch {
    return [];
  }
}
function halfSent(port: number): Promise<Socket | null> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.on("connect", () => {
      s.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
      resolve(s);
    });
    s.on("error", () => resolve(null));
  });
}

describe("daemon HTTP port under a connection flood", () => {
  it("400 half-sent requests: runs still open the database and succeed, /healthz answers once they are gone", async () => {
    const db = join(dir, "m.db");
    const cfg = join(dir, "daemon.json");
    writeFileSync(cfg, JSON.stringify({ db, schedule: { incremental: "*/2 * * * * *", full: "0 0 1 1 *" }, daemon: { listen: "127.0.0.1:0" } }));
    // 256 descriptors: what a small container gives; the flood alone would take them all.
    child = spawn("sh", ["-c", `ulimit -n 256 && exec "$0" "$@"`, process.execPath, BIN, "daemon", "--config", cfg], {
      env: cliEnv({ INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl }),
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (d) => (stderr += d));
    const url = await waitFor(
      () => /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(stderr)?.[1],
      () => `the daemon to listen:\n${stderr}`,
    );
    const port = Number(new URL(url).port);
    await waitFor(
      () => runs(db).some((r) => r.status === "succeeded"),
      () => `a first run:\n${stderr}`,
    );

    for (let i = 0; i < 400; i++) {
      const s = await halfSent(port);
      if (s) sockets.push(s);
    }
    const before = runs(db).length;
    // Two scheduled runs while the flood is held open.
    await waitFor(
      () =>
        runs(db).length >= before + 2 &&
        runs(db)
          .slice(before)
          .every((r) => r.status !== "running"),
      () => `two runs during the flood:\n${stderr.slice(-2000)}`,
    );
    const during = runs(db).slice(before);
    for (const r of during) expect(r, JSON.stringify(r)).toMatchObject({ status: "succeeded" });
    expect(stderr).not.toMatch(/unable to open database file|EMFILE/);

    for (const s of sockets.splice(0)) s.destroy();
    await waitFor(
      async () => {
        try {
          return (await fetch(`${url}/healthz`)).ok;
        } catch {
          return false;
        }
      },
      () => "/healthz after the flood",
    );
    child.kill("SIGTERM");
  });
});
