/**
 * The built-in simulator of the read-only inventory API (`inventory-mirror simulate`):
 * a deterministic, internally consistent implementation of ../shared/inventory-api.md
 * for demos and end-to-end tests, with quota, fault injection and churn.
 *
 *   const sim = await startSimulator({ seed: 7, skus: 500 });
 *   // point the client at sim.baseUrl with sim.apiKey, then compare with sim.groundTruth()
 *   await sim.close();
 *
 * Where the document says "not shown", the simulator decides as follows (the client must
 * not depend on these beyond what the document promises):
 * - List items are every SKU matching q / stockState, ordered by id; scope only changes the
 *   aggregation (a SKU with nothing in scope lists with 0 and counts as `empty`).
 * - Last page: `page.nextCursor` is null. Cursors are keyset positions, HMAC-signed, bound
 *   to the filters (q case-insensitively) but not to `limit`.
 * - Errors: 400 invalid_parameter (malformed id / limit / stockState), 404 not_found (unknown
 *   SKU or location, unknown path), 400 invalid_cursor, 401 unauthorized, 405
 *   method_not_allowed, 429 rate_limited, 503 service_unavailable.
 * - History ties on occurredAt are broken by insertion order (newest first).
 * - nodeKind: `location` (root), `section`, `leaf`. lastSourceKind: `event` or `set`.
 * - Movement rows carry null setSessionId / setTypeCode / observedQuantity; notes may be null.
 * - A scope on the inactive leaf is accepted and holds nothing.
 * - Quantities are integers; UUIDs are lower case (either case is accepted in requests); every
 *   page but the last holds `limit` items; the list's `locations` and `summary` come on every page.
 * Each of these can be taken another way with `variance` (variance.ts) or a named profile
 * (profiles.ts); docs/server-variance.md lists them with the tests that cover them.
 */
import { randomBytes } from "node:crypto";
import type { FaultRule } from "./faults.js";
import { createModel, MODEL_DEFAULTS, type SimModel, type ModelOptions } from "./model.js";
import type { ConcurrencyOptions, QuotaOptions } from "./quota.js";
import { SimServer } from "./server.js";
import type { SimStats } from "./stats.js";
import type { GroundTruth } from "./types.js";
import type { VarianceOptions } from "./variance.js";
import type { HostileTextOptions } from "./hostile-text.js";
import type { EndlessCursorOptions } from "./hostile-cursor.js";
import type { LiveWrite, LiveWriteOptions } from "./live-writes.js";
import type { StallOptions } from "./stalls.js";

export interface SimulatorOptions extends ModelOptions {
  /** Default: random `sim_` + 32 hex characters. */
  apiKey?: string;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (ephemeral). */
  port?: number;
  /** Path prefix, e.g. "/api" → http://host:port/api/v1/external/... */
  prefix?: string;
  /** Per-workspace quota (token bucket or fixed window, quota.ts); null (default) = unlimited. */
  quota?: QuotaOptions | null;
  /** The limit before authentication, in front of the key check and the quota (server.ts SimServerOptions); null (default) = none. */
  preAuthLimit?: QuotaOptions | null;
  /** A limit on requests being answered at once, beside the quota (quota.ts ConcurrencyOptions); null (default) = none. */
  concurrencyLimit?: ConcurrencyOptions | null;
  faults?: FaultRule[];
  /** Where the API document leaves a choice open, take it another way (variance.ts; profiles.ts names bundles). */
  variance?: VarianceOptions;
  /** A hostile server's text: control sequences in names, the Authorization header echoed (hostile-text.ts). */
  hostileText?: HostileTextOptions;
  /** Paging that never ends, for chosen SKUs' history and/or the list (hostile-cursor.ts). */
  endlessCursors?: EndlessCursorOptions;
  /** Writes that land between the pages of a walk: a new history row after a first page, a SKU removed ahead of a list walk or during its own history walk (live-writes.ts). */
  liveWrites?: LiveWriteOptions;
  /** Every API response leaves this many ms after its request arrived (default 0; server.ts says why after the quota). */
  latencyMs?: number;
  /** Latency varies uniformly by ± this many ms, seeded (default 0). */
  latencyJitterMs?: number;
  /** The share of the latency spent before the quota's decision, the way in (0-1, default 0: all of it after). */
  latencyInboundShare?: number;
  /** Now and then (every `everyMs` on average, seeded) the server decides nothing for up to `ms`, then decides what arrived at once (stalls.ts). */
  stall?: StallOptions;
  /** The server's clock reads this many ms ahead of the machine's (negative: behind): its Date header and Retry-After dates (default 0). */
  clockSkewMs?: number;
}

export interface RunningSimulator {
  /** http://host:port + prefix, no trailing slash. */
  baseUrl: string;
  apiKey: string;
  model: SimModel;
  /** What a mirror should hold: the model's data, with the data transformations of `variance` applied. */
  groundTruth(): GroundTruth;
  /** Current SKU ids, as the list endpoint sends them, in the order it walks them (by id unless `variance.listOrder` says otherwise). */
  listOrder(): string[];
  stats(): SimStats;
  resetStats(): void;
  setFaults(rules: FaultRule[]): void;
  setQuota(q: QuotaOptions | null): void;
  setPreAuthLimit(q: QuotaOptions | null): void;
  /** Writes to land between the pages of walks from now on (a fresh budget; live-writes.ts), or none. */
  setLiveWrites(o: LiveWriteOptions | null): void;
  /** The writes `liveWrites` made so far, oldest first (model ids, lower case). */
  liveWritesMade(): ReadonlyArray<LiveWrite>;
  /** Closes the server and every socket promptly. */
  close(): Promise<void>;
}

export async function startSimulator(opts: SimulatorOptions = {}): Promise<RunningSimulator> {
  const model = createModel(opts);
  const apiKey = opts.apiKey ?? `sim_${randomBytes(16).toString("hex")}`;
  const prefix = normalizePrefix(opts.prefix);
  const host = opts.host ?? "127.0.0.1";
  const server = new SimServer({
    model,
    apiKey,
    prefix,
    quota: opts.quota ?? null,
    preAuthLimit: opts.preAuthLimit ?? null,
    concurrencyLimit: opts.concurrencyLimit ?? null,
    faults: opts.faults ?? [],
    seed: opts.seed ?? MODEL_DEFAULTS.seed,
    ...(opts.variance ? { variance: opts.variance } : {}),
    ...(opts.hostileText ? { hostileText: opts.hostileText } : {}),
    ...(opts.endlessCursors ? { endlessCursors: opts.endlessCursors } : {}),
    ...(opts.liveWrites ? { liveWrites: opts.liveWrites } : {}),
    latency: { ms: opts.latencyMs ?? 0, jitterMs: opts.latencyJitterMs ?? 0, inboundShare: opts.latencyInboundShare ?? 0 },
    stall: opts.stall ?? null,
    clockSkewMs: opts.clockSkewMs ?? 0,
  });
  const port = await server.listen(host, opts.port ?? 0);
  const hostPart = host.includes(":") ? `[${host}]` : host;
  return {
    baseUrl: `http://${hostPart}:${port}${prefix}`,
    apiKey,
    model,
    groundTruth: () => server.shaper.truth(model.groundTruth()),
    listOrder: () => model.listOrderIds().map((id) => server.shaper.id(id)),
    stats: () => server.getStats(),
    resetStats: () => server.resetStats(),
    setFaults: (rules) => server.setFaults(rules),
    setQuota: (q) => server.setQuota(q),
    setPreAuthLimit: (q) => server.setPreAuthLimit(q),
    setLiveWrites: (o) => server.setLiveWrites(o),
    liveWritesMade: () => server.liveWritesMade(),
    close: () => server.close(),
  };
}

/** "", "/" → ""; "api/" → "/api". */
function normalizePrefix(prefix: string | undefined): string {
  const trimmed = (prefix ?? "").replace(/^\/+|\/+$/g, "");
  return trimmed ? `/${trimmed}` : "";
}

export { createModel, SimModel } from "./model.js";
export type { ModelOptions } from "./model.js";
export { FAULT_KINDS, parseFaultSpec } from "./faults.js";
export type { FaultKind, FaultRule } from "./faults.js";
export type { VarianceOptions } from "./variance.js";
export { RETRY_AFTER_FORMS } from "./quota.js";
export type { QuotaOptions, RetryAfterForm } from "./quota.js";
export type { SimStats } from "./stats.js";
export { TIMELINE_END } from "./generate.js";
export type { GroundTruth, GroundTruthSku } from "./types.js";
