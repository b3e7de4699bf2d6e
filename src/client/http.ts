/**
 * One GET against the API: global fetch with an undici Agent as dispatcher
 * (connection pool + connect/headers/body timeouts), the body read under a size
 * cap, and every body either read or cancelled so no socket is ever held by an
 * unread response.
 *
 * Why global fetch and not undici.request: msw (the client's unit tests)
 * intercepts globalThis.fetch, and `dispatcher` still gives us undici's pool.
 */
import { Agent } from "undici";
import type { EndpointName } from "../core/defaults.js";
import { ApiError } from "../core/errors.js";
import { redactSecrets, type Secret } from "../core/secret.js";

export interface HttpOptions {
  connectTimeoutMs: number;
  responseTimeoutMs: number;
  maxResponseBytes: number;
  /** Pool size per origin; the scheduler never has more requests in flight than this. */
  connections: number;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON for 2xx responses. */
  body: unknown;
  bytes: number;
}

export function createDispatcher(opts: HttpOptions): Agent {
  return new Agent({
    connections: opts.connections,
    connect: { timeout: opts.connectTimeoutMs },
    headersTimeout: opts.responseTimeoutMs,
    bodyTimeout: opts.responseTimeoutMs,
    keepAliveTimeout: 10_000,
  });
}

/**
 * GET `url` and return its parsed JSON body. Throws ApiError for every failure,
 * with `endpoint` (a template name, never the URL with ids or the key) as context.
 * Non-2xx: the error body is read (capped) so its `error.code/message` can be
 * surfaced and the connection reused; `Retry-After` travels in `headers`.
 */
export async function getJson(
  url: URL,
  endpoint: EndpointName,
  key: Secret,
  opts: HttpOptions,
  dispatcher: Agent,
  signal: AbortSignal,
): Promise<RawResponse> {
  const timeout = AbortSignal.timeout(opts.responseTimeoutMs);
  const combined = AbortSignal.any([signal, timeout]);
  let res: Response;
  try {
    res = await fetch(url, {
      method: "GET",
      headers: { Accept: "application/json", Authorization: `Bearer ${key.reveal()}` },
      // The key must never follow a redirect to another origin; we follow none at all.
      redirect: "manual",
      signal: combined,
      // @ts-expect-error -- `dispatcher` is undici's extension of RequestInit, honoured by Node's fetch.
      dispatcher,
    });
  } catch (err) {
    throw transportError(err, endpoint, signal, timeout, opts);
  }

  const contentType = res.headers.get("content-type") ?? "";
  if (res.status >= 300 && res.status < 400) {
    cancel(res);
    throw new ApiError(
      `${endpoint}: the server answered ${res.status} redirect; redirects are not followed so the key stays with the configured base URL. Check --base-url.`,
      { kind: "http", endpoint, status: res.status },
    );
  }

  let text: string;
  let bytes: number;
  try {
    ({ text, bytes } = await readCapped(res, opts.maxResponseBytes, endpoint));
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw transportError(err, endpoint, signal, timeout, opts);
  }

  if (res.status < 200 || res.status >= 300) {
    const { code, message } = parseErrorBody(text);
    const what = code || message ? ` (${[code, message].filter(Boolean).join(": ")})` : "";
    const hint = statusHint(res.status);
    throw new ApiError(redactSecrets(`${endpoint}: HTTP ${res.status}${what}${hint}`), {
      kind: res.status === 401 ? "auth" : "http",
      endpoint,
      status: res.status,
      code,
      cause: new ResponseInfo(retryHeaders(res.headers)),
    });
  }

  if (!/^application\/([\w.+-]+\+)?json\b/i.test(contentType)) {
    const looksHtml = /^\s*</.test(text);
    throw new ApiError(
      `${endpoint}: expected a JSON response but got content type "${safeText(contentType, 100) || "none"}"${looksHtml ? " with an HTML page (a proxy or gateway error?)" : ""}`,
      { kind: "invalid-response", endpoint, status: res.status },
    );
  }
  const depth = jsonDepthExceeds(text, MAX_JSON_DEPTH);
  if (depth) {
    throw new ApiError(
      `${endpoint}: the response nests deeper than ${MAX_JSON_DEPTH} levels (at character ${depth.at}); no response of this API nests beyond a few, so it is refused unparsed`,
      { kind: "invalid-response", endpoint, status: res.status },
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new ApiError(
      // JSON.parse quotes a snippet of the text in its message: server text, so made safe.
      `${endpoint}: the response is not valid JSON (${bytes} bytes; truncated or malformed): ${safeText((err as Error).message, 200)}`,
      // Not kept as the cause: its message quotes the body raw, and describeError would append it.
      { kind: "invalid-response", endpoint, status: res.status },
    );
  }
  return { status: res.status, headers: res.headers, body, bytes };
}

/**
 * Deepest JSON nesting we parse. The API's deepest shape (a list item's product) is 4 levels;
 * a body nested a million levels deep (a few MB of "[[[[") would cost JSON.parse hundreds of MB
 * and every recursive consumer its stack, so it is refused by a linear scan before parsing.
 */
export const MAX_JSON_DEPTH = 64;

/** Where `text` first nests deeper than `max` arrays/objects (outside strings), or null. */
export function jsonDepthExceeds(text: string, max: number): { at: number } | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return { at: i };
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return null;
}

/**
 * Text that came from the server (or from a library quoting it), made fit for a message:
 * the key and any Bearer token scrubbed (first, so clipping cannot cut a key in two),
 * control characters and line breaks turned into spaces (messages are one line, and a
 * forged line must not appear in a log), and clipped to `max` characters.
 */
export function safeText(text: string, max: number): string {
  const one = redactSecrets(text).replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, " ");
  return one.length > max ? `${one.slice(0, max - 3)}...` : one;
}

/** Carries the response headers of a failed request (for Retry-After) as an error cause. */
export class ResponseInfo extends Error {
  override name = "ResponseInfo";
  constructor(readonly headers: Headers) {
    // No message: it carries headers, not a reason, and describeError then leaves it out of the one-line text.
    super("");
  }
}

/**
 * Only what the scheduler reads from a failed response (Retry-After), scrubbed and clipped:
 * the value is server text that ends up in logs and the journal, and a server or proxy that
 * echoes the request's Authorization header there must not put the key into either.
 */
function retryHeaders(headers: Headers): Headers {
  const out = new Headers();
  const ra = headers.get("retry-after");
  if (ra !== null) out.set("retry-after", safeText(ra, 100));
  return out;
}

/**
 * Release an unread body. Not awaited: cancel() starts the release at once, and some
 * streams (msw's) never settle the promise.
 */
function cancel(res: Response): void {
  res.body?.cancel().catch(() => {});
}

async function readCapped(res: Response, cap: number, endpoint: EndpointName): Promise<{ text: string; bytes: number }> {
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared > cap) {
    cancel(res);
    throw new ApiError(`${endpoint}: response of ${declared} bytes exceeds the ${cap}-byte cap (http.maxResponseBytes)`, {
      kind: "invalid-response",
      endpoint,
      status: res.status,
    });
  }
  if (!res.body) return { text: "", bytes: 0 };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > cap) {
      reader.cancel().catch(() => {});
      throw new ApiError(`${endpoint}: response exceeds the ${cap}-byte cap (http.maxResponseBytes)`, {
        kind: "invalid-response",
        endpoint,
        status: res.status,
      });
    }
    chunks.push(value);
  }
  return { text: Buffer.concat(chunks, total).toString("utf8"), bytes: total };
}

/**
 * `error.code` / `error.message` of an error body, clipped and scrubbed: a server or proxy
 * that echoes the request's Authorization header into its error must not put the key into
 * our messages, logs or journal.
 */
function parseErrorBody(text: string): { code: string | null; message: string | null } {
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) return { code: null, message: null };
  try {
    const j = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    const code = typeof j?.error?.code === "string" ? safeText(j.error.code, 100) : null;
    const message = typeof j?.error?.message === "string" ? safeText(j.error.message, 300) : null;
    return { code, message };
  } catch {
    return { code: null, message: null };
  }
}

function statusHint(status: number): string {
  if (status === 401) return ": the developer key was refused (missing, expired or revoked). Check INVENTORY_API_KEY / INVENTORY_API_KEY_FILE.";
  if (status === 429) return ": quota exceeded";
  if (status === 503) return ": the service is unavailable";
  return "";
}

function transportError(err: unknown, endpoint: EndpointName, signal: AbortSignal, timeout: AbortSignal, opts: HttpOptions): ApiError {
  if (signal.aborted) {
    return new ApiError(`${endpoint}: request aborted`, { kind: "network", endpoint, cause: signal.reason });
  }
  const e = err as { name?: string; code?: string; cause?: { code?: string; name?: string; message?: string } };
  const code = e?.cause?.code ?? e?.code ?? "";
  if (timeout.aborted || e?.name === "TimeoutError" || /TIMEOUT/i.test(code)) {
    const which = /CONNECT/i.test(code) ? `connect timeout (${opts.connectTimeoutMs} ms)` : `response timeout (${opts.responseTimeoutMs} ms)`;
    return new ApiError(`${endpoint}: ${which}`, { kind: "timeout", endpoint, cause: err });
  }
  const detail = safeText(e?.cause?.message ?? (err instanceof Error ? err.message : String(err)), 300);
  return new ApiError(`${endpoint}: network error${code ? ` ${code}` : ""}: ${detail}`, { kind: "network", endpoint, cause: err });
}
