/**
 * The server's answers are input too. Property-based tests (fast-check, fixed seed) throw
 * random and adversarial bodies at every endpoint's parser, through the real client
 * (ApiClient + RequestScheduler + undici) and a real socket: a node:http server on
 * 127.0.0.1 answers each call with the case's body.
 *
 * Every call must end in either a record that satisfies the schema's invariants (UUID ids,
 * finite numbers, strings or null, no undefined, nothing but the documented fields, no
 * polluted prototype) or an ApiError whose message begins with the endpoint's name and
 * stays one readable line; never any other exception.
 *
 * Also: ids are checked as UUIDs before they go into a path, cursors go back only as an
 * encoded query value (byte for byte), and a nesting bomb or a string bomb ends in a clear
 * error with bounded memory.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ApiClient } from "../../src/client/api-client.js";
import { poolTransport } from "../../src/client/transport.js";
import { MAX_JSON_DEPTH } from "../../src/client/http.js";
import { RequestScheduler } from "../../src/scheduler/scheduler.js";
import { ApiError } from "../../src/core/errors.js";
import { Secret } from "../../src/core/secret.js";
import { MAX_CURSOR_LENGTH, UUID_RE } from "../../src/core/api-schemas.js";
import type { EndpointName } from "../../src/core/defaults.js";
import { walkList } from "../../src/sync/walker.js";
import { adversarial, mutate, mutation, SKU, toText, VALID } from "./arbitraries.js";

const SEED = 4242;
const KEY = "imk_fuzz_9f8e7d6c5b4a39281706f5e4d3c2b1a0";

// ---------------------------------------------------------------------------------------------
// The server: answers every request with the current reply, and records what it was asked.

interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body: string | Buffer | ((res: ServerResponse) => void);
}
let reply: (req: IncomingMessage) => Reply = () => ({ body: "{}" });
const requests: string[] = [];
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    requests.push(req.url ?? "");
    const r = reply(req);
    if (typeof r.body === "function") return r.body(res);
    res.writeHead(r.status ?? 200, { "content-type": "application/json", ...r.headers });
    res.end(r.body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function makeClient(maxResponseBytes = 1_000_000): ApiClient {
  return new ApiClient({
    baseUrl: new URL(base),
    key: new Secret(KEY),
    scheduler: new RequestScheduler({ concurrency: 1, requestsPerSecond: null, maxRetries: 0, max429Retries: 0, backoffBaseMs: 1, backoffCapMs: 1, minRetryAfterMs: 1, maxWaitMs: 1_000 }),
    http: { connectTimeoutMs: 2_000, responseTimeoutMs: 5_000, maxResponseBytes, connections: 1 },
    transport: poolTransport,
  });
}

const CALLS: Record<EndpointName, (c: ApiClient, signal: AbortSignal) => Promise<unknown>> = {
  workspace: (c, s) => c.workspace(s),
  locations: (c, s) => c.locations(s),
  list: (c, s) => c.listPage({ limit: 100 }, s),
  detail: (c, s) => c.detail(SKU, s),
  history: (c, s) => c.historyPage(SKU, { limit: 100 }, s),
};

// ---------------------------------------------------------------------------------------------
// What a parsed record must look like: a small shape language, checked after every success.

type Shape = "uuid" | "str" | "str?" | "num" | "num?" | "int?" | "bool?" | "str[]?" | "scalar?" | "checked separately" | { obj: Record<string, Shape> } | { arr: Shape } | { rec: Shape };

const SKU_SHAPE: Record<string, Shape> = {
  id: "uuid",
  code: "str?",
  skuCode: "str?",
  name: "str?",
  barcode: "str?",
  unit: "str?",
  product: { obj: { id: "str?", name: "str?", brand: "str?" } },
  options: { rec: "scalar?" },
};
const PAGE: Shape = { obj: { nextCursor: "str?" } };
const SHAPES: Record<EndpointName, Shape> = {
  workspace: { obj: { workspace: { obj: { id: "str", name: "str" } }, scope: "str" } },
  locations: {
    obj: {
      locations: {
        arr: {
          obj: {
            id: "uuid",
            name: "str?",
            code: "str?",
            parentId: "str?",
            parentName: "str?",
            nodeKind: "str?",
            depth: "int?",
            pathIds: "str[]?",
            pathNames: "str[]?",
            displayPath: "str?",
            isLeaf: "bool?",
            childCount: "int?",
            selectable: "bool?",
            status: "str?",
            updatedAt: "str?",
          },
        },
      },
    },
  },
  list: {
    obj: {
      locations: { arr: { obj: { id: "str", name: "str?", code: "str?", childCount: "int?", leafLocationIds: "str[]?", skuCount: "int?", totalQuantity: "num?", averageQuantityPerSku: "num?" } } },
      summary: "checked separately",
      items: { arr: { obj: { ...SKU_SHAPE, totalQuantity: "num", locationQuantities: { rec: "num" } } } },
      page: PAGE,
    },
  },
  detail: {
    obj: {
      sku: { obj: SKU_SHAPE },
      selectedQuantity: "num?",
      totalQuantity: "num",
      locations: {
        arr: { obj: { id: "uuid", name: "str?", code: "str?", parentId: "str?", quantity: "num", freshness: { obj: { status: "str?", lastReplayedAt: "str?", lastSourceKind: "str?" } } } },
      },
    },
  },
  history: {
    obj: {
      items: {
        arr: {
          obj: {
            kind: "str",
            occurredAt: "str",
            direction: "str?",
            quantity: "num",
            locationId: "str",
            locationName: "str?",
            locationCode: "str?",
            eventId: "str?",
            eventTypeCode: "str?",
            eventTypeName: "str?",
            setSessionId: "str?",
            setTypeCode: "str?",
            observedQuantity: "num?",
            note: "str?",
          },
        },
      },
      page: PAGE,
    },
  },
};

/** Violations of `shape` by `v` (empty when it conforms). */
function violations(v: unknown, shape: Shape, path = "$"): string[] {
  const bad = (what: string) => [`${path}: expected ${what}, got ${v === undefined ? "undefined" : JSON.stringify(v)?.slice(0, 60)}`];
  const finite = (x: unknown) => typeof x === "number" && Number.isFinite(x);
  switch (shape) {
    case "uuid":
      return typeof v === "string" && UUID_RE.test(v) ? [] : bad("a UUID");
    case "str":
      return typeof v === "string" ? [] : bad("a string");
    case "str?":
      return v === null || typeof v === "string" ? [] : bad("a string or null");
    case "num":
      return finite(v) ? [] : bad("a finite number");
    case "num?":
      return v === null || finite(v) ? [] : bad("a finite number or null");
    case "int?":
      return v === null || (finite(v) && Number.isInteger(v)) ? [] : bad("an integer or null");
    case "bool?":
      return v === null || typeof v === "boolean" ? [] : bad("a boolean or null");
    case "str[]?":
      return v === null || (Array.isArray(v) && v.every((x) => typeof x === "string")) ? [] : bad("an array of strings or null");
    case "scalar?":
      return v === null || ["string", "boolean"].includes(typeof v) || finite(v) ? [] : bad("a string, finite number, boolean or null");
    case "checked separately":
      return [];
  }
  if ("obj" in shape) {
    if (typeof v !== "object" || v === null || Array.isArray(v)) return bad("an object");
    if (Object.getPrototypeOf(v) !== Object.prototype) return bad("a plain object");
    const extra = Object.keys(v).filter((k) => !(k in shape.obj));
    if (extra.length) return [`${path}: undocumented field(s) kept: ${extra.join(", ")}`];
    return Object.entries(shape.obj).flatMap(([k, s]) => (Object.hasOwn(v as object, k) ? violations((v as Record<string, unknown>)[k], s, `${path}.${k}`) : [`${path}.${k}: missing`]));
  }
  if ("arr" in shape) return Array.isArray(v) ? v.flatMap((x, i) => violations(x, shape.arr, `${path}[${i}]`)) : bad("an array");
  if (typeof v !== "object" || v === null || Array.isArray(v)) return bad("a record");
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return bad("a plain record");
  return Object.entries(v).flatMap(([k, x]) => violations(x, shape.rec, `${path}[${JSON.stringify(k)}]`));
}

interface Case {
  status: number;
  contentType: string;
  text: string;
}

const caseFor = (endpoint: EndpointName): fc.Arbitrary<Case> => {
  const json = (text: fc.Arbitrary<string>) => text.map((t) => ({ status: 200, contentType: "application/json", text: t }));
  return fc.oneof(
    { weight: 2, arbitrary: json(VALID[endpoint].map(toText)) },
    { weight: 8, arbitrary: json(fc.tuple(VALID[endpoint], fc.array(mutation, { minLength: 1, maxLength: 4 })).map(([b, m]) => toText(mutate(b, m)))) },
    { weight: 2, arbitrary: json(fc.jsonValue({ maxDepth: 4 }).map(toText)) },
    { weight: 1, arbitrary: json(fc.string({ unit: "binary", maxLength: 200 })) },
    { weight: 1, arbitrary: json(VALID[endpoint].map((b) => toText(b).slice(0, -1))) },
    {
      weight: 2,
      arbitrary: fc.record({
        status: fc.constantFrom(400, 401, 403, 404, 410, 422, 429, 500, 502, 503, 504),
        contentType: fc.constantFrom("application/json", "text/html", "text/plain"),
        text: fc.oneof(
          adversarial.map(toText),
          adversarial.map((a) => toText({ error: { code: a, message: a } })),
          fc.string(),
        ),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        status: fc.constant(200),
        contentType: fc.constantFrom("text/html", "text/plain", "", "application/jsonx", "application/problem+json; charset=utf-8"),
        text: VALID[endpoint].map(toText),
      }),
    },
  );
};

const protoNames = Object.getOwnPropertyNames(Object.prototype).sort().join(",");

describe("every endpoint's parser: a valid record or a clear ApiError, never anything else", () => {
  let client: ApiClient;
  beforeAll(() => {
    client = makeClient();
  });
  afterAll(async () => {
    await client.close();
  });

  const RUNS = 500;
  for (const endpoint of Object.keys(CALLS) as EndpointName[]) {
    it(`${endpoint}: ${RUNS} random and adversarial bodies`, async () => {
      const outcomes = { parsed: 0, refused: 0 };
      await fc.assert(
        fc.asyncProperty(caseFor(endpoint), async (c) => {
          reply = () => ({ status: c.status, headers: { "content-type": c.contentType }, body: c.text });
          let result: unknown;
          try {
            result = await CALLS[endpoint](client, AbortSignal.timeout(10_000));
          } catch (err) {
            if (!(err instanceof ApiError)) throw new Error(`${endpoint}: not an ApiError but ${String(err)}`, { cause: err });
            expect(err.endpoint).toBe(endpoint);
            expect(err.message.startsWith(endpoint), err.message).toBe(true);
            expect(err.message.length, err.message.slice(0, 300)).toBeLessThan(1_500);
            expect(err.message).not.toContain("\n");
            outcomes.refused++;
            return;
          }
          expect(c.status).toBe(200);
          const v = violations(result, SHAPES[endpoint]);
          if (endpoint === "list") {
            const summary = (result as { summary: unknown }).summary;
            if (summary !== null) v.push(...violations(summary, { obj: { skuCount: "int?", totalQuantity: "num?", averageQuantityPerSku: "num?" } }, "$.summary"));
          }
          expect(v, c.text.slice(0, 500)).toEqual([]);
          outcomes.parsed++;
          // Nothing the server sent reached Object.prototype.
          expect(Object.getOwnPropertyNames(Object.prototype).sort().join(",")).toBe(protoNames);
          expect(({} as Record<string, unknown>).polluted).toBeUndefined();
        }),
        { seed: SEED, numRuns: RUNS },
      );
      // Both outcomes were exercised, so the property is not vacuous either way.
      expect(outcomes.parsed).toBeGreaterThan(RUNS / 20);
      expect(outcomes.refused).toBeGreaterThan(RUNS / 5);
    });
  }
});

describe("ids and cursors in URLs", () => {
  let client: ApiClient;
  beforeAll(() => {
    client = makeClient();
  });
  afterAll(async () => {
    await client.close();
  });

  const idLike = fc.oneof(
    fc.uuid(),
    fc.uuid().map((u) => u.toUpperCase()),
    fc.string(),
    fc.string({ unit: "binary" }),
    fc.uuid().chain((u) => fc.constantFrom(`${u}/../../workspace`, `${u}%2F..%2Fworkspace`, `${u}\n`, `${u}?x=1`, `${u}#f`, ` ${u}`, `${u}/history`, u.replace(/-/g, ""), `../${u}`)),
    fc.constantFrom("..", ".", "/", "%2e%2e", "../../v1/external/workspace", "", "\u0000"),
  );

  it("an id goes into a path only when it is a UUID; anything else is refused before a request (detail, history, scope)", async () => {
    reply = () => ({ body: "{}" });
    await fc.assert(
      fc.asyncProperty(idLike, fc.constantFrom("detail", "history", "list-scope", "history-scope"), async (id, where) => {
        requests.length = 0;
        const call =
          where === "detail"
            ? client.detail(id, AbortSignal.timeout(5_000))
            : where === "history"
              ? client.historyPage(id, {}, AbortSignal.timeout(5_000))
              : where === "list-scope"
                ? client.listPage({ scopeLocationId: id }, AbortSignal.timeout(5_000))
                : client.historyPage(SKU, { scopeLocationId: id }, AbortSignal.timeout(5_000));
        const err = await call.then(
          () => null,
          (e: unknown) => e,
        );
        if (!UUID_RE.test(id)) {
          // Empty scope means "no scope": not sent at all.
          if (id === "" && where.endsWith("scope")) return;
          expect(err).toBeInstanceOf(ApiError);
          expect((err as ApiError).message).toMatch(/refusing to send (skuId|scopeLocationId) .*: not a UUID/);
          expect(requests).toEqual([]);
          return;
        }
        // A UUID was sent, exactly, as one path segment or one query value (the body "{}" then fails validation).
        expect(requests).toHaveLength(1);
        const u = new URL(requests[0]!, base);
        if (where === "detail") expect(u.pathname).toBe(`/v1/external/inventory-status/${id}`);
        if (where === "history") expect(u.pathname).toBe(`/v1/external/inventory-status/${id}/history`);
        if (where.endsWith("scope")) expect(u.searchParams.get("scopeLocationId")).toBe(id);
      }),
      { seed: SEED, numRuns: 400 },
    );
  });

  it("a cursor goes back byte for byte as one encoded query value, or the page is refused (list walk, history)", async () => {
    const cursorArb = fc.oneof(
      fc.string({ minLength: 1, maxLength: 80 }),
      fc.string({ unit: "binary", minLength: 1, maxLength: 40 }),
      fc.string({ unit: "grapheme", minLength: 1, maxLength: 20 }),
      fc.constantFrom("a+b/c==&d e%2F~é", "&limit=1&scopeLocationId=x", "#frag", "../../workspace", "?cursor=x", "\r\nX-Injected: 1", "%00", "\ud800x", "x\udc00", "💥".repeat(10)),
      fc.nat({ max: 3 }).map((k) => "c".repeat(MAX_CURSOR_LENGTH - 1 + k)),
    );
    await fc.assert(
      fc.asyncProperty(cursorArb, fc.boolean(), async (cursor, history) => {
        requests.length = 0;
        reply = (req) => {
          const first = !new URL(req.url ?? "/", base).searchParams.has("cursor");
          const next = first ? cursor : null;
          return { body: JSON.stringify(history ? { items: [], page: { nextCursor: next } } : { items: [], page: { nextCursor: next } }) };
        };
        let err: unknown = null;
        try {
          if (history) {
            const p1 = await client.historyPage(SKU, { limit: 100 }, AbortSignal.timeout(5_000));
            await client.historyPage(SKU, { limit: 100, cursor: p1.page.nextCursor }, AbortSignal.timeout(5_000));
          } else {
            for await (const _ of walkList(client, { limit: 100, startCursor: null }, AbortSignal.timeout(5_000))) void _;
          }
        } catch (e) {
          err = e;
        }
        const wellFormed = !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(cursor);
        if (!wellFormed || cursor.length > MAX_CURSOR_LENGTH) {
          expect(err).toBeInstanceOf(ApiError);
          expect((err as ApiError).message).toMatch(/field page\.nextCursor: expected a cursor/);
          expect(requests).toHaveLength(1);
          return;
        }
        expect(err).toBeNull();
        expect(requests).toHaveLength(2);
        const second = new URL(requests[1]!, base);
        expect(second.pathname).toBe(history ? `/v1/external/inventory-status/${SKU}/history` : "/v1/external/inventory-status");
        expect(second.searchParams.getAll("cursor")).toEqual([cursor]);
        expect([...second.searchParams.keys()].sort()).toEqual(["cursor", "limit"]);
        // Nothing outside the query: no raw control characters, spaces or '#' reached the request line.
        expect(requests[1]).not.toMatch(/[\s#\u0000-\u001f]/);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});

describe("bombs: a clear error with bounded memory", () => {
  const heapMb = () => process.memoryUsage().heapUsed / 1024 / 1024;

  it(`a nesting bomb ([[[[...]]]] a million deep) is refused unparsed, past ${MAX_JSON_DEPTH} levels`, async () => {
    const client = makeClient(8 * 1024 * 1024);
    try {
      const bomb = "[".repeat(1_000_000) + "]".repeat(1_000_000);
      for (const endpoint of Object.keys(CALLS) as EndpointName[]) {
        reply = () => ({ body: bomb });
        const before = heapMb();
        const t0 = Date.now();
        const err = await CALLS[endpoint](client, AbortSignal.timeout(10_000)).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(ApiError);
        expect((err as ApiError).message).toMatch(new RegExp(`^${endpoint}( \\(SKU [^)]+\\))?: the response nests deeper than ${MAX_JSON_DEPTH} levels \\(at character ${MAX_JSON_DEPTH}\\)`));
        expect(Date.now() - t0).toBeLessThan(2_000);
        // JSON.parse of it would hold ~100 MB of nested arrays; the 2 MB text is all we keep.
        expect(heapMb() - before).toBeLessThan(40);
      }
      // An object bomb too, and one hidden after a valid prefix.
      reply = () => ({ body: '{"items":[],"page":null,"x":' + '{"a":'.repeat(200_000) + "1" + "}".repeat(200_001) });
      await expect(client.historyPage(SKU, {}, AbortSignal.timeout(10_000))).rejects.toThrow(/^history \(SKU [^)]+\): the response nests deeper than 64 levels/);
    } finally {
      await client.close();
    }
  });

  it("brackets inside strings are not nesting: a body with '[[[[' and escaped quotes in its text parses", async () => {
    const client = makeClient();
    try {
      const tricky = `[[[[{{{{\\"]]]] \\\\" ${"[".repeat(500)}`;
      reply = () => ({ body: JSON.stringify({ workspace: { id: "w", name: tricky }, scope: "read" }) });
      const ws = await client.workspace(AbortSignal.timeout(5_000));
      expect(ws.workspace.name).toBe(tricky);
    } finally {
      await client.close();
    }
  });

  for (const declared of [false, true]) {
    it(`a string bomb larger than the cap is cut off at the cap (${declared ? "declared Content-Length" : "chunked, no length"})`, async () => {
      const cap = 1024 * 1024;
      const client = makeClient(cap);
      const total = 64 * 1024 * 1024;
      let sent = 0;
      let aborted = false;
      reply = () => ({
        body: (res) => {
          res.writeHead(200, { "content-type": "application/json", ...(declared ? { "content-length": String(total) } : {}) });
          res.on("close", () => (aborted = sent < total));
          const chunk = Buffer.alloc(64 * 1024, "x");
          res.write('{"workspace":{"id":"w","name":"');
          const pump = () => {
            while (sent < total && !res.destroyed) {
              sent += chunk.length;
              if (!res.write(chunk)) return void res.once("drain", pump);
            }
            if (!res.destroyed) res.end('"},"scope":"read"}');
          };
          pump();
        },
      });
      try {
        const before = heapMb();
        const err = await client.workspace(AbortSignal.timeout(10_000)).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(ApiError);
        expect((err as ApiError).message).toMatch(
          declared ? /^workspace: response of \d+ bytes exceeds the 1048576-byte cap \(http\.maxResponseBytes\)/ : /^workspace: response exceeds the 1048576-byte cap \(http\.maxResponseBytes\)/,
        );
        expect(heapMb() - before).toBeLessThan(24);
        // The client stopped reading: the server never got to send the 64 MB.
        await new Promise((r) => setTimeout(r, 200));
        expect(aborted).toBe(true);
        expect(sent).toBeLessThan(total);
      } finally {
        await client.close();
      }
    });
  }
});
