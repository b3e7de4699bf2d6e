/**
 * Every fault kind over real HTTP, rule selection (endpoint, SKU, every, after, count,
 * probability, burst), and the CLI spec parser.
 */
import { request } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DetailResponse, HistoryResponse, ListResponse, WorkspaceResponse } from "../../src/core/api-schemas.js";
import { FaultEngine } from "../../src/simulator/faults.js";
import { parseFaultSpec, startSimulator, type FaultRule, type RunningSimulator } from "../../src/simulator/index.js";
import { API, get } from "./helpers.js";

let sim: RunningSimulator;
let skuId: string;
let otherSku: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 21, skus: 60 });
  const rich = sim.groundTruth().skus.filter((s) => s.history.length > 3);
  skuId = rich[0]!.item.id;
  otherSku = rich[1]!.item.id;
});
afterAll(() => sim.close());
beforeEach(() => {
  sim.setFaults([]);
  sim.resetStats();
});

const ws = () => get(sim, `${API}/workspace`);
const list = (params: Record<string, string | number> = {}) => get(sim, `${API}/inventory-status`, params);
const detail = (id = skuId) => get(sim, `${API}/inventory-status/${id}`);
const history = (id = skuId, params: Record<string, string | number> = {}) => get(sim, `${API}/inventory-status/${id}/history`, params);

/** Raw response, for bodies fetch cannot deliver (truncated). */
function raw(path: string): Promise<{ status: number; headers: Record<string, unknown>; received: number; error: Error | null }> {
  return new Promise((resolve) => {
    const url = new URL(sim.baseUrl + path);
    const req = request(url, { headers: { authorization: `Bearer ${sim.apiKey}` }, agent: false }, (res) => {
      let received = 0;
      res.on("data", (c: Buffer) => (received += c.length));
      res.on("error", (error) => resolve({ status: res.statusCode!, headers: res.headers, received, error }));
      res.on("aborted", () => resolve({ status: res.statusCode!, headers: res.headers, received, error: new Error("aborted") }));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, received, error: null }));
    });
    req.on("error", (error) => resolve({ status: 0, headers: {}, received: 0, error }));
    req.end();
  });
}

describe("fault kinds", () => {
  it("429: rate_limited with Retry-After (default 1 s); burst makes the next ones 429 too", async () => {
    sim.setFaults([{ kind: "429", every: 3, count: 1, burst: 3 }]);
    const statuses: number[] = [];
    let first: Awaited<ReturnType<typeof ws>> | null = null;
    for (let i = 0; i < 7; i++) {
      const r = await ws();
      statuses.push(r.status);
      if (r.status === 429 && !first) first = r;
    }
    expect(statuses).toEqual([200, 200, 429, 429, 429, 200, 200]);
    expect(first!.body.error.code).toBe("rate_limited");
    expect(first!.headers.get("retry-after")).toBe("1");
    expect(sim.stats().faultsFired["429"]).toBe(3);
  });

  it("503 bursts: a fired 503 is followed by burst−1 more, with or without Retry-After", async () => {
    sim.setFaults([{ kind: "503", every: 3, count: 1, burst: 2, retryAfter: "seconds:2" }]);
    const rs = [];
    for (let i = 0; i < 6; i++) rs.push(await ws());
    expect(rs.map((r) => r.status)).toEqual([200, 200, 503, 503, 200, 200]);
    expect(rs[2]!.headers.get("retry-after")).toBe("2");
    expect(sim.stats().faultsFired["503"]).toBe(2);
    sim.setFaults([{ kind: "503", every: 1, count: 1, burst: 3 }]);
    const bare = [];
    for (let i = 0; i < 4; i++) bare.push(await ws());
    expect(bare.map((r) => r.status)).toEqual([503, 503, 503, 200]);
    expect(bare.every((r) => r.headers.get("retry-after") === null)).toBe(true);
  });

  it("503 outages (forMs): once fired, every request until the outage ends gets the same answer, however many (fake clock)", () => {
    let now = 0;
    const engine = new FaultEngine([{ kind: "503", every: 2, count: 1, forMs: 100 }], 1, () => now);
    const at = (t: number) => {
      now = t;
      return engine.decide({ endpoint: "detail", skuId: null, hasCursor: false }).fault?.kind ?? null;
    };
    // The second request starts the outage at t=1; it lasts until t=101 for every request in it.
    expect([at(0), at(1), at(2), at(2), at(2), at(100), at(101), at(150)]).toEqual([null, "503", "503", "503", "503", "503", null, null]);
    expect(parseFaultSpec("503:p=0.01,for=300,retry-after=1")).toEqual({ kind: "503", probability: 0.01, forMs: 300, retryAfter: "seconds:1" });
    expect(() => parseFaultSpec("503:p=0.01,for=300,burst=2")).toThrow(/burst \(requests\) or forMs \(time\), not both/);
    expect(() => parseFaultSpec("reset:p=0.01,for=300")).toThrow(/forMs only applies to 429 and 503/);
  });

  it("429 with raw Retry-After values is sent verbatim", async () => {
    for (const value of ["0", "garbage", "Thu, 01 Jan 1970 00:00:00 GMT"]) {
      sim.setFaults([{ kind: "429", retryAfter: `raw:${value}` }]);
      const r = await ws();
      expect(r.status).toBe(429);
      expect(r.headers.get("retry-after")).toBe(value);
    }
  });

  it("503: service_unavailable, no Retry-After unless asked; every/count select which", async () => {
    sim.setFaults([{ kind: "503", every: 2, count: 2 }]);
    const rs = [];
    for (let i = 0; i < 6; i++) rs.push(await ws());
    expect(rs.map((r) => r.status)).toEqual([200, 503, 200, 503, 200, 200]);
    expect(rs[1]!.body.error.code).toBe("service_unavailable");
    expect(rs[1]!.headers.get("retry-after")).toBeNull();
    sim.setFaults([{ kind: "503", retryAfter: "seconds:2" }]);
    expect((await ws()).headers.get("retry-after")).toBe("2");
  });

  it("slow: delays, then answers normally; other endpoints are not delayed", async () => {
    sim.setFaults([{ kind: "slow", delayMs: 1_500, endpoint: "detail" }]);
    const t0 = performance.now();
    const order: string[] = [];
    const slow = detail().then((r) => {
      order.push("detail");
      return r;
    });
    // Sent after the slow one, answered before it: only the detail endpoint waits (an order, not a timing).
    await ws().then(() => order.push("workspace"));
    const r = await slow;
    expect(order).toEqual(["workspace", "detail"]);
    // A delay is never shorter than asked (a lower bound holds on any machine).
    expect(performance.now() - t0).toBeGreaterThanOrEqual(1_490);
    expect(r.status).toBe(200);
    expect(DetailResponse.safeParse(r.body).success).toBe(true);
  });

  it("slow combines with another fault", async () => {
    sim.setFaults([{ kind: "503" }, { kind: "slow", delayMs: 200 }]);
    const t0 = performance.now();
    const r = await ws();
    expect(r.status).toBe(503);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
  });

  it("reset: the connection is destroyed without a response", async () => {
    sim.setFaults([{ kind: "reset", count: 1 }]);
    await expect(ws()).rejects.toThrow();
    expect((await ws()).status).toBe(200);
    expect(sim.stats().byStatus.reset).toBe(1);
  });

  it("malformed-json: cut-off JSON with a JSON content type", async () => {
    sim.setFaults([{ kind: "malformed-json", endpoint: "list" }]);
    const r = await list();
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^application\/json/);
    expect(r.text).toBe('{"items": [');
    expect(() => JSON.parse(r.text)).toThrow();
  });

  it("truncated: Content-Length promises more than arrives, then the socket ends", async () => {
    sim.setFaults([{ kind: "truncated", endpoint: "list" }]);
    const r = await raw(`${API}/inventory-status`);
    expect(r.status).toBe(200);
    const declared = Number(r.headers["content-length"]);
    expect(declared).toBeGreaterThan(100);
    expect(r.received).toBeLessThan(declared);
    expect(r.error).not.toBeNull();
    await expect(list().then((x) => x.text)).rejects.toThrow();
  });

  it("wrong-content-type: a valid body labelled text/plain", async () => {
    sim.setFaults([{ kind: "wrong-content-type", endpoint: "workspace" }]);
    const r = await ws();
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(WorkspaceResponse.safeParse(JSON.parse(r.text)).success).toBe(true);
  });

  it("html: a 502-looking proxy page with status 200", async () => {
    sim.setFaults([{ kind: "html" }]);
    const r = await ws();
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/html/);
    expect(r.text).toContain("502 Bad Gateway");
  });

  it("missing-field: a required field is removed so the client's schema rejects the body", async () => {
    sim.setFaults([{ kind: "missing-field" }]);
    const l = await list();
    expect(l.body.items[0].id).toBeUndefined();
    expect(ListResponse.safeParse(l.body).success).toBe(false);
    const h = await history();
    expect(h.body.items[0].quantity).toBeUndefined();
    expect(HistoryResponse.safeParse(h.body).success).toBe(false);
    expect(DetailResponse.safeParse((await detail()).body).success).toBe(false);
    expect(WorkspaceResponse.safeParse((await ws()).body).success).toBe(false);
    // without the fault the same bodies parse
    sim.setFaults([]);
    expect(ListResponse.safeParse((await list()).body).success).toBe(true);
    expect(HistoryResponse.safeParse((await history()).body).success).toBe(true);
  });

  it("oversize: valid JSON of exactly `bytes` bytes (default 20 MB)", async () => {
    sim.setFaults([{ kind: "oversize", bytes: 3 * 1024 * 1024, endpoint: "history" }]);
    const r = await history();
    expect(r.status).toBe(200);
    expect(Number(r.headers.get("content-length"))).toBe(3 * 1024 * 1024);
    expect(Buffer.byteLength(r.text)).toBe(3 * 1024 * 1024);
    expect(JSON.parse(r.text).items).toEqual([]);
    sim.setFaults([{ kind: "oversize" }]);
    const big = await raw(`${API}/workspace`);
    expect(Number(big.headers["content-length"])).toBe(20 * 1024 * 1024);
    expect(big.received).toBe(20 * 1024 * 1024);
  });

  it("reject-cursor: 400 invalid_cursor only for requests that carry a cursor", async () => {
    const c = (await list({ limit: 5 })).body.page.nextCursor;
    sim.setFaults([{ kind: "reject-cursor" }]);
    expect((await list({ limit: 5 })).status).toBe(200);
    const r = await list({ limit: 5, cursor: c });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_cursor");
    sim.setFaults([]);
    expect((await list({ limit: 5, cursor: c })).status).toBe(200);
  });
});

describe("rule selection", () => {
  it("endpoint and skuId filters", async () => {
    sim.setFaults([{ kind: "503", endpoint: ["detail", "history"], skuId }]);
    expect((await detail()).status).toBe(503);
    expect((await history()).status).toBe(503);
    expect((await detail(otherSku)).status).toBe(200);
    expect((await list()).status).toBe(200);
    expect((await ws()).status).toBe(200);
  });

  it("after lets the first N through", async () => {
    sim.setFaults([{ kind: "503", after: 2, count: 2 }]);
    const s = [];
    for (let i = 0; i < 5; i++) s.push((await ws()).status);
    expect(s).toEqual([200, 200, 503, 503, 200]);
  });

  it("probability is seeded: the same seed fires on the same requests; 0 never, 1 always", async () => {
    const pattern = async (target: RunningSimulator): Promise<number[]> => {
      target.setFaults([{ kind: "503", probability: 0.5 }]);
      const out: number[] = [];
      for (let i = 0; i < 30; i++) out.push((await get(target, `${API}/workspace`)).status);
      return out;
    };
    const twin = await startSimulator({ seed: 21, skus: 10 });
    try {
      const a = await pattern(sim);
      const b = await pattern(twin);
      expect(a).toEqual(b);
      expect(a.filter((x) => x === 503).length).toBeGreaterThan(5);
      expect(a.filter((x) => x === 200).length).toBeGreaterThan(5);
    } finally {
      await twin.close();
    }
    sim.setFaults([{ kind: "503", probability: 0 }]);
    for (let i = 0; i < 10; i++) expect((await ws()).status).toBe(200);
    sim.setFaults([{ kind: "503", probability: 1 }]);
    for (let i = 0; i < 10; i++) expect((await ws()).status).toBe(503);
  });

  it("the first terminal rule wins", async () => {
    sim.setFaults([{ kind: "html", endpoint: "list" }, { kind: "503" }]);
    expect((await list()).headers.get("content-type")).toMatch(/^text\/html/);
    expect((await ws()).status).toBe(503);
  });

  it("faults come after auth and quota, and never change data", async () => {
    const before = JSON.stringify(sim.groundTruth());
    sim.setFaults([{ kind: "503" }]);
    expect((await get(sim, `${API}/workspace`, {}, { key: "nope" })).status).toBe(401);
    sim.setQuota({ requestsPerSecond: 0.01, burst: 1 });
    try {
      expect((await ws()).status).toBe(503);
      expect((await ws()).status).toBe(429);
    } finally {
      sim.setQuota(null);
    }
    const all: FaultRule[] = (["missing-field", "malformed-json", "wrong-content-type", "html", "reject-cursor", "503"] as const).map((kind) => ({ kind, probability: 0.3 }));
    sim.setFaults(all);
    for (let i = 0; i < 20; i++) await Promise.all([list({ limit: 3 }), detail(), history()]);
    expect(JSON.stringify(sim.groundTruth())).toBe(before);
  });

  it("invalid rules are refused", () => {
    expect(() => sim.setFaults([{ kind: "nope" as never }])).toThrow();
    expect(() => sim.setFaults([{ kind: "503", probability: 2 }])).toThrow();
    expect(() => sim.setFaults([{ kind: "503", endpoint: "everything" as never }])).toThrow();
    expect(() => sim.setFaults([{ kind: "reset", burst: 2 }])).toThrow();
    expect(() => sim.setFaults([{ kind: "429", retryAfter: "soon" }])).toThrow();
    expect(() => sim.setFaults([{ kind: "429", retryAfter: "raw:1\r\nx-injected: 1" }])).toThrow();
  });
});

describe("parseFaultSpec", () => {
  it("parses the CLI forms", () => {
    expect(parseFaultSpec("429:p=0.05,retry-after=date")).toEqual({ kind: "429", probability: 0.05, retryAfter: "date:1" });
    expect(parseFaultSpec("503:every=10,count=3")).toEqual({ kind: "503", every: 10, count: 3 });
    expect(parseFaultSpec("reset:p=0.01")).toEqual({ kind: "reset", probability: 0.01 });
    const uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    expect(parseFaultSpec(`malformed-json:endpoint=detail,sku=${uuid}`)).toEqual({ kind: "malformed-json", endpoint: "detail", skuId: uuid });
    expect(parseFaultSpec("html")).toEqual({ kind: "html" });
    expect(parseFaultSpec("slow:delay=250,endpoint=list|history")).toEqual({ kind: "slow", delayMs: 250, endpoint: ["list", "history"] });
    expect(parseFaultSpec("oversize:bytes=9m")).toEqual({ kind: "oversize", bytes: 9 * 1024 * 1024 });
    expect(parseFaultSpec("429:burst=4,after=2,retry-after=7")).toEqual({ kind: "429", burst: 4, after: 2, retryAfter: "seconds:7" });
    expect(parseFaultSpec("429:retry-after=date:30")).toEqual({ kind: "429", retryAfter: "date:30" });
    // a raw HTTP-date contains a comma: it takes the rest of the spec
    expect(parseFaultSpec("429:count=1,retry-after=raw:Wed, 21 Oct 2015 07:28:00 GMT")).toEqual({ kind: "429", count: 1, retryAfter: "raw:Wed, 21 Oct 2015 07:28:00 GMT" });
  });

  it("rejects bad specs", () => {
    for (const bad of ["", "teapot", "503:p", "503:p=x", "503:colour=red", "slow:bytes=5", "malformed-json:sku=abc", "503:endpoint=foo"]) {
      expect(() => parseFaultSpec(bad), bad).toThrow();
    }
  });
});
