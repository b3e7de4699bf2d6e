/**
 * The API client against msw: parsing of each endpoint, the tolerant-reader rules,
 * headers, cursors, error bodies and bad responses. msw intercepts globalThis.fetch;
 * `onUnhandledRequest: "error"` plus the host `api.test.invalid` (which cannot
 * resolve) make every test here fail if the client stops being intercepted. The client is
 * given `fetchTransport` (what msw intercepts); production's `poolTransport` is not
 * intercepted, which the "transport" tests show against a real local server.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { http, HttpResponse } from "msw";
import { setupServer } from "msw/node";
import { ApiClient } from "../../src/client/api-client.js";
import { fetchTransport, poolTransport, type TransportFactory } from "../../src/client/transport.js";
import { RequestScheduler } from "../../src/scheduler/scheduler.js";
import { ApiError } from "../../src/core/errors.js";
import { Secret } from "../../src/core/secret.js";

const BASE = "https://api.test.invalid/prefix";
const KEY = "imk_test_3f9c2b7a1d8e4f60a5b4c3d2e1f0a9b8";
const SKU = "0b6c4a52-7d3e-4f1a-9c2b-1e5d8f7a6b3c";
const LOC = "6f1e2d3c-4b5a-4678-9abc-def012345678";

const server = setupServer();
beforeAll(() => server.listen({ onUnhandledRequest: "error" }));
afterEach(() => server.resetHandlers());
afterAll(() => server.close());

function client(overrides: Partial<{ maxResponseBytes: number; maxRetries: number; baseUrl: string; transport: TransportFactory }> = {}) {
  const scheduler = new RequestScheduler({
    concurrency: 2,
    requestsPerSecond: null,
    maxRetries: overrides.maxRetries ?? 0,
    max429Retries: 0,
    backoffBaseMs: 1,
    backoffCapMs: 2,
    minRetryAfterMs: 1,
    maxWaitMs: 60_000,
  });
  return new ApiClient({
    baseUrl: new URL(overrides.baseUrl ?? BASE),
    key: new Secret(KEY),
    scheduler,
    http: { connectTimeoutMs: 2_000, responseTimeoutMs: 5_000, maxResponseBytes: overrides.maxResponseBytes ?? 1_000_000, connections: 2 },
    transport: overrides.transport ?? fetchTransport,
  });
}
const signal = () => AbortSignal.timeout(10_000);

const sku = {
  id: SKU,
  code: "SKU-1",
  skuCode: "C-1",
  name: "Tee",
  barcode: "4006381333931",
  unit: "pcs",
  product: { id: "p1", name: "T-shirt", brand: "Acme" },
  options: { size: "M" },
};

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error("expected the call to fail");
}

/** The deepest ApiError of a cause chain: the one the client made, under any wrapper. */
function innermost(err: ApiError): ApiError {
  let cur = err;
  while (cur.cause instanceof ApiError) cur = cur.cause;
  return cur;
}

describe("requests", () => {
  it("is intercepted by msw: goes through globalThis.fetch, with Bearer key, Accept header, and the base URL's path prefix", async () => {
    const seen: Request[] = [];
    server.use(
      http.get(`${BASE}/v1/external/workspace`, ({ request }) => {
        seen.push(request.clone());
        return HttpResponse.json({ workspace: { id: "w1", name: "Acme" }, scope: "read" });
      }),
    );
    const ws = await client().workspace(signal());
    expect(ws).toEqual({ workspace: { id: "w1", name: "Acme" }, scope: "read" });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.get("authorization")).toBe(`Bearer ${KEY}`);
    expect(seen[0]!.headers.get("accept")).toBe("application/json");
    expect(new URL(seen[0]!.url).searchParams.has("token")).toBe(false);
  });

  it("passes a cursor back byte for byte, URL-encoded, with the same filters", async () => {
    const cursor = "a+b/c==&d e%2F~é";
    let got: URL | null = null;
    server.use(
      http.get(`${BASE}/v1/external/inventory-status`, ({ request }) => {
        got = new URL(request.url);
        return HttpResponse.json({ locations: [], summary: null, items: [], page: { nextCursor: null } });
      }),
    );
    await client().listPage({ cursor, limit: 100 }, signal());
    expect(got!.searchParams.get("cursor")).toBe(cursor);
    expect(got!.searchParams.get("limit")).toBe("100");
  });

  it("refuses a non-UUID SKU id before sending anything", async () => {
    let calls = 0;
    server.use(
      http.get(`${BASE}/v1/external/inventory-status/*`, () => {
        calls++;
        return HttpResponse.json({});
      }),
    );
    const err = await rejection(client().detail("../../workspace", signal()));
    expect(err.message).toMatch(/not a UUID/);
    expect(calls).toBe(0);
  });
});

describe("parsing each endpoint", () => {
  it("locations: keeps the documented fields, tolerates nulls and unknown fields", async () => {
    server.use(
      http.get(`${BASE}/v1/external/locations`, () =>
        HttpResponse.json({
          locations: [
            {
              id: LOC,
              name: "Main",
              code: "M",
              parentId: null,
              parentName: null,
              nodeKind: "location",
              depth: 0,
              pathIds: [LOC],
              pathNames: ["Main"],
              displayPath: "Main",
              isLeaf: false,
              childCount: 2,
              selectable: true,
              status: "active",
              updatedAt: "2026-01-01T00:00:00.000Z",
              somethingNew: { x: 1 },
            },
            { id: "7f1e2d3c-4b5a-4678-9abc-def012345678", name: null, status: null },
          ],
        }),
      ),
    );
    const { locations } = await client().locations(signal());
    expect(locations[0]).toMatchObject({ id: LOC, depth: 0, isLeaf: false, pathNames: ["Main"] });
    expect(locations[0]).not.toHaveProperty("somethingNew");
    expect(locations[1]).toMatchObject({ name: null, parentId: null, depth: null, isLeaf: null, pathIds: null });
  });

  it("list: items, root summaries, summary and an absent page on the last page", async () => {
    server.use(
      http.get(`${BASE}/v1/external/inventory-status`, () =>
        HttpResponse.json({
          locations: [{ id: LOC, name: "Main", code: "M", childCount: 2, leafLocationIds: [], skuCount: 1, totalQuantity: 5, averageQuantityPerSku: 5 }],
          summary: { skuCount: 1, totalQuantity: 5, averageQuantityPerSku: 5 },
          items: [{ ...sku, totalQuantity: 5, locationQuantities: { [LOC]: 5 } }],
        }),
      ),
    );
    const page = await client().listPage({}, signal());
    expect(page.items[0]).toMatchObject({ id: SKU, totalQuantity: 5, locationQuantities: { [LOC]: 5 }, product: { brand: "Acme" } });
    expect(page.page.nextCursor).toBeNull();
    expect(page.summary?.skuCount).toBe(1);
  });

  it("list: a missing product/options become empty values, an empty-string cursor means the end", async () => {
    server.use(
      http.get(`${BASE}/v1/external/inventory-status`, () =>
        HttpResponse.json({ items: [{ id: SKU, totalQuantity: 0, product: null, options: null, locationQuantities: null }], page: { nextCursor: "" } }),
      ),
    );
    const page = await client().listPage({}, signal());
    expect(page.items[0]).toMatchObject({ product: { id: null, name: null, brand: null }, options: {}, locationQuantities: {} });
    expect(page.page.nextCursor).toBeNull();
  });

  it("list: an item without id fails, naming the endpoint and the field", async () => {
    server.use(http.get(`${BASE}/v1/external/inventory-status`, () => HttpResponse.json({ items: [{ ...sku, id: undefined, totalQuantity: 1 }] })));
    const err = await rejection(client().listPage({}, signal()));
    expect(err.kind).toBe("invalid-response");
    expect(err.message).toMatch(/^list: invalid response: field items\.0\.id/);
  });

  it("detail: per-leaf quantities with freshness; a non-numeric quantity fails naming SKU and field", async () => {
    const body = {
      sku,
      selectedQuantity: 7,
      totalQuantity: 7,
      locations: [{ id: LOC, name: "Shelf", code: "S", parentId: LOC, quantity: 7, freshness: { status: "dirty", lastReplayedAt: "2026-01-01T00:00:00.000Z", lastSourceKind: "event" } }],
    };
    server.use(http.get(`${BASE}/v1/external/inventory-status/${SKU}`, () => HttpResponse.json(body)));
    const d = await client().detail(SKU, signal());
    expect(d.locations[0]).toMatchObject({ quantity: 7, freshness: { status: "dirty", lastSourceKind: "event" } });

    server.use(http.get(`${BASE}/v1/external/inventory-status/${SKU}`, () => HttpResponse.json({ ...body, locations: [{ ...body.locations[0], quantity: "7" }] })));
    const err = await rejection(client().detail(SKU, signal()));
    expect(err.message).toContain(`detail (SKU ${SKU}): invalid response: field locations.0.quantity`);
  });

  it("history: movement and set rows; unstated nullables may be null or absent", async () => {
    server.use(
      http.get(`${BASE}/v1/external/inventory-status/${SKU}/history`, ({ request }) => {
        expect(new URL(request.url).searchParams.get("limit")).toBe("100");
        return HttpResponse.json({
          items: [
            {
              kind: "set",
              occurredAt: "2026-01-02T00:00:00.000Z",
              direction: "none",
              quantity: 0,
              locationId: LOC,
              eventId: null,
              setSessionId: "s1",
              setTypeCode: "regular",
              observedQuantity: 4,
              note: null,
            },
            { kind: "movement", occurredAt: "2026-01-01T00:00:00.000Z", direction: "in", quantity: 4, locationId: LOC, eventId: "e1", eventTypeCode: "receipt" },
          ],
          page: { nextCursor: "next-1" },
        });
      }),
    );
    const h = await client().historyPage(SKU, { limit: 100 }, signal());
    expect(h.items).toHaveLength(2);
    expect(h.items[0]).toMatchObject({ kind: "set", observedQuantity: 4, eventId: null });
    expect(h.items[1]).toMatchObject({ kind: "movement", setSessionId: null, observedQuantity: null, note: null, locationName: null });
    expect(h.page.nextCursor).toBe("next-1");
  });
});

describe("errors", () => {
  it("surfaces the server's error body code and message", async () => {
    server.use(http.get(`${BASE}/v1/external/inventory-status/${SKU}`, () => HttpResponse.json({ error: { code: "not_found", message: "no such SKU" } }, { status: 404 })));
    const err = await rejection(client().detail(SKU, signal()));
    expect(err).toMatchObject({ kind: "http", status: 404, code: "not_found", endpoint: "detail" });
    expect(err.message).toContain("HTTP 404 (not_found: no such SKU)");
  });

  it("401: kind auth, exit code 3, says the key was refused, never contains the key", async () => {
    server.use(
      http.get(`${BASE}/v1/external/workspace`, ({ request }) => HttpResponse.json({ error: { code: "unauthorized", message: `bad ${request.headers.get("authorization")}` } }, { status: 401 })),
    );
    const err = await rejection(client().workspace(signal()));
    expect(err.kind).toBe("auth");
    expect(err.exitCode).toBe(3);
    expect(err.message).toMatch(/key was refused/);
    expect(err.message).not.toContain(KEY);
  });

  it("an HTML page from a proxy is a clear error, not a JSON crash", async () => {
    server.use(http.get(`${BASE}/v1/external/locations`, () => HttpResponse.html("<html><body>502 Bad Gateway</body></html>")));
    const err = await rejection(client().locations(signal()));
    expect(err.kind).toBe("invalid-response");
    expect(err.message).toMatch(/expected a JSON response.*text\/html.*HTML page/);
  });

  it("malformed JSON with a JSON content type", async () => {
    server.use(http.get(`${BASE}/v1/external/locations`, () => new HttpResponse('{"locations": [', { headers: { "content-type": "application/json" } })));
    const err = await rejection(client().locations(signal()));
    expect(err.message).toMatch(/^locations: the response is not valid JSON/);
  });

  it("a body over the size cap is refused", async () => {
    server.use(http.get(`${BASE}/v1/external/locations`, () => HttpResponse.json({ locations: [], pad: "x".repeat(5_000) })));
    const err = await rejection(client({ maxResponseBytes: 1_000 }).locations(signal()));
    expect(err.message).toMatch(/exceeds the 1000-byte cap/);
  });

  it("a redirect is not followed (the key stays with the base URL)", async () => {
    let followed = 0;
    server.use(
      http.get(`${BASE}/v1/external/workspace`, () => new HttpResponse(null, { status: 302, headers: { location: "https://elsewhere.test.invalid/steal" } })),
      http.get("https://elsewhere.test.invalid/steal", () => {
        followed++;
        return HttpResponse.json({});
      }),
    );
    const err = await rejection(client().workspace(signal()));
    expect(err.message).toMatch(/302 redirect; redirects are not followed/);
    expect(followed).toBe(0);
  });

  it("a 503 is retried and then succeeds", async () => {
    let calls = 0;
    server.use(
      http.get(`${BASE}/v1/external/workspace`, () =>
        ++calls < 3 ? HttpResponse.json({ error: { code: "unavailable", message: "auth store down" } }, { status: 503 }) : HttpResponse.json({ workspace: { id: "w", name: "n" }, scope: "read" }),
      ),
    );
    const ws = await client({ maxRetries: 3 }).workspace(signal());
    expect(ws.workspace.id).toBe("w");
    expect(calls).toBe(3);
  });

  it("context travels as fields: a detail 404 carries endpoint, SKU, status and code; the message names the SKU once", async () => {
    server.use(http.get(`${BASE}/v1/external/inventory-status/${SKU}`, () => HttpResponse.json({ error: { code: "not_found", message: "no such SKU" } }, { status: 404 })));
    const err = await rejection(client().detail(SKU, signal()));
    expect(err).toMatchObject({ kind: "http", endpoint: "detail", skuId: SKU, status: 404, code: "not_found", retryAfter: null });
    expect(err.message).toBe(`detail (SKU ${SKU}): HTTP 404 (not_found: no such SKU)`);
  });

  it("a transport failure of a SKU's request names the SKU (as a field and once in the message); a request without one names none", async () => {
    server.use(http.get(`${BASE}/v1/external/inventory-status/${SKU}/history`, () => HttpResponse.error()));
    const err = await rejection(client().historyPage(SKU, {}, signal()));
    // The scheduler may wrap it ("gave up after 1 attempts"): the client's own error is the innermost.
    expect(innermost(err)).toMatchObject({ kind: "network", endpoint: "history", skuId: SKU });
    expect(err.message).toMatch(new RegExp(`^history \\(SKU ${SKU}\\): network error`));
    expect(err.message.split(SKU)).toHaveLength(2);

    server.use(http.get(`${BASE}/v1/external/locations`, () => HttpResponse.error()));
    const plain = await rejection(client().locations(signal()));
    expect(innermost(plain)).toMatchObject({ kind: "network", endpoint: "locations", skuId: null });
    expect(plain.message).toMatch(/^locations: network error/);
  });

  it("a 429's Retry-After travels as the error's retryAfter field", async () => {
    server.use(http.get(`${BASE}/v1/external/inventory-status`, () => HttpResponse.json({ error: { code: "rate_limited", message: "slow down" } }, { status: 429, headers: { "retry-after": "7" } })));
    const err = await rejection(client().listPage({}, signal()));
    expect(err).toMatchObject({ kind: "http", status: 429, code: "rate_limited", retryAfter: "7" });
    expect(err.cause).toBeUndefined();
  });

  it("every answer's status reaches the scheduler with its Date header (the server's clock, which its Retry-After dates are written in), a 429's and a 200's", async () => {
    const seen: Array<[number, string | null]> = [];
    const recording = {
      run: <T>(_e: string, attempt: (onStatus: (status: number, serverDate: string | null) => void) => Promise<T>) => attempt((status, date) => seen.push([status, date])),
    };
    const api = new ApiClient({
      baseUrl: new URL(BASE),
      key: new Secret(KEY),
      scheduler: recording as never,
      http: { connectTimeoutMs: 2_000, responseTimeoutMs: 5_000, maxResponseBytes: 1_000_000, connections: 2 },
      transport: fetchTransport,
    });
    server.use(http.get(`${BASE}/v1/external/workspace`, () => HttpResponse.json({}, { status: 429, headers: { "retry-after": "1", date: "Sun, 29 Nov 2026 08:00:05 GMT" } })));
    await rejection(api.workspace(signal()));
    server.use(http.get(`${BASE}/v1/external/workspace`, () => HttpResponse.json({ workspace: { id: "w", name: "W" }, scope: "read" }, { headers: { date: "Sun, 29 Nov 2026 08:00:06 GMT" } })));
    await api.workspace(signal());
    expect(seen).toEqual([
      [429, "Sun, 29 Nov 2026 08:00:05 GMT"],
      [200, "Sun, 29 Nov 2026 08:00:06 GMT"],
    ]);
  });

  it("a Retry-After that echoes the Authorization header reaches the error without the key", async () => {
    server.use(
      http.get(`${BASE}/v1/external/inventory-status`, ({ request }) =>
        HttpResponse.json({}, { status: 429, headers: { "retry-after": `${request.headers.get("authorization")} ${"9".repeat(500)}` } }),
      ),
    );
    const err = await rejection(client().listPage({}, signal()));
    expect(err.retryAfter).not.toBeNull();
    expect(err.retryAfter).not.toContain(KEY);
    expect(err.retryAfter!.length).toBeLessThanOrEqual(100);
  });
});

describe("transport", () => {
  /** A real server on 127.0.0.1 and an msw handler for the same URL: which of the two answers shows which transport was used. */
  async function bothAnswering(run: (base: string) => Promise<string>): Promise<{ name: string; realServerSaw: number; mswSaw: number }> {
    let realServerSaw = 0;
    let mswSaw = 0;
    const real = createServer((_req, res) => {
      realServerSaw++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ workspace: { id: "w", name: "real" }, scope: "read" }));
    });
    await new Promise<void>((resolve) => real.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(real.address() as AddressInfo).port}`;
    server.use(
      http.get(`${base}/v1/external/workspace`, () => {
        mswSaw++;
        return HttpResponse.json({ workspace: { id: "w", name: "msw" }, scope: "read" });
      }),
    );
    try {
      return { name: await run(base), realServerSaw, mswSaw };
    } finally {
      real.closeAllConnections();
      await new Promise<void>((resolve) => real.close(() => resolve()));
    }
  }

  it("is the caller's choice: poolTransport goes to the network even while msw has replaced globalThis.fetch", async () => {
    const seen = await bothAnswering(async (base) => {
      const c = client({ baseUrl: base, transport: poolTransport });
      try {
        return (await c.workspace(signal())).workspace.name!;
      } finally {
        await c.close();
      }
    });
    expect(seen).toEqual({ name: "real", realServerSaw: 1, mswSaw: 0 });
  });

  it("fetchTransport goes through globalThis.fetch, so msw answers", async () => {
    const seen = await bothAnswering(async (base) => {
      const c = client({ baseUrl: base, transport: fetchTransport });
      try {
        return (await c.workspace(signal())).workspace.name!;
      } finally {
        await c.close();
      }
    });
    expect(seen).toEqual({ name: "msw", realServerSaw: 0, mswSaw: 1 });
  });
});
