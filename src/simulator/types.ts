/**
 * Shapes shared by the simulator's files: the wire types (derived from the client's zod
 * schemas, so a response the simulator builds always type-checks against what the client
 * parses) and the compact in-memory state the responses are rendered from.
 */
import type { z } from "zod";
import type {
  DetailLocation,
  DetailResponse,
  HistoryResponse,
  HistoryRow,
  ListItem,
  ListResponse,
  LocationNodeIn,
  LocationsResponse,
  RootSummary,
  Sku,
  Summary,
  WorkspaceResponse,
} from "../core/api-schemas.js";
import type { EventTypeKey, FreshnessStatus } from "./vocabulary.js";

// ---- wire types (what the simulator sends) ----
export type WorkspaceResponseIn = z.input<typeof WorkspaceResponse>;
export type { LocationNodeIn };
export type LocationsResponseIn = z.input<typeof LocationsResponse>;
export type SkuIn = z.input<typeof Sku>;
export type ListItemIn = z.input<typeof ListItem>;
export type RootSummaryIn = z.input<typeof RootSummary>;
export type SummaryIn = z.input<typeof Summary>;
export type ListResponseIn = z.input<typeof ListResponse>;
export type DetailLocationIn = z.input<typeof DetailLocation>;
export type DetailResponseIn = z.input<typeof DetailResponse>;
export type HistoryRowIn = z.input<typeof HistoryRow>;
export type HistoryResponseIn = z.input<typeof HistoryResponse>;

export interface GroundTruthSku {
  /** The list item for this SKU with no scope. */
  item: ListItemIn;
  /** The detail response with no scope. */
  detail: DetailResponseIn;
  /** Every history row, in the endpoint's order (occurredAt desc, then insertion desc). */
  history: HistoryRowIn[];
  /** leafId -> how many of the newest rows at that leaf the projection does not reflect. */
  unreflected: Record<string, number>;
}

export interface GroundTruth {
  workspace: { workspace: { id: string; name: string }; scope: "read" };
  locations: LocationNodeIn[];
  /** Every current SKU, sorted by id. */
  skus: GroundTruthSku[];
}

// ---- in-memory state ----
export type LocationKind = "root" | "section" | "leaf";

export interface LocationState {
  /** Position in `locations` (pre-order: root, its sections, each section's leaves). */
  idx: number;
  id: string;
  name: string;
  code: string;
  kind: LocationKind;
  /** -1 for a root. */
  parent: number;
  root: number;
  children: number[];
  active: boolean;
  /** The rendered node, built once: locations never change. */
  node: LocationNodeIn;
}

export type RowKind = "movement" | "set";

/**
 * One history row, kept small (1.2 M of them at 100k SKUs): ids and timestamps are
 * formatted only when a row is rendered.
 */
export interface Row {
  /** Global insertion sequence: the tie-break among rows sharing an occurredAt. */
  seq: number;
  /** occurredAt, epoch ms. */
  t: number;
  /** Leaf location index. */
  leaf: number;
  kind: RowKind;
  /** Movement event type; null for a SET. */
  type: EventTypeKey | null;
  /** Movement: the positive amount moved. SET: the observed absolute count. */
  amount: number;
  /** Signed effect on the leaf balance. For a SET it is recomputed by replay (observed − balance before). */
  delta: number;
  /** Event ordinal within the SKU (shared by a transfer's two rows) or SET session ordinal. */
  ref: number;
  note: string | null;
}

/** The per SKU × leaf projection the detail endpoint shows. */
export interface Projection {
  leaf: number;
  status: FreshnessStatus;
  /** How many of the newest rows at this leaf are not reflected in `quantity`. 0 when clean. */
  unreflected: number;
  /** Replay of the reflected rows. */
  quantity: number;
  /** occurredAt of the last reflected row (null only when no row is reflected yet). */
  lastReplayedAt: number | null;
  lastSourceKind: "event" | "set" | null;
  /** Rows at this leaf; a projection with 0 rows (marked dirty before its first row) is not shown. */
  rowCount: number;
  /** Replay of every row: the true stock, which never goes negative. */
  balance: number;
}

export interface SkuState {
  /** Creation ordinal; keys the SKU's derived UUIDs (event / session ids). */
  idx: number;
  id: string;
  code: string;
  skuCode: string;
  name: string;
  barcode: string;
  unit: string;
  product: { id: string; name: string; brand: string };
  options: Record<string, string>;
  /** Lowercased searchable fields joined by NUL, so a query cannot match across two fields. */
  search: string;
  /** Chronological: (t asc, seq asc). The history endpoint walks it backwards. */
  rows: Row[];
  /** Sorted by leaf id, the detail endpoint's order. */
  projections: Projection[];
  /** Next event / session ordinal. */
  nextRef: number;
}

export interface WorkspaceState {
  seed: number;
  workspace: { id: string; name: string };
  locations: LocationState[];
  roots: number[];
  /** Active leaves only. */
  leaves: number[];
  /** Rank of each location's id among all leaf ids (for sorting projections); -1 for non-leaves. */
  leafRank: Int32Array;
  /** Every SKU, sorted by id (the list order). */
  skus: SkuState[];
  byId: Map<string, SkuState>;
  /** Next row sequence number. */
  nextSeq: number;
  /** Next SKU creation ordinal. */
  nextSkuIdx: number;
  /** Next product number (part of generated skuCodes). */
  nextProductNo: number;
  /** Newest occurredAt of any row ever stored: new rows are stamped strictly after it. */
  highWater: number;
}

/** An error a query reports to the HTTP layer: status plus the API's error code. */
export class SimApiError extends Error {
  override name = "SimApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
