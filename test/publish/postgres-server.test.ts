/** The test PostgreSQL server itself: started from what `npm install` brings, on 127.0.0.1, stopped by its pid. */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPostgres, type RunningPostgres } from "../helpers/postgres.js";

let server: RunningPostgres;
beforeAll(async () => {
  server = await startPostgres();
});
afterAll(async () => {
  await server?.stop();
});

describe("the test PostgreSQL server", () => {
  it("answers on 127.0.0.1 with a password, runs as a non-root user, and is gone after stop", async () => {
    console.log(`PostgreSQL test server: initdb ${server.initMs} ms, start ${server.startMs} ms`);
    const c = await server.client();
    const { rows } = await c.query<{ version: string; addr: string; user: string }>("SELECT version() AS version, host(inet_server_addr()) AS addr, current_user AS user");
    await c.end();
    expect(rows[0]!.version).toMatch(/^PostgreSQL \d+/);
    expect(rows[0]!.addr).toBe("127.0.0.1");
    expect(() => process.kill(server.pid, 0)).not.toThrow();
    // PostgreSQL refuses root: as root, the helper runs it as the postgres user.
    const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${server.pid}/status`, "utf8"))![1]);
    expect(uid).not.toBe(0);
    await server.stop();
    expect(() => process.kill(server.pid, 0)).toThrow();
  });
});
