/**
 * The server around the API: prefix, keep-alive, stats, admin endpoints, and close().
 */
import { Agent, request } from "node:http";
import { connect, createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { startSimulator } from "../../src/simulator/index.js";
import { API, checkInvariants, get, sleep } from "./helpers.js";

function admin(sim: { baseUrl: string; apiKey: string }, path: string, method = "GET", body?: unknown) {
  return fetch(`${sim.baseUrl}/_sim${path}`, {
    method,
    headers: { authorization: `Bearer ${sim.apiKey}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

describe("server", () => {
  it("serves under a prefix, with admin endpoints at {prefix}/_sim", async () => {
    const sim = await startSimulator({ seed: 2, skus: 10, prefix: "/api/" });
    try {
      expect(sim.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api$/);
      expect((await get(sim, `${API}/workspace`)).status).toBe(200);
      const bare = { baseUrl: sim.baseUrl.replace(/\/api$/, ""), apiKey: sim.apiKey };
      expect((await get(bare, `${API}/workspace`)).status).toBe(404);
      expect((await admin(sim, "/stats")).status).toBe(200);
      expect((await admin(bare, "/stats")).status).toBe(404);
    } finally {
      await sim.close();
    }
  });

  it("uses the given key and workspace name; a random sim_ key otherwise", async () => {
    const a = await startSimulator({ skus: 5, apiKey: "my-key", workspaceName: "Acme Test" });
    const b = await startSimulator({ skus: 5 });
    try {
      expect(a.apiKey).toBe("my-key");
      expect((await get(a, `${API}/workspace`)).body.workspace.name).toBe("Acme Test");
      expect(b.apiKey).toMatch(/^sim_[0-9a-f]{32}$/);
      expect((await get(b, `${API}/workspace`, {}, { key: a.apiKey })).status).toBe(401);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("keeps connections alive and counts them", async () => {
    const sim = await startSimulator({ seed: 2, skus: 10 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const once = () =>
        new Promise<Record<string, unknown>>((resolve, reject) => {
          const req = request(`${sim.baseUrl}${API}/workspace`, { agent, headers: { authorization: `Bearer ${sim.apiKey}` } }, (res) => {
            res.resume();
            res.on("end", () => resolve(res.headers));
          });
          req.on("error", reject);
          req.end();
        });
      sim.resetStats();
      const h = await once();
      expect(h.connection).toBe("keep-alive");
      expect(String(h["keep-alive"])).toMatch(/timeout=\d+/);
      await once();
      await once();
      const st = sim.stats();
      expect(st.requests).toBe(3);
      expect(st.openConnections).toBe(1);
      expect(st.peakConnections).toBe(1);
    } finally {
      agent.destroy();
      await sim.close();
    }
  });

  it("counts requests by endpoint and status, max concurrency, and not admin calls", async () => {
    const sim = await startSimulator({ seed: 2, skus: 30 });
    try {
      const id = sim.model.skuIds()[0]!;
      await get(sim, `${API}/workspace`);
      await get(sim, `${API}/locations`);
      await get(sim, `${API}/inventory-status`);
      await get(sim, `${API}/inventory-status/${id}`);
      await get(sim, `${API}/inventory-status/${id}/history`);
      await get(sim, `${API}/inventory-status/not-a-uuid`);
      await get(sim, `${API}/workspace`, {}, { key: null });
      await get(sim, "/elsewhere");
      await admin(sim, "/stats");
      await admin(sim, "/ground-truth");
      let st = sim.stats();
      expect(st.requests).toBe(8);
      expect(st.byEndpoint).toEqual({ workspace: 2, locations: 1, list: 1, detail: 2, history: 1 });
      expect(st.byStatus).toEqual({ "200": 5, "400": 1, "401": 1, "404": 1 });
      expect(st.rateLimited).toBe(0);
      sim.setFaults([{ kind: "slow", delayMs: 200 }]);
      await Promise.all(Array.from({ length: 6 }, () => get(sim, `${API}/workspace`)));
      st = sim.stats();
      expect(st.maxConcurrent).toBe(6);
      expect(st.peakConnections).toBeGreaterThanOrEqual(6);
      expect(st.faultsFired.slow).toBe(6);
      sim.resetStats();
      st = sim.stats();
      expect(st.requests).toBe(0);
      expect(st.byStatus).toEqual({});
      expect(st.maxConcurrent).toBe(0);
      // the admin reset works too
      await get(sim, `${API}/workspace`);
      expect((await admin(sim, "/stats/reset", "POST")).status).toBe(200);
      expect(((await (await admin(sim, "/stats")).json()) as any).requests).toBe(0);
    } finally {
      await sim.close();
    }
  });

  it("admin: ground truth, faults (objects or spec strings) and quota over HTTP", async () => {
    const sim = await startSimulator({ seed: 4, skus: 40 });
    try {
      const gt = (await (await admin(sim, "/ground-truth")).json()) as any;
      expect(gt).toEqual(JSON.parse(JSON.stringify(sim.groundTruth())));
      expect(checkInvariants(gt)).toEqual([]);
      expect((await admin(sim, "/faults", "POST", ["503:every=2", { kind: "slow", delayMs: 1 }])).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(503);
      expect((await admin(sim, "/faults", "POST", [])).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(200);
      const bad = await admin(sim, "/faults", "POST", [{ kind: "teapot" }]);
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as any).error.code).toBe("invalid_request");
      expect((await admin(sim, "/quota", "POST", { requestsPerSecond: 0.01 })).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(429);
      expect((await admin(sim, "/quota", "POST", null)).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(200);
      expect((await admin(sim, "/quota", "POST", { requestsPerSecond: -1 })).status).toBe(400);
      expect((await admin(sim, "/churn?fraction=2", "POST")).status).toBe(400);
      expect((await admin(sim, "/stats", "POST")).status).toBe(405);
      expect((await admin(sim, "/nothing")).status).toBe(404);
    } finally {
      await sim.close();
    }
  });

  it("a limit before authentication refuses ahead of the key check and the quota, in its own Retry-After form, and spends neither", async () => {
    // 0.01 req/s, burst 2: two requests pass it, then every one is refused for 100 s.
    const sim = await startSimulator({ seed: 4, skus: 10, quota: { requestsPerSecond: 100, burst: 100 }, preAuthLimit: { requestsPerSecond: 0.01, burst: 2, retryAfter: "date" } });
    try {
      expect((await get(sim, `${API}/workspace`, {}, { key: "wrong" })).status).toBe(401);
      expect((await get(sim, `${API}/workspace`)).status).toBe(200);
      const wrongKey = await get(sim, `${API}/workspace`, {}, { key: "wrong" });
      expect(wrongKey.status).toBe(429);
      expect(Date.parse(wrongKey.headers.get("retry-after") ?? "")).toBeGreaterThan(Date.now() + 60_000);
      expect((await get(sim, `${API}/workspace`)).status).toBe(429);
      const st = sim.stats();
      expect(st.preAuthLimited).toBe(2);
      expect(st.rateLimited).toBe(2);
      // Only the one request that got past both limits with the right key was admitted by the quota.
      expect(st.accepted).toBe(1);
      // Over HTTP, afresh: the bucket is full again; null takes it away.
      expect((await admin(sim, "/preauth", "POST", { requestsPerSecond: 0.01, burst: 1 })).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(429);
      expect((await admin(sim, "/preauth", "POST", null)).status).toBe(200);
      expect((await get(sim, `${API}/workspace`)).status).toBe(200);
      expect((await admin(sim, "/preauth", "POST", { requestsPerSecond: 5, otherClientRps: 1 })).status).toBe(400);
    } finally {
      await sim.close();
    }
  });

  it("answers a malformed HTTP request with a JSON 400", async () => {
    const sim = await startSimulator({ seed: 1, skus: 5 });
    try {
      const { port } = new URL(sim.baseUrl);
      const text = await new Promise<string>((resolve, reject) => {
        const sock = connect(Number(port), "127.0.0.1", () => sock.write("GARBAGE / NOT-HTTP\r\n\r\n"));
        let out = "";
        sock.on("data", (d) => (out += d.toString()));
        sock.on("end", () => resolve(out));
        sock.on("error", reject);
      });
      expect(text).toMatch(/^HTTP\/1\.1 400 /);
      expect(text).toMatch(/content-type: application\/json/i);
      expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)).error.code).toBe("bad_request");
    } finally {
      await sim.close();
    }
  });

  it("close() frees the port promptly, even with idle keep-alive and in-flight slow requests", async () => {
    const sim = await startSimulator({ seed: 1, skus: 5, faults: [{ kind: "slow", delayMs: 30_000, endpoint: "locations" }] });
    const port = Number(new URL(sim.baseUrl).port);
    await get(sim, `${API}/workspace`); // leaves an idle keep-alive socket in fetch's pool
    const pending = get(sim, `${API}/locations`).catch((e: unknown) => e);
    await sleep(50);
    expect(sim.stats().openConnections).toBeGreaterThanOrEqual(1);
    expect(await canListen(port)).toBe(false);
    const t0 = performance.now();
    await sim.close();
    // It did not wait for the 30 s response in flight (half of it is a bound no loaded machine reaches).
    expect(performance.now() - t0).toBeLessThan(15_000);
    expect(await pending).toBeInstanceOf(Error);
    expect(await canListen(port)).toBe(true);
    await sim.close(); // idempotent
    // and a new simulator can take the same port
    const again = await startSimulator({ seed: 1, skus: 5, port });
    try {
      expect(again.baseUrl).toBe(sim.baseUrl);
      expect((await get(again, `${API}/workspace`)).status).toBe(200);
    } finally {
      await again.close();
    }
  });
});
