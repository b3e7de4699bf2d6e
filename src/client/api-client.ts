/**
 * The API's five endpoints. Each call goes through the shared scheduler, and each
 * body is validated with its zod schema before anything else sees it. Errors name
 * the endpoint, the SKU when there is one, and the field that was wrong.
 */
import type { Agent } from "undici";
import type { z } from "zod";
import {
  DetailResponse,
  HistoryResponse,
  ListResponse,
  LocationsResponse,
  UUID_RE,
  WorkspaceResponse,
} from "../core/api-schemas.js";
import { ENDPOINTS, type EndpointName } from "../core/defaults.js";
import { ApiError } from "../core/errors.js";
import type { Secret } from "../core/secret.js";
import type { RequestScheduler } from "../scheduler/scheduler.js";
import { createDispatcher, getJson, safeText, type HttpOptions } from "./http.js";

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

export interface ApiClientOptions {
  baseUrl: URL;
  key: Secret;
  scheduler: RequestScheduler;
  http: HttpOptions;
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
  private readonly dispatcher: Agent;
  constructor(private readonly opts: ApiClientOptions) {
    this.dispatcher = createDispatcher(opts.http);
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
    await this.dispatcher.close();
  }

  /** base URL (which may carry a path prefix) + endpoint path. */
  private url(path: string): URL {
    const base = this.opts.baseUrl.href.replace(/\/+$/, "");
    return new URL(base + path);
  }

  private get<S extends z.ZodType>(endpoint: EndpointName, url: URL, schema: S, signal: AbortSignal, skuId?: string): Promise<z.output<S>> {
    return this.opts.scheduler.run(
      endpoint,
      async (onStatus) => {
        const t0 = performance.now();
        let raw;
        try {
          raw = await getJson(url, endpoint, this.opts.key, this.opts.http, this.dispatcher, signal, onStatus);
        } catch (err) {
          this.opts.onRequest?.({ endpoint, status: err instanceof ApiError ? err.status : null, ms: Math.round(performance.now() - t0), error: err instanceof ApiError ? err.kind : "error" });
          throw err;
        }
        this.opts.onRequest?.({ endpoint, status: raw.status, ms: Math.round(performance.now() - t0), bytes: raw.bytes });
        const parsed = schema.safeParse(raw.body);
        if (!parsed.success) {
          const issues = parsed.error.issues.map(describeIssue);
          throw new ApiError(
            `${endpoint}${skuId ? ` (SKU ${skuId})` : ""}: invalid response: ${issues[0]}` + (issues.length > 1 ? ` (+${issues.length - 1} more issues)` : ""),
            { kind: "invalid-response", endpoint, status: raw.status, cause: new ResponseValidationError(issues) },
          );
        }
        return parsed.data as z.output<S>;
      },
      signal,
    ).catch((err: unknown) => {
      if (err instanceof ApiError && skuId && !err.message.includes(skuId)) {
        throw new ApiError(err.message.replace(`${endpoint}:`, `${endpoint} (SKU ${skuId}):`), {
          kind: err.kind,
          endpoint: err.endpoint,
          status: err.status,
          code: err.code,
          resumeAfter: err.resumeAfter,
          cause: err.cause,
        });
      }
      throw err;
    });
  }
}

/**
 * Why a body failed validation, as safe one-line texts ("field items.3.id: expected a UUID").
 * Replaces zod's error as the `cause`: zod's message is the JSON of every issue, and an issue's
 * path holds the server's own object keys, which may be megabytes long or echo our
 * Authorization header. Each path segment is clipped and every text scrubbed.
 */
export class ResponseValidationError extends Error {
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
export function checkUuid(id: string, endpoint: EndpointName, field: string): string {
  if (typeof id !== "string" || !UUID_RE.test(id)) {
    throw new ApiError(`${endpoint}: refusing to send ${field} ${safeText(JSON.stringify(String(id)), 80)}: not a UUID`, {
      kind: "invalid-response",
      endpoint,
    });
  }
  return id;
}
