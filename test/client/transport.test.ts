/**
 * The production transport (undici's pool) against a real HTTP server on 127.0.0.1: a request's write
 * gate is asked when a socket is ready for it, right before its bytes go, not when it is handed over.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NotSentError, poolTransport } from "../../src/client/transport.js";

let server: Server;
let base: string;
/** Paths in the order the server received them. */
const received: string[] = [];
let releaseHold: () => void = () => {};
let holdArrived: () => void = () => {};

beforeAll(async () => {
  server = createServer((req, res) => {
    received.push(req.url ?? "");
    const answer = () => res.writeHead(200, { "content-type": "application/json" }).end("{}");
    if (req.url === "/hold") {
      holdArrived();
      releaseHold = answer;
    } else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("pool transport: the write gate", () => {
  it("a request handed over while its only connection is busy, whose gate closes before that connection frees, is never written and rejects with NotSentError; the next goes", async () => {
    const transport = poolTransport({ connections: 1, connectTimeoutMs: 5_000, responseTimeoutMs: 10_000, maxResponseBytes: 1_000_000 });
    const signal = new AbortController().signal;
    try {
      const arrived = new Promise<void>((r) => (holdArrived = r));
      const first = transport.get(new URL(`${base}/hold`), {}, signal);
      await arrived;
      // Handed over while the gate is open: it waits in the pool for the one connection.
      let open = true;
      const held = transport.get(new URL(`${base}/held`), {}, signal, () => open);
      const outcome = held.then(
        () => "written",
        (e: unknown) => e,
      );
      // A pause begins (a 429 read elsewhere) before the connection is free for it.
      open = false;
      releaseHold();
      const res = await first;
      await res.readAll(1_000);
      expect(await outcome).toBeInstanceOf(NotSentError);
      // Open again: the next request goes (on a new connection: undici closes the one it was not written on).
      open = true;
      const next = await transport.get(new URL(`${base}/next`), {}, signal, () => open);
      expect(next.status).toBe(200);
      await next.readAll(1_000);
      expect(received).toEqual(["/hold", "/next"]);
    } finally {
      await transport.close();
    }
  });
});
