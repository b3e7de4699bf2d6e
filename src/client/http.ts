/**
 * One GET against the API through the transport the client was given (transport.ts):
 * a whole-response deadline, the body read under a size cap, and every body either
 * read or discarded so no socket is ever held by an unread response. Every failure is
 * an ApiError carrying its context as fields (endpoint, SKU, status, code, Retry-After);
 * its message is written once, here, with that context.
 */
import type { EndpointName } from "../core/defaults.js";
import { ApiError, type ApiErrorKind } from "../core/errors.js";
import { parseScrubbed, redactSecrets, type Secret } from "../core/secret.js";
import { type HeaderReader, type HttpOptions, NotSentError, type Received, type Transport, type WriteGate } from "./transport.js";

export interface RawResponse {
  status: number;
  headers: HeaderReader;
  /** Parsed JSON for 2xx responses. */
  body: unknown;
  bytes: number;
}

/** What a request is about: an endpoint template (never the URL with ids or the key) and the SKU when there is one. */
export interface RequestContext {
  endpoint: EndpointName;
  /** Already checked to be a UUID (checkUuid), so it is safe in a message. */
  skuId?: string | undefined;
}

/** "detail (SKU …)" or "list": how a message names its request. */
function requestLabel(ctx: RequestContext): string {
  return ctx.skuId ? `${ctx.endpoint} (SKU ${ctx.skuId})` : ctx.endpoint;
}

/** An ApiError about the request `ctx`, its message prefixed with the request's label. */
export function requestError(ctx: RequestContext, text: string, init: { kind: ApiErrorKind; status?: number | null; code?: string | null; retryAfter?: string | null; cause?: unknown }): ApiError {
  return new ApiError(`${requestLabel(ctx)}: ${text}`, { ...init, endpoint: ctx.endpoint, skuId: ctx.skuId ?? null });
}

/**
 * GET `url` and return its parsed JSON body. Throws ApiError for every failure.
 * Non-2xx: the error body is read (capped) so its `error.code/message` can be
 * surfaced and the connection reused; `Retry-After` travels as the error's `retryAfter`.
 */
export async function getJson(
  url: URL,
  ctx: RequestContext,
  key: Secret,
  opts: HttpOptions,
  transport: Transport,
  signal: AbortSignal,
  onStatus?: (status: number, serverDate: string | null) => void,
  mayWrite?: WriteGate,
): Promise<RawResponse> {
  // One controller per request, aborted by the caller's signal or by the whole-response timer,
  // and both released when the request ends. (AbortSignal.timeout + AbortSignal.any would keep a
  // timer alive for the whole timeout and register a dependant on the run's long-lived signal
  // per request.)
  const deadline = new RequestDeadline(signal, opts.responseTimeoutMs);
  try {
    let res: Received;
    try {
      res = await transport.get(url, requestHeaders(key), deadline.signal, mayWrite);
    } catch (err) {
      if (err instanceof NotSentError) throw requestError(ctx, err.message, { kind: "not-sent", cause: err });
      throw transportError(err, ctx, signal, deadline, opts);
    }
    // Before the body is read: the scheduler stops granting at a 429/503 before this connection is free again.
    // The Date header too: the server's clock, which the dates a Retry-After names are written in.
    onStatus?.(res.status, res.headers.get("date"));
    return await interpret(res, ctx, opts, signal, deadline);
  } finally {
    deadline.release();
  }
}

/**
 * Deadlines in flight per caller signal. One listener on the caller's (long-lived) signal
 * aborts them all, instead of one listener added and removed per request.
 */
const inFlight = new WeakMap<AbortSignal, Set<RequestDeadline>>();

/** The caller's signal and a whole-response deadline as one abort signal, released at the end of the request. */
class RequestDeadline {
  private readonly ac = new AbortController();
  private readonly timer: NodeJS.Timeout;
  /** True once the deadline (not the caller) aborted the request. */
  aborted = false;
  constructor(
    private readonly outer: AbortSignal,
    ms: number,
  ) {
    if (outer.aborted) this.ac.abort(outer.reason);
    else {
      let set = inFlight.get(outer);
      if (!set) {
        const deadlines = new Set<RequestDeadline>();
        inFlight.set(outer, (set = deadlines));
        outer.addEventListener(
          "abort",
          () => {
            for (const d of deadlines) d.ac.abort(outer.reason);
          },
          { once: true },
        );
      }
      set.add(this);
    }
    this.timer = setTimeout(() => {
      this.aborted = true;
      this.ac.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
    }, ms);
  }
  get signal(): AbortSignal {
    return this.ac.signal;
  }
  release(): void {
    clearTimeout(this.timer);
    inFlight.get(this.outer)?.delete(this);
  }
}

const requestHeaders = (key: Secret) => ({ accept: "application/json", authorization: `Bearer ${key.reveal()}` });

async function interpret(res: Received, ctx: RequestContext, opts: HttpOptions, signal: AbortSignal, deadline: RequestDeadline): Promise<RawResponse> {
  if (res.status >= 300 && res.status < 400) {
    res.discard();
    throw requestError(ctx, `the server answered ${res.status} redirect; redirects are not followed so the key stays with the configured base URL. Check --base-url.`, {
      kind: "http",
      status: res.status,
    });
  }

  let text: string;
  let bytes: number;
  try {
    ({ text, bytes } = await readCapped(res, opts.maxResponseBytes, ctx));
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw transportError(err, ctx, signal, deadline, opts);
  }
  if (res.status < 200 || res.status >= 300) throw statusError(res, text, ctx);
  return { status: res.status, headers: res.headers, body: parseBody(res, text, bytes, ctx), bytes };
}

/** A non-2xx answer: its status, the error body's code and message, and its Retry-After, as fields and as one line. */
function statusError(res: Received, text: string, ctx: RequestContext): ApiError {
  const { code, message } = parseErrorBody(text);
  const what = code || message ? ` (${[code, message].filter(Boolean).join(": ")})` : "";
  return requestError(ctx, redactSecrets(`HTTP ${res.status}${what}${statusHint(res.status)}`), {
    kind: res.status === 401 ? "auth" : "http",
    status: res.status,
    code,
    retryAfter: retryAfterOf(res.headers),
  });
}

/** A 2xx body as JSON: refused when it is not JSON by its content type, nests too deep, or does not parse. */
function parseBody(res: Received, text: string, bytes: number, ctx: RequestContext): unknown {
  const contentType = res.headers.get("content-type") ?? "";
  const invalid = { kind: "invalid-response", status: res.status } as const;
  if (!/^application\/([\w.+-]+\+)?json\b/i.test(contentType)) {
    const looksHtml = /^\s*</.test(text);
    throw requestError(ctx, `expected a JSON response but got content type "${safeText(contentType, 100) || "none"}"${looksHtml ? " with an HTML page (a proxy or gateway error?)" : ""}`, invalid);
  }
  const depth = jsonDepthExceeds(text, MAX_JSON_DEPTH);
  if (depth) {
    throw requestError(ctx, `the response nests deeper than ${MAX_JSON_DEPTH} levels (at character ${depth.at}); no response of this API nests beyond a few, so it is refused unparsed`, invalid);
  }
  try {
    return parseScrubbed(text);
  } catch (err) {
    // JSON.parse quotes a snippet of the text in its message: server text, so made safe.
    // Not kept as the cause: its message quotes the body raw, and describeError would append it.
    throw requestError(ctx, `the response is not valid JSON (${bytes} bytes; truncated or malformed): ${safeText((err as Error).message, 200)}`, invalid);
  }
}

/**
 * Deepest JSON nesting we parse. The API's deepest shape (a list item's product) is 4 levels;
 * a body nested a million levels deep (a few MB of "[[[[") would cost JSON.parse hundreds of MB
 * and every recursive consumer its stack, so it is refused by a linear scan before parsing.
 */
export const MAX_JSON_DEPTH = 64;

/** Where `text` first nests deeper than `max` arrays/objects (outside strings), or null. */
function jsonDepthExceeds(text: string, max: number): { at: number } | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
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

/**
 * The Retry-After header of a failed response, scrubbed and clipped: the value is server text
 * that ends up in logs and the journal, and a server or proxy that echoes the request's
 * Authorization header there must not put the key into either.
 */
function retryAfterOf(headers: HeaderReader): string | null {
  const ra = headers.get("retry-after");
  return ra === null ? null : safeText(ra, 100);
}

async function readCapped(res: Received, cap: number, ctx: RequestContext): Promise<{ text: string; bytes: number }> {
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared > cap) {
    res.discard();
    throw requestError(ctx, `response of ${declared} bytes exceeds the ${cap}-byte cap (http.maxResponseBytes)`, { kind: "invalid-response", status: res.status });
  }
  const all = await res.readAll(cap);
  if (all === null) {
    res.discard();
    throw requestError(ctx, `response exceeds the ${cap}-byte cap (http.maxResponseBytes)`, { kind: "invalid-response", status: res.status });
  }
  const { chunks, total } = all;
  const buf = chunks.length === 1 ? Buffer.from(chunks[0]!.buffer, chunks[0]!.byteOffset, chunks[0]!.byteLength) : Buffer.concat(chunks, total);
  return { text: buf.toString("utf8"), bytes: total };
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

function transportError(err: unknown, ctx: RequestContext, signal: AbortSignal, timeout: { aborted: boolean }, opts: HttpOptions): ApiError {
  if (signal.aborted) return requestError(ctx, "request aborted", { kind: "network", cause: signal.reason });
  const e = err as { name?: string; code?: string; cause?: { code?: string; name?: string; message?: string } };
  const code = e?.cause?.code ?? e?.code ?? "";
  if (timeout.aborted || e?.name === "TimeoutError" || /TIMEOUT/i.test(code)) {
    const which = /CONNECT/i.test(code) ? `connect timeout (${opts.connectTimeoutMs} ms)` : `response timeout (${opts.responseTimeoutMs} ms)`;
    return requestError(ctx, which, { kind: "timeout", cause: err });
  }
  const detail = safeText(e?.cause?.message ?? (err instanceof Error ? err.message : String(err)), 300);
  return requestError(ctx, `network error${code ? ` ${code}` : ""}: ${detail}`, { kind: "network", cause: err });
}
