/**
 * The API's resource shapes (../shared/inventory-api.md), as zod schemas.
 *
 * These are the only door through which server data enters the program: the
 * client parses every body with one of them, and the simulator types its
 * responses with the inferred types so it cannot drift from what we accept.
 *
 * Tolerant-reader rules (each is an assumption about what the document leaves
 * "not shown"; the README repeats them):
 * - Unknown extra fields are accepted and dropped (zod's default `strip`).
 * - Fields whose nullability the document does not state may be null or
 *   absent; they are normalised to `null` so the store sees one shape.
 * - What makes a record unusable fails: a missing or non-UUID `id`, a
 *   quantity that is not a finite number, a history row without `kind`,
 *   `occurredAt` or `locationId`.
 * - `page` / `page.nextCursor` may be missing, null or "" on the last page.
 */
import { z } from "zod";

/** 8-4-4-4-12 hex. Deliberately not RFC-version-strict: the server only promises "UUID string". */
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/**
 * An ISO 8601 moment with its zone, to the second or finer ("2026-11-29T06:00:05.120Z", what `toISOString()`
 * writes): a `Retry-After` form outside RFC 9110 that some servers send. One pattern for the client, which waits
 * for it (scheduler/retry-after.ts), and the simulator's ledger, which holds clients to it: the two agree on what
 * names a moment. Without a zone it would be local time, so it is not one.
 */
export const ISO_MOMENT_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?(Z|[+-]\d{2}:\d{2})$/;
const uuid = z.string().regex(UUID_RE, "expected a UUID");

/** A finite JSON number (NaN/Infinity cannot come from JSON, but strings like "12" must not pass). */
const quantity = z.number().refine(Number.isFinite, "expected a finite number");

/** An optional string that may be null or missing; normalised to null. */
const optString = z
  .string()
  .nullish()
  .transform((v) => v ?? null);
const optInt = z
  .number()
  .int()
  .nullish()
  .transform((v) => v ?? null);
const optBool = z
  .boolean()
  .nullish()
  .transform((v) => v ?? null);
const optStringArray = z
  .array(z.string())
  .nullish()
  .transform((v) => v ?? null);

export const WorkspaceResponse = z.object({
  workspace: z.object({ id: z.string().min(1), name: z.string() }),
  scope: z.string(),
});
export type WorkspaceResponse = z.infer<typeof WorkspaceResponse>;

export const LocationNode = z.object({
  id: uuid,
  name: optString,
  code: optString,
  parentId: uuid.nullish().transform((v) => v ?? null),
  parentName: optString,
  nodeKind: optString,
  depth: optInt,
  pathIds: optStringArray,
  pathNames: optStringArray,
  displayPath: optString,
  isLeaf: optBool,
  childCount: optInt,
  selectable: optBool,
  status: optString,
  updatedAt: optString,
});
export type LocationNode = z.output<typeof LocationNode>;
export type LocationNodeIn = z.input<typeof LocationNode>;

export const LocationsResponse = z.object({ locations: z.array(LocationNode) });
export type LocationsResponse = z.output<typeof LocationsResponse>;

const Product = z
  .object({ id: optString, name: optString, brand: optString })
  .nullish()
  .transform((v) => v ?? { id: null, name: null, brand: null });

/** Option values are documented as strings; scalars of other types are kept as their JSON text. */
const Options = z
  .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
  .nullish()
  .transform((v) => v ?? {});

export const Sku = z.object({
  id: uuid,
  code: optString,
  skuCode: optString,
  name: optString,
  barcode: optString,
  unit: optString,
  product: Product,
  options: Options,
});
export type Sku = z.output<typeof Sku>;

export const ListItem = Sku.extend({
  totalQuantity: quantity,
  locationQuantities: z
    .record(z.string(), quantity)
    .nullish()
    .transform((v) => v ?? {}),
});
export type ListItem = z.output<typeof ListItem>;

export const RootSummary = z.object({
  id: z.string(),
  name: optString,
  code: optString,
  childCount: optInt,
  leafLocationIds: optStringArray,
  skuCount: optInt,
  totalQuantity: quantity.nullish().transform((v) => v ?? null),
  averageQuantityPerSku: quantity.nullish().transform((v) => v ?? null),
});
export type RootSummary = z.output<typeof RootSummary>;

export const Summary = z.object({
  skuCount: optInt,
  totalQuantity: quantity.nullish().transform((v) => v ?? null),
  averageQuantityPerSku: quantity.nullish().transform((v) => v ?? null),
});
export type Summary = z.output<typeof Summary>;

/**
 * A cursor is sent back as a query value, byte for byte. So it must be text that survives
 * URL encoding unchanged (no lone UTF-16 surrogates, which would be sent as U+FFFD, a
 * different cursor) and short enough for a URL (servers refuse request lines over ~8 KB).
 */
export const MAX_CURSOR_LENGTH = 4096;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const cursor = z
  .string()
  .max(MAX_CURSOR_LENGTH, `expected a cursor of at most ${MAX_CURSOR_LENGTH} characters`)
  .refine((c) => !LONE_SURROGATE.test(c), "expected a cursor of well-formed text (it holds a lone surrogate, which a URL cannot carry unchanged)");

const Page = z
  .object({ nextCursor: cursor.nullish() })
  .nullish()
  .transform((p) => ({ nextCursor: p?.nextCursor ? p.nextCursor : null }));

export const ListResponse = z.object({
  locations: z
    .array(RootSummary)
    .nullish()
    .transform((v) => v ?? []),
  summary: Summary.nullish().transform((v) => v ?? null),
  items: z.array(ListItem),
  page: Page,
});
export type ListResponse = z.output<typeof ListResponse>;

const Freshness = z
  .object({ status: optString, lastReplayedAt: optString, lastSourceKind: optString })
  .nullish()
  .transform((v) => v ?? { status: null, lastReplayedAt: null, lastSourceKind: null });

export const DetailLocation = z.object({
  id: uuid,
  name: optString,
  code: optString,
  parentId: optString,
  quantity,
  freshness: Freshness,
});
export type DetailLocation = z.output<typeof DetailLocation>;

export const DetailResponse = z.object({
  sku: Sku,
  selectedQuantity: quantity.nullish().transform((v) => v ?? null),
  totalQuantity: quantity,
  locations: z.array(DetailLocation),
});
export type DetailResponse = z.output<typeof DetailResponse>;

export const HistoryRow = z.object({
  kind: z.string().min(1),
  occurredAt: z.string().min(1),
  direction: optString,
  quantity,
  locationId: z.string().min(1),
  locationName: optString,
  locationCode: optString,
  eventId: optString,
  eventTypeCode: optString,
  eventTypeName: optString,
  setSessionId: optString,
  setTypeCode: optString,
  observedQuantity: quantity.nullish().transform((v) => v ?? null),
  note: optString,
});
export type HistoryRow = z.output<typeof HistoryRow>;

export const HistoryResponse = z.object({
  items: z.array(HistoryRow),
  page: Page,
});
export type HistoryResponse = z.output<typeof HistoryResponse>;

export const ErrorBody = z.object({
  error: z.object({ code: z.string().nullish(), message: z.string().nullish() }),
});

/** Freshness statuses that mean "the latest scan is reflected". Anything else, known or not, is flagged. */
export const CLEAN_FRESHNESS = "clean";
export function scanNotReflected(status: string | null): boolean {
  return status !== CLEAN_FRESHNESS;
}

/**
 * The signed effect of a history row on a leaf's quantity.
 * Assumption (not shown in the document): a movement's `quantity` is an
 * amount whose sign comes from `direction` (`out` subtracts). A SET's
 * `quantity` is "the delta against the projection just before"; we accept it
 * signed, or unsigned with `direction` giving the sign. Both readings agree
 * whenever the server is consistent, so `direction` decides when it is
 * `in`/`out`, and the raw value is used as-is for `none`.
 */
export function signedDelta(row: Pick<HistoryRow, "direction" | "quantity">): number {
  if (row.direction === "out") return -Math.abs(row.quantity);
  if (row.direction === "in") return Math.abs(row.quantity);
  return row.quantity;
}
