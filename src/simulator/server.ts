/**
 * The HTTP face of the simulator (node:http, keep-alive on).
 *
 * API pipeline, in order: stats + Retry-After check on arrival → the way in (the latency's inbound
 * share, if set) → the server's own stall in course, if any (stalls.ts) → the limit before
 * authentication (429, if set) → auth (401) → quota (429) → the way back (the rest of the latency,
 * if set) → route (404) / method (405) → faults → the endpoint.
 *
 * Latency (`latencyMs` ± `latencyJitterMs`, seeded) stands for a server far away. By default
 * the whole round trip is spent after the quota's decision: the quota sees each request the
 * moment it arrives and every response (401, 429, faults and data alike) leaves that much later.
 * With `inboundShare` (0-1) that share of it is spent before the decision instead, the way in of a
 * real network: the request is held that long after it reaches the socket, and its two legs are
 * jittered apart, so requests sent in one order can be decided in another. The Retry-After ledger
 * still judges a request when it reaches the socket (when the client sent it, on loopback): the
 * rule is on sends. A quota 429's Retry-After is decided at the decision: a date names the same
 * instant whenever it is read; delta-seconds count from when the client reads them (conservative
 * by the way back). Admin endpoints under
 * {prefix}/_sim/ need the same key but skip stats, quota and faults, so a test harness can
 * observe and steer the simulator without disturbing what it measures.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { EndpointName } from "../core/defaults.js";
import type { Socket } from "node:net";
import { ConfigError } from "../core/errors.js";
import { handleApi, matchRoute, type Route } from "./api.js";
import { CursorCodec } from "./cursor.js";
import { DEFAULT_OVERSIZE_BYTES, FaultEngine, faultRetryAfter, oversizeFrame, parseFaultSpec, PROXY_ERROR_PAGE, validateFaultRule, withoutRequiredField, type FaultRule } from "./faults.js";
import type { SimModel } from "./model.js";
import { createRng, type Rng } from "./prng.js";
import { ServerStalls, type StallOptions } from "./stalls.js";
import {
  ConcurrencyLimit,
  createQuota,
  quotaRetryAfter,
  retryAfterDeadline,
  SharedQuota,
  type ConcurrencyOptions,
  type Quota,
  type QuotaOptions,
  type RetryAfterForm,
  type TakeResult,
} from "./quota.js";
import { StatsCollector, type SimStats } from "./stats.js";
import { SimApiError } from "./types.js";
import { escapeEveryCharacter, hostileBody, type HostileTextOptions } from "./hostile-text.js";
import { EndlessCursors, type EndlessCursorOptions } from "./hostile-cursor.js";
import { LiveWrites, type LiveWrite, type LiveWriteOptions, type ServedPage } from "./live-writes.js";
import { HostileCursorCodec, listOrderKey, Shaper, type VarianceOptions } from "./variance.js";

const JSON_TYPE = "application/json; charset=utf-8";
const MAX_ADMIN_BODY = 1024 * 1024;
/** Longer than undici's default idle keep-alive (4 s), so the client closes idle sockets first, never the server mid-reuse. */
const KEEP_ALIVE_MS = 30_000;
const PADDING = Buffer.alloc(64 * 1024, "x");

/** The outcome a request's stats record, when the socket's close cannot tell it (a reset, or a body cut short). */
interface Recorded {
  outcome: number | "reset" | null;
}

export interface SimServerOptions {
  model: SimModel;
  apiKey: string;
  /** "" or "/something" (no trailing slash). */
  prefix: string;
  quota: QuotaOptions | null;
  /**
   * The limit before authentication the document names beside the workspace quota (any quota shape):
   * every request takes from it first, the ones it refuses (429, its own Retry-After form) reach
   * neither the key check nor the workspace quota. Null: none.
   */
  preAuthLimit?: QuotaOptions | null;
  /** A limit on concurrency beside the quota (quota.ts ConcurrencyOptions): more requests being answered at once are refused (429). Null: none. */
  concurrencyLimit?: ConcurrencyOptions | null;
  faults: FaultRule[];
  /** Seeds fault selection, latency jitter and the cursor secret. */
  seed: number;
  /** How this server answers where the API document leaves a choice open (default: the simulator's own choices). */
  variance?: VarianceOptions;
  /** Every API response is delayed by ms ± jitterMs (uniform, seeded); null or ms 0 = none. `inboundShare` of it (0-1, default 0) comes before the quota's decision. */
  latency?: { ms: number; jitterMs?: number; inboundShare?: number } | null;
  /** Now and then the server decides nothing for up to `ms`, then decides what arrived meanwhile at once (stalls.ts); null = never. */
  stall?: StallOptions | null;
  /** A hostile server's text: control sequences in names, the Authorization header echoed (hostile-text.ts). */
  hostileText?: HostileTextOptions;
  /** Paging that never ends, for chosen SKUs' history and/or the list (hostile-cursor.ts). */
  endlessCursors?: EndlessCursorOptions;
  /** Writes that land between the pages of a walk (live-writes.ts). */
  liveWrites?: LiveWriteOptions;
  /**
   * This server's clock reads `clockSkewMs` ahead of the machine's (negative: behind): its `Date` header and the
   * dates its Retry-After names are in its own time; the ledger holds clients to the moment meant. Default 0.
   */
  clockSkewMs?: number;
}

export class SimServer {
  readonly server: Server;
  private readonly model: SimModel;
  private readonly prefix: string;
  private readonly keyDigest: Buffer;
  private readonly cursors: CursorCodec;
  private readonly stats = new StatsCollector();
  private readonly seed: number;
  private quota: Quota | null = null;
  private quotaOptions: QuotaOptions | null = null;
  private preAuth: Quota | null = null;
  private preAuthOptions: QuotaOptions | null = null;
  private readonly concurrency: { limit: ConcurrencyLimit; retryAfter: RetryAfterForm | undefined } | null;
  private readonly latency: Latency | null;
  private readonly stalls: ServerStalls | null;
  private faults: FaultEngine;
  private readonly sockets = new Set<Socket>();
  /** Pending `slow` delays, released at close so nothing keeps the process alive. */
  private readonly waits = new Set<() => void>();
  private closing = false;
  readonly shaper: Shaper;
  private readonly hostileText: HostileTextOptions | null;
  private readonly endless: EndlessCursors | null;
  private live: LiveWrites | null;
  private readonly skewMs: number;

  constructor(o: SimServerOptions) {
    this.model = o.model;
    this.prefix = o.prefix;
    this.seed = o.seed;
    this.skewMs = o.clockSkewMs ?? 0;
    this.keyDigest = digest(o.apiKey);
    this.shaper = new Shaper(o.variance, o.model);
    this.hostileText = o.hostileText ?? null;
    this.endless = o.endlessCursors ? new EndlessCursors(o.endlessCursors) : null;
    this.live = o.liveWrites ? new LiveWrites(o.liveWrites, o.model) : null;
    o.model.setListOrder(listOrderKey(this.shaper.options.listOrder, o.seed, (id) => o.model.listItem(id).totalQuantity));
    // Seed-derived: the same seed issues the same cursors, so whole responses are reproducible.
    const secret = createHash("sha256").update(`inventory-mirror simulator cursor key ${o.seed}`).digest();
    this.cursors = this.shaper.options.cursorStyle === "url-hostile" ? new HostileCursorCodec(secret) : new CursorCodec(secret);
    this.faults = new FaultEngine([], o.seed);
    this.latency = latencyOf(o.latency, o.seed);
    const stallRng = createRng(o.seed, "stall");
    this.stalls = o.stall ? new ServerStalls(o.stall, () => stallRng.next(), Date.now()) : null;
    this.setFaults(o.faults);
    this.setQuota(o.quota);
    this.setPreAuthLimit(o.preAuthLimit ?? null);
    this.concurrency = o.concurrencyLimit ? { limit: new ConcurrencyLimit(o.concurrencyLimit), retryAfter: o.concurrencyLimit.retryAfter } : null;
    this.server = createServer({ keepAlive: true }, (req, res) => {
      this.onRequest(req, res).catch((err: unknown) => this.internalError(res, err));
    });
    this.server.keepAliveTimeout = KEEP_ALIVE_MS;
    // Node answers unparsable requests with a bare 400; keep the "error bodies are always JSON" promise.
    this.server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
      if (!socket.writable || err.code === "ECONNRESET") return void socket.destroy();
      const timeout = err.code === "ERR_HTTP_REQUEST_TIMEOUT";
      const body = errorBuffer(timeout ? "request_timeout" : "bad_request", timeout ? "Request timed out" : "Malformed HTTP request");
      socket.end(`HTTP/1.1 ${timeout ? "408 Request Timeout" : "400 Bad Request"}\r\ncontent-type: ${JSON_TYPE}\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body.toString()}`);
    });
    this.server.on("connection", (socket: Socket) => {
      this.sockets.add(socket);
      this.stats.connectionOpened();
      socket.once("close", () => {
        this.sockets.delete(socket);
        this.stats.connectionClosed();
      });
    });
  }

  /** Writes to land between the pages of walks from now on (a fresh budget), or none. */
  setLiveWrites(o: LiveWriteOptions | null): void {
    const made = this.live?.made ?? [];
    this.live = o ? new LiveWrites(o, this.model, made) : null;
  }

  /** The writes live writes made so far, oldest first. */
  liveWritesMade(): ReadonlyArray<LiveWrite> {
    return [...(this.live?.made ?? [])];
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, host, () => {
        this.server.off("error", reject);
        const addr = this.server.address();
        resolve(typeof addr === "object" && addr ? addr.port : port);
      });
    });
  }

  /** Stop listening and drop every connection now (idle keep-alive ones included). */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const release of this.waits) release();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  getStats(): SimStats {
    const q = this.quota;
    return { ...this.stats.snapshot(), otherClient: q instanceof SharedQuota ? { requests: q.otherRequests, refused: q.otherRefused } : null };
  }

  resetStats(): void {
    this.stats.reset();
  }

  setFaults(rules: readonly (FaultRule | string)[]): void {
    const valid = rules.map((r, i) => (typeof r === "string" ? parseFaultSpec(r) : validateFaultRule(r, `fault rule ${i}`)));
    this.faults = new FaultEngine(valid, this.seed);
  }

  setQuota(q: QuotaOptions | null): void {
    this.quota = q ? createQuota(q) : null;
    this.quotaOptions = q;
  }

  /** The limit before authentication (SimServerOptions.preAuthLimit), afresh; null: none. */
  setPreAuthLimit(q: QuotaOptions | null): void {
    if (q?.otherClientRps !== undefined) throw new RangeError("otherClientRps is for the workspace quota, not the limit before authentication");
    this.preAuth = q ? createQuota(q) : null;
    this.preAuthOptions = q;
  }

  // ------------------------------------------------------------ pipeline

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const at = Date.now();
    let url: URL;
    try {
      url = new URL(req.url ?? "/", "http://simulator.invalid");
    } catch {
      return void this.sendApiError(res, 400, "bad_request", "Unparsable request target");
    }
    const inner = this.stripPrefix(url.pathname);
    if (inner !== null && (inner === "/_sim" || inner.startsWith("/_sim/"))) return this.admin(req, res, inner.slice("/_sim".length), url);

    const route = inner === null ? null : matchRoute(inner);
    // Node stamps Date from the machine's clock; a skewed server stamps its own.
    if (this.skewMs !== 0) res.setHeader("date", new Date(this.clockNow()).toUTCString());
    const finish = this.stats.begin(at, url.pathname, route?.endpoint ?? null, req.socket);
    const record: Recorded = { outcome: null };
    res.once("close", () => finish(record.outcome ?? (res.writableFinished ? res.statusCode : "reset")));

    const legs = this.latency ? latencyLegs(this.latency) : null;
    if (legs && legs.inMs > 0) {
      await this.wait(legs.inMs, res);
      if (res.destroyed || this.closing) return;
    }
    // The server's own stall (stalls.ts): what arrives in it is decided at its end.
    const arrived = Date.now();
    const stalledMs = this.stalls ? this.stalls.decidedAt(arrived) - arrived : 0;
    if (stalledMs > 0) {
      this.stats.stalledRequest();
      await this.wait(stalledMs, res);
      if (res.destroyed || this.closing) return;
    }
    const before = this.preAuth ? this.preAuth.take() : null;
    const passedBefore = !before || before.ok;
    const authorized = passedBefore && this.authorized(req);
    const taken = authorized ? this.takeQuota(route?.endpoint, res) : null;
    if (authorized && (!taken || taken.ok)) this.stats.quotaAdmitted();
    const retryAfter = taken && !taken.ok ? quotaRetryAfter(taken.form, taken, this.clockNow()) : null;
    const preRetryAfter = before && !before.ok ? quotaRetryAfter(this.preAuthOptions?.retryAfter, before, this.clockNow()) : null;
    if (legs && legs.outMs > 0) {
      await this.wait(legs.outMs, res);
      if (res.destroyed || this.closing) return;
    }
    if (!passedBefore) {
      this.stats.preAuthRejected();
      return this.sendRetryAfter(res, 429, "rate_limited", "Too many requests", preRetryAfter);
    }
    if (!authorized) return void this.sendApiError(res, 401, "unauthorized", "Missing or invalid developer key", { "www-authenticate": "Bearer" });
    if (taken && !taken.ok) {
      this.stats.quotaRejected();
      return this.sendRetryAfter(res, 429, "rate_limited", "Workspace quota exceeded", retryAfter);
    }
    if (!route) return void this.sendApiError(res, 404, "not_found", `No such endpoint: ${url.pathname}`);
    if (req.method !== "GET") return void this.sendApiError(res, 405, "method_not_allowed", "The API is read-only: only GET is allowed", { allow: "GET" });

    const decision = this.faults.decide({ endpoint: route.endpoint, skuId: route.skuId, hasCursor: !!url.searchParams.get("cursor") });
    if (decision.delayMs > 0) {
      this.stats.fault("slow");
      await this.wait(decision.delayMs, res);
      if (res.destroyed || this.closing) return;
    }
    const fault = decision.fault;
    if (fault) this.stats.fault(fault.kind);
    if (fault && (await this.sendFaultInstead(req, res, fault, record))) return;
    const { status, body } = this.endpointAnswer(req, url, route);
    this.sendAnswer(res, status, body, route, fault, record);
  }

  /**
   * The workspace quota's decision for one request (its endpoint's cost), then the concurrency limit's, whose
   * place is freed when the response ends; null when neither is set. A refusal carries its Retry-After form.
   */
  private takeQuota(endpoint: EndpointName | undefined, res: ServerResponse): (TakeResult & { form: RetryAfterForm | undefined }) | null {
    const taken = this.quota ? this.quota.take(endpoint) : null;
    if (taken && !taken.ok) return { ...taken, form: this.quotaOptions?.retryAfter };
    if (!this.concurrency) return taken && { ...taken, form: undefined };
    const held = this.concurrency.limit.take();
    if (!held.ok) return { ...held, form: this.concurrency.retryAfter };
    // Freed when the response is handed over (finish), or the connection ends without it (close): once.
    const limit = this.concurrency.limit;
    let freed = false;
    const free = () => {
      if (freed) return;
      freed = true;
      limit.release();
    };
    res.once("finish", free);
    res.once("close", free);
    return { ...held, form: undefined };
  }

  /** A fault that replaces the endpoint's answer: sends it and returns true; false for a fault that alters the answer or only delays it. */
  private async sendFaultInstead(req: IncomingMessage, res: ServerResponse, fault: FaultRule, record: Recorded): Promise<boolean> {
    switch (fault.kind) {
      case "429":
        this.sendRetryAfter(res, 429, "rate_limited", "Too many requests", faultRetryAfter(fault, this.clockNow()));
        return true;
      case "503":
        this.sendRetryAfter(res, 503, "service_unavailable", "The service is temporarily unavailable", faultRetryAfter(fault, this.clockNow()));
        return true;
      case "reset":
        record.outcome = "reset";
        req.socket.resetAndDestroy();
        return true;
      case "reject-cursor":
        this.sendApiError(res, 400, "invalid_cursor", "cursor is not valid for this request");
        return true;
      case "html":
        send(res, 200, "text/html; charset=utf-8", Buffer.from(PROXY_ERROR_PAGE));
        return true;
      case "malformed-json":
        send(res, 200, JSON_TYPE, Buffer.from('{"items": ['));
        return true;
      case "oversize":
        record.outcome = 200;
        await this.sendOversize(res, fault.bytes ?? DEFAULT_OVERSIZE_BYTES);
        return true;
      default:
        return false;
    }
  }

  /** The endpoint's status and body, shaped by this server's variance (an API error becomes its error body). */
  private endpointAnswer(req: IncomingMessage, url: URL, route: Route): { status: number; body: unknown } {
    try {
      const endless = this.endless?.applies(route.endpoint, route.skuId ?? null) ? this.endless : null;
      let body: unknown = handleApi(this.model, this.cursors, route, endless ? endless.query(url.searchParams) : url.searchParams, this.shaper);
      if (endless) body = endless.page(body);
      else if (this.live) this.live.afterPage(servedPage(route, url, body));
      body = this.shaper.response(route.endpoint, body, url.searchParams.get("scopeLocationId")?.toLowerCase() ?? null, !!url.searchParams.get("cursor"));
      if (this.hostileText) body = hostileBody(body, this.hostileText, req.headers.authorization);
      return { status: 200, body };
    } catch (err) {
      if (!(err instanceof SimApiError)) throw err;
      const e = this.shaper.error(err.status, err.code);
      return { status: e.status, body: this.shaper.errorBody(e.code, err.message) };
    }
  }

  /** Sends the endpoint's answer, spoilt by a fault that alters it (missing field, wrong content type, truncated body). */
  private sendAnswer(res: ServerResponse, status: number, answer: unknown, route: Route, fault: FaultRule | null, record: Recorded): void {
    const body = fault?.kind === "missing-field" && status === 200 ? withoutRequiredField(route.endpoint, answer) : answer;
    const text = JSON.stringify(body);
    const buf = Buffer.from(this.hostileText?.escapeStrings ? escapeEveryCharacter(text) : text);
    if (fault?.kind === "wrong-content-type") return void send(res, status, "text/plain; charset=utf-8", buf);
    if (fault?.kind === "truncated") {
      record.outcome = status;
      res.writeHead(status, { "content-type": JSON_TYPE, "content-length": buf.length });
      // Half the declared body, then the connection ends: the client sees a premature close.
      res.write(buf.subarray(0, Math.floor(buf.length / 2)), () => res.destroy());
      return;
    }
    send(res, status, JSON_TYPE, buf);
  }

  private stripPrefix(path: string): string | null {
    if (!this.prefix) return path;
    if (path === this.prefix) return "";
    return path.startsWith(`${this.prefix}/`) ? path.slice(this.prefix.length) : null;
  }

  private authorized(req: IncomingMessage): boolean {
    const header = req.headers.authorization;
    if (!header) return false;
    const m = /^Bearer +(\S+) *$/i.exec(header);
    if (!m) return false;
    // Compare digests: constant time, and no length leak.
    return timingSafeEqual(digest(m[1]!), this.keyDigest);
  }

  /** An error of the API pipeline, with the status, code and body shape this server's variance gives it. */
  private sendApiError(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
    const e = this.shaper.error(status, code);
    send(res, e.status, JSON_TYPE, Buffer.from(JSON.stringify(this.shaper.errorBody(e.code, message))), headers);
  }

  /** A 429/503 whose Retry-After (if any) the ledger will hold later requests to. */
  private sendRetryAfter(res: ServerResponse, status: number, code: string, message: string, retryAfter: string | null): void {
    const e = this.shaper.error(status, code);
    send(res, e.status, JSON_TYPE, Buffer.from(JSON.stringify(this.shaper.errorBody(e.code, message))), retryAfter === null ? {} : { "retry-after": retryAfter });
    if (retryAfter === null) return;
    const sentAt = Date.now();
    const deadline = retryAfterDeadline(retryAfter, sentAt, this.skewMs);
    if (deadline !== null) this.stats.ledger.record(sentAt, deadline, res.socket);
  }

  /** This server's clock (SimServerOptions.clockSkewMs): what its Date header and Retry-After dates are written in. */
  private clockNow(): number {
    return Date.now() + this.skewMs;
  }

  private wait(ms: number, res: ServerResponse): Promise<void> {
    return new Promise((resolve) => {
      const release = (): void => {
        clearTimeout(timer);
        res.off("close", release);
        this.waits.delete(release);
        resolve();
      };
      const timer = setTimeout(release, ms);
      res.once("close", release);
      this.waits.add(release);
    });
  }

  /** A valid JSON body of exactly `bytes` bytes, streamed with backpressure (never held in memory). */
  private async sendOversize(res: ServerResponse, bytes: number): Promise<void> {
    const { head, tail, padding } = oversizeFrame(bytes);
    res.writeHead(200, { "content-type": JSON_TYPE, "content-length": head.length + padding + tail.length });
    res.write(head);
    let left = padding;
    while (left > 0 && !res.destroyed) {
      const chunk = left >= PADDING.length ? PADDING : PADDING.subarray(0, left);
      left -= chunk.length;
      if (!res.write(chunk)) await drained(res);
    }
    if (!res.destroyed) res.end(tail);
  }

  private internalError(res: ServerResponse, err: unknown): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const message = err instanceof Error ? err.message : String(err);
    sendError(res, 500, "internal", `Simulator error: ${message}`);
  }

  // ------------------------------------------------------------ admin

  private async admin(req: IncomingMessage, res: ServerResponse, path: string, url: URL): Promise<void> {
    if (!this.authorized(req)) return void sendError(res, 401, "unauthorized", "Missing or invalid developer key", { "www-authenticate": "Bearer" });
    const method = req.method ?? "GET";
    const want = ADMIN_ROUTES[path];
    if (!want) return void sendError(res, 404, "not_found", `No such admin endpoint: ${url.pathname}`);
    if (method !== want) return void sendError(res, 405, "method_not_allowed", `Use ${want}`, { allow: want });
    try {
      switch (path) {
        case "/ground-truth":
          return await this.streamGroundTruth(res);
        case "/stats":
          return void sendJson(res, 200, this.getStats());
        case "/stats/reset":
          this.resetStats();
          return void sendJson(res, 200, { ok: true });
        case "/faults": {
          const body = await readJson(req);
          if (!Array.isArray(body)) throw new ConfigError("body must be a JSON array of fault rules (objects or spec strings)");
          this.setFaults(body as (FaultRule | string)[]);
          return void sendJson(res, 200, { faults: this.faults.rules });
        }
        case "/quota": {
          const body = await readJson(req);
          if (body !== null && (typeof body !== "object" || Array.isArray(body))) {
            throw new ConfigError("body must be null, {requestsPerSecond, burst?, retryAfter?} or {kind: 'fixed-window' | 'sliding-window', requests, windowSeconds, retryAfter?}");
          }
          const q = body as QuotaOptions | null;
          try {
            this.setQuota(q);
          } catch (err) {
            throw new ConfigError((err as Error).message);
          }
          return void sendJson(res, 200, { quota: q });
        }
        case "/preauth": {
          const body = await readJson(req);
          if (body !== null && (typeof body !== "object" || Array.isArray(body))) throw new ConfigError("body must be null or a quota shape, as for /quota");
          try {
            this.setPreAuthLimit(body as QuotaOptions | null);
          } catch (err) {
            throw new ConfigError((err as Error).message);
          }
          return void sendJson(res, 200, { preAuthLimit: body });
        }
        case "/churn": {
          const fraction = Number(url.searchParams.get("fraction") ?? "0.01");
          const seedParam = url.searchParams.get("seed");
          if (!(fraction >= 0 && fraction <= 1)) throw new ConfigError("fraction must be a number in [0, 1]");
          if (seedParam !== null && !/^\d+$/.test(seedParam)) throw new ConfigError("seed must be a non-negative integer");
          return void sendJson(res, 200, this.model.randomChurn(fraction, seedParam === null ? undefined : Number(seedParam)));
        }
      }
    } catch (err) {
      if (err instanceof ConfigError) return void sendError(res, 400, "invalid_request", err.message);
      throw err;
    }
  }

  private async streamGroundTruth(res: ServerResponse): Promise<void> {
    res.writeHead(200, { "content-type": JSON_TYPE });
    const head = JSON.stringify({ workspace: this.shaper.truthWorkspace(this.model.workspace()), locations: this.shaper.truthLocations(this.model.locations().locations) });
    res.write(`${head.slice(0, -1)},"skus":[`);
    // Batched into ~256 KB writes: one write per SKU spends more time in the stream than in rendering.
    let batch: string[] = [];
    let size = 0;
    let first = true;
    for (const sku of this.model.groundTruthSkus()) {
      const json = (first ? "" : ",") + JSON.stringify(this.shaper.truthSku(sku));
      first = false;
      batch.push(json);
      size += json.length;
      if (size < 256 * 1024) continue;
      if (res.destroyed) return;
      const ok = res.write(batch.join(""));
      batch = [];
      size = 0;
      if (!ok) await drained(res);
    }
    if (!res.destroyed) res.end(`${batch.join("")}]}`);
  }
}

const ADMIN_ROUTES: Record<string, "GET" | "POST"> = {
  "/ground-truth": "GET",
  "/stats": "GET",
  "/stats/reset": "POST",
  "/faults": "POST",
  "/quota": "POST",
  "/preauth": "POST",
  "/churn": "POST",
};

interface Latency {
  ms: number;
  jitterMs: number;
  inboundShare: number;
  rng: Rng;
}

function latencyOf(l: SimServerOptions["latency"], seed: number): Latency | null {
  if (!l || (l.ms === 0 && !l.jitterMs)) return null;
  const jitterMs = l.jitterMs ?? 0;
  const inboundShare = l.inboundShare ?? 0;
  if (!(l.ms >= 0) || !Number.isFinite(l.ms) || !(jitterMs >= 0) || !Number.isFinite(jitterMs)) {
    throw new ConfigError(`latency must be a non-negative number of ms (jitter too), got ${JSON.stringify(l)}`);
  }
  if (!(inboundShare >= 0 && inboundShare <= 1)) throw new ConfigError(`latency inbound share must be within 0-1, got ${JSON.stringify(l.inboundShare)}`);
  return { ms: l.ms, jitterMs, inboundShare, rng: createRng(seed, "latency") };
}

/** One request's way in (before the quota's decision) and way back (ms): each leg its share of ms ± its share of the jitter, drawn apart. */
export function latencyLegs(l: Latency): { inMs: number; outMs: number } {
  const leg = (share: number): number => (share > 0 ? Math.max(0, Math.round(share * (l.ms + (l.rng.next() * 2 - 1) * l.jitterMs))) : 0);
  return { inMs: leg(l.inboundShare), outMs: leg(1 - l.inboundShare) };
}

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

function errorBuffer(code: string, message: string): Buffer {
  return Buffer.from(JSON.stringify({ error: { code, message } }));
}

function send(res: ServerResponse, status: number, type: string, body: Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": type, "content-length": body.length, "cache-control": "no-store", ...headers });
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  send(res, status, JSON_TYPE, Buffer.from(JSON.stringify(body)));
}

function sendError(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  send(res, status, JSON_TYPE, errorBuffer(code, message), headers);
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_ADMIN_BODY) throw new ConfigError("body too large");
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (!text) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ConfigError("body is not valid JSON");
  }
}

/** A page as live writes see it (the model's own answer, before the shaper). */
function servedPage(route: Route, url: URL, body: unknown): ServedPage {
  const b = body as { page?: { nextCursor?: string | null }; items?: Array<{ locationId?: string }> };
  const paged = route.endpoint === "list" || route.endpoint === "history";
  return {
    endpoint: route.endpoint === "history" || route.endpoint === "detail" ? route.endpoint : "list",
    skuId: route.skuId?.toLowerCase() ?? null,
    hasCursor: !!url.searchParams.get("cursor"),
    morePages: paged && typeof b.page?.nextCursor === "string",
    firstLeafId: route.endpoint === "history" ? (b.items?.[0]?.locationId ?? null) : null,
  };
}
