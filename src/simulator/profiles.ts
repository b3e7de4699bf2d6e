/**
 * Named server profiles: each is a bundle of simulator options that makes the simulator
 * behave like another server the API document equally allows (another item order, nulls
 * left out instead of sent, identical history rows, another quota shape...). The suite runs
 * the mirror against each; `inventory-mirror simulate --profile NAME` (repeatable) serves one.
 * docs/server-variance.md lists every open point of the document, the profiles that vary
 * it and the test that covers it.
 */
import type { SimulatorOptions } from "./index.js";
import { QUOTA_PROFILES } from "./quota-profiles.js";
import type { ServerProfile } from "./server-profile.js";

export type { ServerProfile };

export const SERVER_PROFILES: Record<string, ServerProfile> = {
  default: { about: "the simulator's own choices (README 'Simulator', src/simulator/index.ts)", options: {} },
  "history-identical-rows": {
    about:
      "history rows identical in every field (one event with two equal lines): a pair inside one page, a pair split by the page boundary (rows 100/101), a pair among ~150 ties (src/simulator/history-variance.ts)",
    options: { identicalRows: 3 },
  },
  "history-ties": {
    about: "long runs of history rows sharing one occurredAt (~150 rows, across page boundaries at limit 100)",
    options: { tieRuns: 2 },
  },

  // ---- where the document says "not shown" or leaves a choice open (variance.ts) ----
  "list-reverse": { about: "list items ordered by id descending", options: { variance: { listOrder: "reverse" } } },
  "list-shuffled": { about: "list items in a stable order that is not by id (a keyed hash of the id)", options: { variance: { listOrder: "shuffled" } } },
  "list-by-quantity": {
    about: "list items by total quantity, largest first, then id: an order that moves with the data (a SKU whose stock changes mid-walk is listed twice or not at all)",
    options: { variance: { listOrder: "quantity" } },
  },
  "children-first": {
    about: "locations endpoint lists children before their parents; detail locations by id descending",
    options: { variance: { locationOrder: "children-first", detailOrder: "reverse" } },
  },
  "last-cursor-absent": { about: "the last page has no page.nextCursor key", options: { variance: { lastCursor: "absent" } } },
  "last-cursor-empty": { about: 'the last page has page.nextCursor ""', options: { variance: { lastCursor: "empty" } } },
  "last-page-absent": { about: "the last page has no page object at all", options: { variance: { lastCursor: "no-page" } } },
  "url-hostile-cursors": {
    about: "cursors hold characters a URL must encode (+ / = & ? % # space, non-ASCII)",
    options: { variance: { cursorStyle: "url-hostile" } },
  },
  "omit-nulls": { about: "null-valued fields are left out instead of sent as null", options: { variance: { nulls: "omit" } } },
  "extra-fields": {
    about: "unknown extra fields on every object (top level, items, nested objects, history rows, errors), some changing per response",
    options: { variance: { extraFields: true } },
  },
  "zero-roots-omitted": { about: "roots where a SKU has 0 are left out of locationQuantities", options: { variance: { zeroRoots: "omit" } } },
  "zero-leaves-shown": { about: "detail shows every active leaf, with quantity 0 where the SKU never had stock", options: { variance: { zeroLeaves: "send" } } },
  "other-kinds": {
    about: "nodeKind zone / bin for sections / leaves; lastSourceKind movement_event / stocktake; location status archived where not active",
    options: { variance: { kinds: "other" } },
  },
  "other-error-codes": {
    about: "error codes beyond the named ones (e.g. RESOURCE_NOT_FOUND), 422 for bad parameters and cursors",
    options: { variance: { errors: "other" } },
  },
  "short-pages": { about: "the server serves at most 7 items per page whatever limit asks", options: { variance: { maxPageSize: 7 } } },
  "decimal-quantities": {
    about: "every quantity is a decimal (the integer x 0.1, float noise and all: history deltas add up to the leaf quantity only within a tolerance)",
    options: { variance: { quantities: "decimal" } },
  },
  "upper-case-ids": { about: "every UUID the server sends is in upper case (paths and query parameters accepted in either case)", options: { variance: { idCase: "upper" } } },
  "empty-pages": {
    about: "the first page of every list walk and of every third SKU's history walk is empty, with a cursor to the real first page",
    options: { variance: { emptyPages: true } },
  },
  "summary-first-page": { about: "the list's locations and summary are sent on the first page only, left out of pages fetched with a cursor", options: { variance: { summaryOnce: true } } },
  "offset-cursors": {
    about: "cursors hold an offset, not a keyset position: a write ahead of a walk's position shifts its next page (a row or SKU twice, or skipped)",
    options: { variance: { cursorPosition: "offset" } },
  },
  "live-writes": {
    about:
      "writes land mid-walk: a new movement right after the first page of 20 SKUs' history walks, the first listed SKU removed after a list page fetched with a cursor (twice); with offset-cursors, pages shift",
    options: { liveWrites: { history: 20, listRemovals: 2 } },
  },
  // ---- bundles of the above, so one end-to-end run covers several open points ----
  "order-variance": {
    about: "list-shuffled + children-first: nothing arrives in id or tree order",
    options: { variance: { listOrder: "shuffled", locationOrder: "children-first", detailOrder: "reverse" } },
  },
  "paging-variance": {
    about: "url-hostile-cursors + offset-cursors + last-cursor-absent + short-pages (5 per page) + empty-pages + summary-first-page",
    options: { variance: { cursorStyle: "url-hostile", cursorPosition: "offset", lastCursor: "absent", maxPageSize: 5, emptyPages: true, summaryOnce: true } },
  },
  "shape-variance": {
    about: "omit-nulls + extra-fields + last-cursor-empty",
    options: { variance: { nulls: "omit", extraFields: true, lastCursor: "empty" } },
  },
  "data-variance": {
    about: "zero-roots-omitted + zero-leaves-shown + other-kinds + other-error-codes + last-page-absent + decimal-quantities + upper-case-ids",
    options: { variance: { zeroRoots: "omit", zeroLeaves: "send", kinds: "other", errors: "other", lastCursor: "no-page", quantities: "decimal", idCase: "upper" } },
  },
  "all-variance": {
    about:
      "every variance option above at once (shuffled list, url-hostile offset cursors, no nulls, extra fields, zero roots out, zero leaves in, other kinds and errors, short pages, empty last cursor, decimal quantities, upper-case ids, empty first pages, summaries on the first page only)",
    options: {
      variance: {
        listOrder: "shuffled",
        locationOrder: "children-first",
        detailOrder: "reverse",
        lastCursor: "empty",
        cursorStyle: "url-hostile",
        cursorPosition: "offset",
        nulls: "omit",
        extraFields: true,
        zeroRoots: "omit",
        zeroLeaves: "send",
        kinds: "other",
        errors: "other",
        maxPageSize: 9,
        quantities: "decimal",
        idCase: "upper",
        emptyPages: true,
        summaryOnce: true,
      },
    },
  },
  ...QUOTA_PROFILES,
};

/**
 * What the server-variance end-to-end test runs by default: every single profile above that varies an open point of the document,
 * bundled so the file stays cheap (each bundle is a union of single profiles above; run one
 * single profile with SERVER_PROFILES=name). Other helpers' profiles join by name.
 */
export const VARIANCE_E2E_PROFILES: readonly string[] = [
  "default",
  "order-variance",
  "list-by-quantity",
  "paging-variance",
  "shape-variance",
  "data-variance",
  "all-variance",
  "history-identical-rows",
  "history-ties",
];

/** The options of the named profiles, merged left to right (later names win; nested objects merge). */
export function profileOptions(names: readonly string[]): Partial<SimulatorOptions> {
  let out: Partial<SimulatorOptions> = {};
  for (const name of names) {
    const p = SERVER_PROFILES[name];
    if (!p) throw new RangeError(`unknown server profile "${name}"; known: ${Object.keys(SERVER_PROFILES).join(", ")}`);
    out = mergeOptions(out, p.options);
  }
  return out;
}

function mergeOptions(a: Partial<SimulatorOptions>, b: Partial<SimulatorOptions>): Partial<SimulatorOptions> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b) as Array<[string, unknown]>) {
    const prev = out[k];
    out[k] = isPlainObject(prev) && isPlainObject(v) ? { ...prev, ...v } : v;
  }
  return out as Partial<SimulatorOptions>;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
