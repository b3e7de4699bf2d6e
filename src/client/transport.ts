/**
 * How one GET reaches the server. The caller picks the transport; nothing here looks at
 * what globalThis holds.
 *
 * - `poolTransport` (production): straight to undici's connection pool (`dispatcher.request`).
 *   Node's fetch costs about twice the CPU per request (WHATWG Request/Response/streams around
 *   the same pool) and, worse, its per-request objects survive young-generation GCs: at a few
 *   hundred requests per second they are promoted by megabytes and the heap of a long sync grew
 *   to several times its live size (BENCHMARKS.md, "what the profile showed").
 * - `fetchTransport`: through `globalThis.fetch` as it is at the time of each request, with the
 *   same kind of pool as its dispatcher. This is what msw intercepts, so the client's unit
 *   tests pass it.
 *
 * Both follow no redirect, give the same `Received`, and release the pool on `close()`.
 *
 * A request may carry a write gate (`WriteGate`), asked when its bytes are about to go: the pool asks it
 * when a socket is ready for the request, right before writing (undici's onRequestStart), so a request
 * handed to the pool before a 429 arrived, but written after it, is not written at all (NotSentError).
 */
import { Agent, type Dispatcher } from "undici";

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

/** One response, as a transport delivers it: status and headers in, body not yet read. */
export interface Received {
  status: number;
  headers: HeaderReader;
  /** The whole body, or null (and the body released) once it grows past `cap` bytes; rejects if the connection fails mid-body. */
  readAll(cap: number): Promise<{ chunks: Uint8Array[]; total: number } | null>;
  /** Release a body that will not be read, without waiting. */
  discard(): void;
}

export interface Transport {
  /** One GET of `url` with `headers`; resolves once the status and headers have arrived. */
  get(url: URL, headers: Record<string, string>, signal: AbortSignal, mayWrite?: WriteGate): Promise<Received>;
  /** Close the pool (the client calls it from its own close()). */
  close(): Promise<void>;
}

/**
 * Asked right before a request is written: false keeps it from going. The scheduler's (scheduler.ts
 * mayWrite): no request goes out once a 429 has arrived, until its Retry-After has elapsed.
 */
export type WriteGate = () => boolean;

/** The request was not written: its write gate said no. Nothing of it reached the server. */
export class NotSentError extends Error {
  override name = "NotSentError";
  constructor() {
    super("not sent: a pause began before the request was written");
  }
}

/** How the client gets its transport: it makes one from its HTTP options, and closes it with itself. */
export type TransportFactory = (opts: HttpOptions) => Transport;

function createPool(opts: HttpOptions): Agent {
  return new Agent({
    connections: opts.connections,
    connect: { timeout: opts.connectTimeoutMs },
    headersTimeout: opts.responseTimeoutMs,
    bodyTimeout: opts.responseTimeoutMs,
    keepAliveTimeout: 10_000,
  });
}

/** Production: straight to the pool. undici's request follows no redirect (no redirect interceptor is installed). */
export const poolTransport: TransportFactory = (opts) => {
  const agent = createPool(opts);
  const pool = agent.compose(gateWrites);
  return {
    get: async (url, headers, signal, mayWrite) => {
      const request: GatedOptions = { origin: url.origin, path: url.pathname + url.search, method: "GET", headers, signal, ...(mayWrite ? { mayWrite } : {}) };
      return fromDispatcher(await pool.request(request));
    },
    close: () => agent.close(),
  };
};

type GatedOptions = Dispatcher.RequestOptions & { mayWrite?: WriteGate };

/** The pool's interceptor: a request's write gate (taken out of its options) wraps its handler. */
const gateWrites: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => {
  const { mayWrite, ...rest } = opts as GatedOptions;
  return dispatch(rest, mayWrite ? new GatedHandler(handler, mayWrite) : handler);
};

/**
 * Asks the gate at onRequestStart, which undici calls once a socket is ready for the request and right
 * before it writes it; aborted there, nothing is written (the socket is closed, and the next request opens
 * another). Everything else goes to the handler it wraps.
 */
class GatedHandler implements Dispatcher.DispatchHandler {
  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly mayWrite: WriteGate,
  ) {}
  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    if (!this.mayWrite()) return controller.abort(new NotSentError());
    this.inner.onRequestStart?.(controller, context);
  }
  onRequestUpgrade(...a: Parameters<NonNullable<Dispatcher.DispatchHandler["onRequestUpgrade"]>>): void {
    this.inner.onRequestUpgrade?.(...a);
  }
  onResponseStart(...a: Parameters<NonNullable<Dispatcher.DispatchHandler["onResponseStart"]>>): void {
    this.inner.onResponseStart?.(...a);
  }
  onResponseData(...a: Parameters<NonNullable<Dispatcher.DispatchHandler["onResponseData"]>>): void {
    this.inner.onResponseData?.(...a);
  }
  onResponseEnd(...a: Parameters<NonNullable<Dispatcher.DispatchHandler["onResponseEnd"]>>): void {
    this.inner.onResponseEnd?.(...a);
  }
  onResponseError(...a: Parameters<NonNullable<Dispatcher.DispatchHandler["onResponseError"]>>): void {
    this.inner.onResponseError?.(...a);
  }
}

/** Through globalThis.fetch (looked up per request, so whatever intercepts it sees every request), with a pool as its dispatcher. */
export const fetchTransport: TransportFactory = (opts) => {
  const pool = createPool(opts);
  return {
    // fetch has no hook at the write: the gate is asked when the request is handed over.
    get: async (url, headers, signal, mayWrite) => {
      if (mayWrite && !mayWrite()) throw new NotSentError();
      return fromFetch(
        await globalThis.fetch(url, {
          method: "GET",
          headers,
          // The key must never follow a redirect to another origin; we follow none at all.
          redirect: "manual",
          signal,
          // @ts-expect-error -- `dispatcher` is undici's extension of RequestInit, honoured by Node's fetch.
          dispatcher: pool,
        }),
      );
    },
    close: () => pool.close(),
  };
};

function fromDispatcher(res: Awaited<ReturnType<Agent["request"]>>): Received {
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

function fromFetch(res: Response): Received {
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
