/**
 * fast-check generators of API bodies, shared by the fuzz tests: valid-shaped records of
 * every endpoint, adversarial values (wrong types, nulls, huge and NaN-like numbers, deep
 * nesting, long strings, prototype keys, non-UUID and path-traversal ids, control
 * characters), mutations that put them anywhere in a valid record, and JSON text with raw
 * tokens JSON.stringify cannot write (1e999, NaN, -0).
 */
import fc from "fast-check";
import type { EndpointName } from "../../src/core/defaults.js";

/** The SKU the detail and history generators describe. */
export const SKU = "0b6c4a52-7d3e-4f1a-9c2b-1e5d8f7a6b3c";

const iso = fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true }).map((d) => d.toISOString());
const text = fc.string({ maxLength: 12 });
const qty = fc.oneof(fc.integer({ min: -1_000, max: 1_000_000 }), fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }));
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null });

const product = fc.record({ id: text, name: text, brand: text }, { requiredKeys: [] });
const sku = fc.record(
  {
    id: fc.uuid(),
    code: maybe(text),
    skuCode: maybe(text),
    name: maybe(text),
    barcode: maybe(text),
    unit: maybe(text),
    product: maybe(product),
    options: fc.dictionary(text, fc.oneof(text, fc.integer(), fc.boolean())),
  },
  { requiredKeys: ["id"] },
);
const page = fc.oneof(fc.record({ nextCursor: maybe(fc.string({ minLength: 1, maxLength: 40 })) }), fc.constant(null));
const location = fc.record(
  {
    id: fc.uuid(),
    name: text,
    code: text,
    parentId: maybe(fc.uuid()),
    parentName: maybe(text),
    nodeKind: fc.constantFrom("location", "section", "leaf"),
    depth: fc.nat(5),
    pathIds: fc.array(fc.uuid(), { maxLength: 3 }),
    pathNames: fc.array(text, { maxLength: 3 }),
    displayPath: text,
    isLeaf: fc.boolean(),
    childCount: fc.nat(9),
    selectable: fc.boolean(),
    status: fc.constantFrom("active", "archived"),
    updatedAt: iso,
  },
  { requiredKeys: ["id"] },
);
export const historyRow = fc.record(
  {
    kind: fc.constantFrom("movement", "set"),
    occurredAt: iso,
    direction: fc.constantFrom("in", "out", "none"),
    quantity: qty,
    locationId: fc.uuid(),
    locationName: maybe(text),
    locationCode: maybe(text),
    eventId: maybe(fc.uuid()),
    eventTypeCode: maybe(text),
    eventTypeName: maybe(text),
    setSessionId: maybe(text),
    setTypeCode: maybe(text),
    observedQuantity: maybe(qty),
    note: maybe(text),
  },
  { requiredKeys: ["kind", "occurredAt", "quantity", "locationId"] },
);
export const VALID: Record<EndpointName, fc.Arbitrary<Record<string, unknown>>> = {
  workspace: fc.record({ workspace: fc.record({ id: fc.string({ minLength: 1, maxLength: 36 }), name: text }), scope: fc.constant("read") }),
  locations: fc.record({ locations: fc.array(location, { maxLength: 4 }) }),
  list: fc.record(
    {
      locations: fc.array(
        fc.record({
          id: fc.uuid(),
          name: text,
          code: text,
          childCount: fc.nat(9),
          leafLocationIds: fc.array(fc.uuid(), { maxLength: 3 }),
          skuCount: fc.nat(99),
          totalQuantity: qty,
          averageQuantityPerSku: qty,
        }),
        { maxLength: 2 },
      ),
      summary: maybe(fc.record({ skuCount: fc.nat(99), totalQuantity: qty, averageQuantityPerSku: qty })),
      items: fc.array(
        fc.tuple(sku, qty, fc.dictionary(fc.uuid(), qty, { maxKeys: 3 })).map(([s, t, lq]) => ({ ...s, totalQuantity: t, locationQuantities: lq })),
        { maxLength: 4 },
      ),
      page,
    },
    { requiredKeys: ["items"] },
  ),
  detail: fc.record({
    sku: sku.map((s) => ({ ...s, id: SKU })),
    selectedQuantity: maybe(qty),
    totalQuantity: qty,
    locations: fc.array(
      fc.record({
        id: fc.uuid(),
        name: text,
        code: text,
        parentId: fc.uuid(),
        quantity: qty,
        freshness: fc.record({ status: fc.constantFrom("clean", "dirty", "rebuilding", "failed", "new"), lastReplayedAt: iso, lastSourceKind: text }, { requiredKeys: [] }),
      }),
      { maxLength: 4 },
    ),
  }),
  history: fc.record({ items: fc.array(historyRow, { maxLength: 5 }), page }),
};

/** Raw JSON tokens JSON.stringify cannot produce: spliced into the text where these strings stand. */
const RAW: Record<string, string> = { "\u0000RAW:1e999": "1e999", "\u0000RAW:-1e999": "-1e999", "\u0000RAW:NaN": "NaN", "\u0000RAW:1.0e+2": "1.0e+2", "\u0000RAW:-0": "-0" };

/** Values a hostile or broken server puts where a field should be. */
export const adversarial: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(
    null,
    "",
    " ",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "0x10",
    "12",
    "null",
    "undefined",
    "true",
    "__proto__",
    "constructor",
    "../../../etc/passwd",
    "..%2F..%2Fworkspace",
    "%2e%2e%2f",
    "a/b?c#d",
    "\u0000",
    "\ud800",
    "💥",
    "00000000-0000-0000-0000-000000000000",
    "line 1\nline 2",
    '\r\n{"level":50,"msg":"forged log line"}',
    "tab\there",
    "\u2028",
    "\u001b[31mred",
    `${SKU}/../../workspace`,
    `${SKU}\n`,
    ` ${SKU}`,
    SKU.toUpperCase(),
    "0b6c4a527d3e4f1a9c2b1e5d8f7a6b3c",
    1e308,
    -1e308,
    Number.MAX_SAFE_INTEGER + 2,
    Number.MIN_VALUE,
    -0,
    0,
    -1,
    2 ** 31,
    1.5,
    true,
    false,
    [],
    {},
    [null],
    { "": null },
    ...Object.keys(RAW),
  ),
  fc.string(),
  fc.string({ unit: "binary", maxLength: 30 }),
  fc.integer(),
  fc.double(),
  fc.jsonValue({ maxDepth: 3 }),
  fc.integer({ min: 1, max: 60 }).map((d) => JSON.parse("[".repeat(d) + "]".repeat(d)) as unknown),
  fc.nat({ max: 200_000 }).map((n) => "x".repeat(n)),
  fc.constantFrom("__proto__", "constructor", "prototype").map((k) => withOwnKey({}, k, { polluted: true, isAdmin: true })),
);

function withOwnKey(o: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  // An own, enumerable "__proto__" key, as JSON.parse makes it, so JSON.stringify sends it.
  Object.defineProperty(o, key, { value, enumerable: true, configurable: true, writable: true });
  return o;
}

export type Mutation = { at: number; op: "set" | "delete" | "add"; value: unknown; key: string };
export const mutation: fc.Arbitrary<Mutation> = fc.record({
  at: fc.nat(),
  op: fc.constantFrom("set", "set", "delete", "add"),
  value: adversarial,
  key: fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "id", "then", "a\nb", "x".repeat(5_000)), text, fc.string({ unit: "binary", maxLength: 8 })),
});

/** Every container (object or array) in `v`, with the keys it holds. */
function containers(v: unknown, out: Array<Record<string, unknown> | unknown[]> = []): Array<Record<string, unknown> | unknown[]> {
  if (v && typeof v === "object") {
    out.push(v as Record<string, unknown>);
    for (const child of Object.values(v)) containers(child, out);
  }
  return out;
}

export function mutate(body: Record<string, unknown>, muts: Mutation[]): unknown {
  const b = structuredClone(body) as Record<string, unknown>;
  for (const m of muts) {
    const all = containers(b);
    const c = all[m.at % all.length]!;
    const keys = Object.keys(c);
    if (m.op === "add" || keys.length === 0) withOwnKey(c as Record<string, unknown>, Array.isArray(c) ? String(c.length) : m.key, m.value);
    else if (m.op === "delete") delete (c as Record<string, unknown>)[keys[m.at % keys.length]!];
    else withOwnKey(c as Record<string, unknown>, keys[m.at % keys.length]!, m.value);
  }
  return b;
}

export function toText(v: unknown): string {
  let t = JSON.stringify(v) ?? "null";
  for (const [marker, raw] of Object.entries(RAW)) t = t.split(JSON.stringify(marker)).join(raw);
  return t;
}
