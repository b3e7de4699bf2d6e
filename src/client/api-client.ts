/**
 * The API's five endpoints. Each call goes through the shared scheduler, and each
 * body is validated with its zod schema before anything else sees it. Errors carry
 * the endpoint, the SKU when there is one, and the field that was wrong, as fields
 * and in a message written once (see http.ts).
 */
import type { z } from "zod";
import { DetailResponse, HistoryResponse, ListResponse, LocationsResponse, UUID_RE, WorkspaceResponse } from "../core/api-schemas.js";
import { ENDPOINTS, type EndpointName } from "../core/defaults.js";
import { ApiError } from "../core/errors.js";
import type { Secret } from "../core/secret.js";
import { getJson, requestError, safeText, type RequestContext } from "./http.js";
import type { HttpOptions, Transport, TransportFactory, WriteGate } from "./transport.js";

export interface ListQuery {
  cursor?: string | null;
  limit?: number;
  scopeLocationId?: string;
  q?: string;
  stockState?: "all" | "in_stock" | "empty";
}
export interface HistoryQuery {
  cursor?: string | null;
  limit?: number;
  scopeLocationId?: string;
}

/**
 * What the client needs of the scheduler (src/scheduler/scheduler.ts, which the caller
 * injects): run one logical request, calling `attempt` once per try and retrying as it
 * decides. `onStatus` tells it an answer's status as soon as its headers are in.
 */
export interface RequestRunner {
  /** `mayWrite`, asked right before the request is written: false keeps it from going (transport.ts WriteGate). */
  run<T>(endpoint: EndpointName, attempt: (onStatus: (status: number, serverDate: string | null) => void, mayWrite: WriteGate) => Promise<T>, signal: AbortSignal): Promise<T>;
}

export interface ApiClientOptions {
  baseUrl: URL;
  key: Secret;
  scheduler: RequestRunner;
  http: HttpOptions;
  /**
   * How requests reach the server, chosen by the caller: `poolTransport` in production,
   * `fetchTransport` where something intercepts globalThis.fetch (msw in the unit tests).
   * The client makes it from `http` and closes it in close().
   */
  transport: TransportFactory;
  /** Told of every attempt (for --log-level trace): endpoint template, status, time, size; never a URL or the key. */
  onRequest?: (r: RequestTrace) => void;
}

export interface RequestTrace {
  endpoint: EndpointName;
  status: number | null;
  ms: number;
  bytes?: number;
  error?: string;
}

export class ApiClient {
  private readonly transport: Transport;
  constructor(private readonly opts: ApiClientOptions) {
    this.transport = opts.transport(opts.http);
  }

  async workspace(signal: AbortSignal): Promise<WorkspaceResponse> {
    return this.get("workspace", this.url(ENDPOINTS.workspace), WorkspaceResponse, signal);
  }

  async locations(signal: AbortSignal): Promise<LocationsResponse> {
    return this.get("locations", this.url(ENDPOINTS.locations), LocationsResponse, signal);
  }

  async listPage(query: ListQuery, signal: AbortSignal): Promise<ListResponse> {
    const url = this.url(ENDPOINTS.list);
    if (query.scopeLocationId) url.searchParams.set("scopeLocationId", checkUuid(query.scopeLocationId, "list", "scopeLocationId"));
    if (query.q) url.searchParams.set("q", query.q);
    if (query.stockState) url.searchParams.set("stockState", query.stockState);
    if (query.limit) url.searchParams.set("limit", String(query.limit));
    // URLSearchParams percent-encodes the cursor; the server gets its bytes back unchanged.
    if (query.cursor) url.searchParams.set("cursor", query.cursor);
    return this.get("list", url, ListResponse, signal);
  }

  async detail(skuId: string, signal: AbortSignal, scopeLocationId?: string): Promise<DetailResponse> {
    const url = this.url(ENDPOINTS.detail.replace("{skuId}", encodeURIComponent(checkUuid(skuId, "detail", "skuId"))));
    if (scopeLocationId) url.searchParams.set("scopeLocationId", checkUuid(scopeLocationId, "detail", "scopeLocationId"));
    return this.get("detail", url, DetailResponse, signal, skuId);
  }

  async historyPage(skuId: string, query: HistoryQuery, signal: AbortSignal): Promise<HistoryResponse> {
    const url = this.url(ENDPOINTS.history.replace("{skuId}", encodeURIComponent(checkUuid(skuId, "history", "skuId"))));
    if (query.scopeLocationId) url.searchParams.set("scopeLocationId", checkUuid(query.scopeLocationId, "history", "scopeLocationId"));
    if (query.limit) url.searchParams.set("limit", String(query.limit));
    if (query.cursor) url.searchParams.set("cursor", query.cursor);
    return this.get("history", url, HistoryResponse, signal, skuId);
  }

  async close(): Promise<void> {
    await this.transport.close();
  }

  /** base URL (which may carry a path prefix) + endpoint path. */
  private url(path: string): URL {
    const base = this.opts.baseUrl.href.replace(/\/+$/, "");
    return new URL(base + path);
  }

  private get<S extends z.ZodType>(endpoint: EndpointName, url: URL, schema: S, signal: AbortSignal, skuId?: string): Promise<z.output<S>> {
    const ctx: RequestContext = { endpoint, skuId };
    return this.opts.scheduler.run(endpoint, (onStatus, mayWrite) => this.attempt(url, ctx, schema, signal, onStatus, mayWrite), signal);
  }

  /** One attempt (the scheduler decides about retries): the request, traced, and its body validated. */
  private async attempt<S extends z.ZodType>(
    url: URL,
    ctx: RequestContext,
    schema: S,
    signal: AbortSignal,
    onStatus: (status: number, serverDate: string | null) => void,
    mayWrite: WriteGate,
  ): Promise<z.output<S>> {
    const t0 = performance.now();
    const ms = () => Math.round(performance.now() - t0);
    let raw: Awaited<ReturnType<typeof getJson>>;
    try {
      raw = await getJson(url, ctx, this.opts.key, this.opts.http, this.transport, signal, onStatus, mayWrite);
    } catch (err) {
      this.opts.onRequest?.({ endpoint: ctx.endpoint, status: err instanceof ApiError ? err.status : null, ms: ms(), error: err instanceof ApiError ? err.kind : "error" });
      throw err;
    }
    this.opts.onRequest?.({ endpoint: ctx.endpoint, status: raw.status, ms: ms(), bytes: raw.bytes });
    const parsed = schema.safeParse(raw.body);
    if (!parsed.success) {
      const issues = parsed.error.issues.map(describeIssue);
      const more = issues.length > 1 ? ` (+${issues.length - 1} more issues)` : "";
      throw requestError(ctx, `invalid response: ${issues[0]}${more}`, { kind: "invalid-response", status: raw.status, cause: new ResponseValidationError(issues) });
    }
    return parsed.data as z.output<S>;
  }
}

/**
 * Why a body failed validation, as safe one-line texts ("field items.3.id: expected a UUID").
 * Replaces zod's error as the `cause`: zod's message is the JSON of every issue, and an issue's
 * path holds the server's own object keys, which may be megabytes long or echo our
 * Authorization header. Each path segment is clipped and every text scrubbed.
 */
class ResponseValidationError extends Error {
  override name = "ResponseValidationError";
  constructor(readonly issues: string[]) {
    super(issues.slice(0, MAX_ISSUES_SHOWN).join("; ") + (issues.length > MAX_ISSUES_SHOWN ? `; +${issues.length - MAX_ISSUES_SHOWN} more` : ""));
  }
}
const MAX_ISSUES_SHOWN = 10;

function describeIssue(issue: z.core.$ZodIssue): string {
  const field = issue.path.length ? issue.path.map((seg) => safeText(String(seg), 40)).join(".") : "(body)";
  return `field ${safeText(field, 200)}: ${safeText(issue.message, 200)}`;
}

/** An ID that goes into a URL path or scope must be a UUID; anything else is refused before it is sent. */
function checkUuid(id: string, endpoint: EndpointName, field: string): string {
  if (typeof id !== "string" || !UUID_RE.test(id)) {
    throw new ApiError(`${endpoint}: refusing to send ${field} ${safeText(JSON.stringify(String(id)), 80)}: not a UUID`, {
      kind: "invalid-response",
      endpoint,
    });
  }
  return id;
}
