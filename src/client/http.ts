/**
 * One GET against the API: undici's Agent (connection pool with keep-alive,
 * connect/headers/body timeouts) plus a whole-response deadline, the body read
 * under a size cap, and every body either read or discarded so no socket is ever
 * held by an unread response.
 *
 * Two transports, one behaviour. Normally the request goes straight to the pool
 * (`dispatcher.request`). When something has replaced globalThis.fetch since this
 * module was loaded (msw in the client's unit tests, an instrumentation agent), the
 * request goes through that fetch instead, with the same pool as its dispatcher, so
 * the interceptor sees every request. The direct path exists because Node's fetch
 * costs about twice the CPU per request (WHATWG Request/Response/streams around the
 * same pool) and, worse, its per-request objects survive young-generation GCs: at a
 * few hundred requests per second they are promoted by megabytes and the heap of a
 * long sync grew to several times its live size (BENCHMARKS.md, "what the profile showed").
 */
import { Agent } from "undici";
import type { EndpointName } from "../core/defaults.js";
import { ApiError } from "../core/errors.js";
import { redactSecrets, scrubSecrets, type Secret } from "../core/secret.js";

export interface HttpOptions {
  connectTimeoutMs: number;
  responseTimeoutMs: number;
  maxResponseBytes: number;
  /** Pool size per origin; the scheduler never has more requests in flight than this. */
  connections: number;
}

/** What is read from a response's headers (fetch's Headers and undici's header object both give it). */
export interface HeaderReader {
  get(name: string): string | null;
}

export interface RawResponse {
  status: number;
  headers: HeaderReader;
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

/** The fetch this process had when the client was loaded: while it is still in place, nothing intercepts fetch. */
const platformFetch = globalThis.fetch;

/** One response, as either transport delivers it. */
interface Received {
  status: number;
  headers: HeaderReader;
  /** The whole body, or null (and the body released) once it grows past `cap` bytes; rejects if the connection fails mid-body. */
  readAll(cap: number): Promise<{ chunks: Uint8Array[]; total: number } | null>;
  /** Release a body that will not be read, without waiting. */
  discard(): void;
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
  onStatus?: (status: number) => void,
): Promise<RawResponse> {
  // One controller per request, aborted by the caller's signal or by the whole-response timer,
  // and both released when the request ends. (AbortSignal.timeout + AbortSignal.any would keep a
  // timer alive for the whole timeout and register a dependant on the run's long-lived signal
  // per request.)
  const deadline = new RequestDeadline(signal, opts.responseTimeoutMs);
  try {
    let res: Received;
    try {
      res =
        globalThis.fetch === platformFetch
          ? await viaDispatcher(url, key, dispatcher, deadline.signal)
          : await viaFetch(url, key, dispatcher, deadline.signal);
    } catch (err) {
      throw transportError(err, endpoint, signal, deadline, opts);
    }
    // Before the body is read: the scheduler stops granting at a 429/503 before this connection is free again.
    onStatus?.(res.status);
    return await interpret(res, endpoint, opts, signal, deadline);
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
  constructor(private readonly outer: AbortSignal, ms: number) {
    if (outer.aborted) this.ac.abort(outer.reason);
    else {
      let set = inFlight.get(outer);
      if (!set) {
        const deadlines = new Set<RequestDeadline>();
        inFlight.set(outer, (set = deadlines));
        outer.addEventListener("abort", () => {
          for (const d of deadlines) d.ac.abort(outer.reason);
        }, { once: true });
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

/** Straight to the pool. undici's request follows no redirect (no redirect interceptor is installed). */
async function viaDispatcher(url: URL, key: Secret, dispatcher: Agent, signal: AbortSignal): Promise<Received> {
  const res = await dispatcher.request({ origin: url.origin, path: url.pathname + url.search, method: "GET", headers: requestHeaders(key), signal });
  const h = res.headers;
  return {
    status: res.statusCode,
    headers: {
      get: (name) => {
        const v = h[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
      },
    },
    readAll: (cap) =>
      new Promise((resolve, reject) => {
        // Plain stream events: cheaper per response than an async iterator over the body.
        const chunks: Uint8Array[] = [];
        let total = 0;
        const body = res.body;
        body.on("data", (c: Buffer) => {
          total += c.byteLength;
          if (total > cap) {
            body.destroy();
            resolve(null);
          } else chunks.push(c);
        });
        body.once("end", () => resolve({ chunks, total }));
        body.on("error", (err) => (total > cap ? undefined : reject(err)));
      }),
    // undici reports the destroyed request as an 'error' on the body: nobody is reading it any more.
    discard: () => void res.body.on("error", () => {}).destroy(),
  };
}

/** Through the fetch someone installed, with our pool as its dispatcher. */
async function viaFetch(url: URL, key: Secret, dispatcher: Agent, signal: AbortSignal): Promise<Received> {
  const res = await fetch(url, {
    method: "GET",
    headers: requestHeaders(key),
    // The key must never follow a redirect to another origin; we follow none at all.
    redirect: "manual",
    signal,
    // @ts-expect-error -- `dispatcher` is undici's extension of RequestInit, honoured by Node's fetch.
    dispatcher,
  });
  return {
    status: res.status,
    headers: res.headers,
    readAll: async (cap) => {
      const chunks: Uint8Array[] = [];
      let total = 0;
      for await (const c of streamChunks(res.body)) {
        total += c.byteLength;
        if (total > cap) return null; // leaving the loop cancels the stream
        chunks.push(c);
      }
      return { chunks, total };
    },
    // Not awaited: cancel() starts the release at once, and some streams (msw's) never settle the promise.
    discard: () => void res.body?.cancel().catch(() => {}),
  };
}

async function* streamChunks(body: ReadableStream<Uint8Array> | null): AsyncGenerator<Uint8Array> {
  if (!body) return;
  const reader = body.getReader();
  let done = false;
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) {
        done = true;
        return;
      }
      yield r.value;
    }
  } finally {
    if (!done) reader.cancel().catch(() => {});
  }
}

async function interpret(res: Received, endpoint: EndpointName, opts: HttpOptions, signal: AbortSignal, deadline: RequestDeadline): Promise<RawResponse> {
  const contentType = res.headers.get("content-type") ?? "";
  if (res.status >= 300 && res.status < 400) {
    res.discard();
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
    throw transportError(err, endpoint, signal, deadline, opts);
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
    body = JSON.parse(scrubSecrets(text));
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
function retryHeaders(headers: HeaderReader): Headers {
  const out = new Headers();
  const ra = headers.get("retry-after");
  if (ra !== null) out.set("retry-after", safeText(ra, 100));
  return out;
}

async function readCapped(res: Received, cap: number, endpoint: EndpointName): Promise<{ text: string; bytes: number }> {
  const declared = Number(res.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared > cap) {
    res.discard();
    throw new ApiError(`${endpoint}: response of ${declared} bytes exceeds the ${cap}-byte cap (http.maxResponseBytes)`, {
      kind: "invalid-response",
      endpoint,
      status: res.status,
    });
  }
  const all = await res.readAll(cap);
  if (all === null) {
    res.discard();
    throw new ApiError(`${endpoint}: response exceeds the ${cap}-byte cap (http.maxResponseBytes)`, {
      kind: "invalid-response",
      endpoint,
      status: res.status,
    });
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

function transportError(err: unknown, endpoint: EndpointName, signal: AbortSignal, timeout: { aborted: boolean }, opts: HttpOptions): ApiError {
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
