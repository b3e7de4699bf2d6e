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
 */
import { Agent } from "undici";

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
  get(url: URL, headers: Record<string, string>, signal: AbortSignal): Promise<Received>;
  /** Close the pool (the client calls it from its own close()). */
  close(): Promise<void>;
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
  const pool = createPool(opts);
  return {
    get: async (url, headers, signal) => fromDispatcher(await pool.request({ origin: url.origin, path: url.pathname + url.search, method: "GET", headers, signal })),
    close: () => pool.close(),
  };
};

/** Through globalThis.fetch (looked up per request, so whatever intercepts it sees every request), with a pool as its dispatcher. */
export const fetchTransport: TransportFactory = (opts) => {
  const pool = createPool(opts);
  return {
    get: async (url, headers, signal) =>
      fromFetch(
        await globalThis.fetch(url, {
          method: "GET",
          headers,
          // The key must never follow a redirect to another origin; we follow none at all.
          redirect: "manual",
          signal,
          // @ts-expect-error -- `dispatcher` is undici's extension of RequestInit, honoured by Node's fetch.
          dispatcher: pool,
        }),
      ),
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
