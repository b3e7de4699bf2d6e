/**
 * The daemon's HTTP endpoint (node:http, no framework):
 *   GET /healthz  200 while the process is alive and its event loop answers
 *   GET /readyz   200 when the last successful sync is younger than daemon.readyMaxAgeSeconds, else 503 (JSON says why)
 *   GET /metrics  Prometheus text format
 *   GET /changes  the change feed, a long-poll (feed.ts), when feed.serve is on
 * Anything else is 404 (405 for another method on a known path). HEAD works like GET.
 */
import { DEFAULTS } from "../core/defaults.js";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ConfigError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import type { DaemonMetrics } from "./metrics.js";

export interface Readiness {
  ready: boolean;
  /** Why (not) ready, for humans. */
  reason: string;
  lastSuccessAt: string | null;
  ageSeconds: number | null;
  maxAgeSeconds: number;
  running: { mode: string; since: string } | null;
  lastRun: { mode: string; outcome: string; endedAt: string; error: string | null } | null;
  /** A quota wall: no run before this time. */
  resumeAfter: string | null;
}

export interface HttpOptions {
  host: string;
  port: number;
  metrics: DaemonMetrics;
  readiness: () => Readiness;
  logger: Logger;
  /** GET /changes (feed.ts); absent: the path is unknown (404). */
  changes?: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
}

export interface DaemonHttp {
  host: string;
  port: number;
  /** http://host:port */
  url: string;
  close(): Promise<void>;
}

export async function startHttp(opts: HttpOptions): Promise<DaemonHttp> {
  // Half-sent requests are reaped every second, not Node's default 30 s: with `headersTimeout` they cannot pin a connection for long.
  const server = createServer({ connectionsCheckingInterval: 1_000 }, (req, res) => {
    handle(req, res, opts).catch((err) => {
      opts.logger.error({ err, path: req.url }, "http handler failed");
      if (!res.headersSent) send(res, 500, "text/plain; charset=utf-8", "internal error\n", req.method === "HEAD");
      else res.destroy();
    });
  });
  // The container listens on 0.0.0.0: a peer opening connections without end must not take the
  // file descriptors a sync needs for its database. Beyond the limit a connection is closed at once.
  server.maxConnections = DEFAULTS.daemonMaxConnections;
  server.keepAliveTimeout = 5_000;
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;
  await listen(server, opts.host, opts.port);
  const addr = server.address() as AddressInfo;
  const hostPart = addr.address.includes(":") ? `[${addr.address}]` : addr.address;
  return {
    host: addr.address,
    port: addr.port,
    url: `http://${hostPart}:${addr.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Scrapers keep connections alive; do not wait for them to hang up.
        server.closeAllConnections();
      }),
  };
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      const why = err.code === "EADDRINUSE" ? "the address is in use" : err.code === "EADDRNOTAVAIL" ? "the address is not on this host" : err.message;
      reject(new ConfigError(`cannot listen on ${host}:${port}: ${why}; set daemon.listen in the config file or --listen`, { cause: err }));
    };
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
}

async function handle(req: IncomingMessage, res: ServerResponse, opts: HttpOptions): Promise<void> {
  const path = (req.url ?? "/").split("?")[0];
  const head = req.method === "HEAD";
  const known = path === "/healthz" || path === "/readyz" || path === "/metrics" || (path === "/changes" && opts.changes !== undefined);
  if (!known) return send(res, 404, "text/plain; charset=utf-8", "not found: try /healthz, /readyz or /metrics\n", head);
  if (req.method !== "GET" && (!head || path === "/changes")) {
    res.setHeader("Allow", path === "/changes" ? "GET" : "GET, HEAD");
    return send(res, 405, "text/plain; charset=utf-8", "method not allowed\n", head);
  }
  if (path === "/changes") return opts.changes!(req, res);
  switch (path) {
    case "/healthz":
      return send(res, 200, "text/plain; charset=utf-8", "ok\n", head);
    case "/readyz": {
      const r = opts.readiness();
      return send(res, r.ready ? 200 : 503, "application/json", JSON.stringify(r) + "\n", head);
    }
    default: {
      const body = await opts.metrics.text();
      return send(res, 200, opts.metrics.contentType, body, head);
    }
  }
}

function send(res: ServerResponse, status: number, contentType: string, body: string, head: boolean): void {
  res.statusCode = status;
  res.setHeader("Content-Type", contentType);
  res.setHeader("Cache-Control", "no-store");
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(head ? undefined : body);
}
