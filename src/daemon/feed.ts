/**
 * GET /changes?since=SEQ[&wait=SECONDS]: the change feed over HTTP, as a long-poll. It answers
 * at once with the changes after SEQ (NDJSON, one change per line, oldest first, at most
 * DEFAULTS.feedPageSize) when there are any; otherwise it waits up to feed.longPollSeconds
 * (or `wait`, if shorter) for a run to commit some, and answers 200 with an empty body when
 * none came. The consumer asks again from the last seq it handled: at-least-once, in commit
 * order, never a gap (410 when retention already pruned changes after SEQ).
 *
 * Off unless feed.serve. It hands out the customer's stock: beyond loopback it requires a
 * bearer token (INVENTORY_FEED_TOKEN or INVENTORY_FEED_TOKEN_FILE; the daemon refuses to
 * start without one), compared in constant time; a missing or wrong token gets 401, and
 * nothing of the request is logged.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { isLoopbackHost } from "../core/config.js";
import { DEFAULTS } from "../core/defaults.js";
import { ConfigError } from "../core/errors.js";
import type { Secret } from "../core/secret.js";
import { type DB, hasTable, openReadOnly } from "../store/db.js";
import { feedGapAfter, waitForChanges } from "../store/outbox.js";

export interface FeedOptions {
  dbPath: string;
  /** The bearer token consumers must send; null: none required (loopback only). */
  token: Secret | null;
  /** Longest wait of one request. */
  longPollMs: number;
  /** Where the daemon listens: beyond loopback a token is required. */
  host: string;
}

type Reply = { status: number; body: string; headers?: Record<string, string> };

export class FeedEndpoint {
  private db: DB | null = null;
  private readonly ac = new AbortController();
  private readonly tokenDigest: Buffer | null;

  constructor(private readonly o: FeedOptions) {
    if (!o.token && !isLoopbackHost(o.host)) {
      throw new ConfigError(
        `feed.serve is on and the daemon listens on ${o.host}, beyond loopback: set INVENTORY_FEED_TOKEN, or INVENTORY_FEED_TOKEN_FILE ` +
          "to a file holding it, for the bearer token GET /changes requires (or listen on 127.0.0.1)",
      );
    }
    this.tokenDigest = o.token ? digest(o.token.reveal()) : null;
  }

  /** Answer one GET /changes. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const reply = this.authorized(req) ? await this.answer(req) : { status: 401, body: "unauthorized\n", headers: { "WWW-Authenticate": 'Bearer realm="changes"' } };
    if (res.destroyed) return;
    res.statusCode = reply.status;
    res.setHeader("Content-Type", reply.status === 200 ? "application/x-ndjson" : "text/plain; charset=utf-8");
    res.setHeader("Cache-Control", "no-store");
    for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
    res.setHeader("Content-Length", Buffer.byteLength(reply.body));
    res.end(reply.body);
  }

  /** End every wait (the daemon is stopping) and close the read-only connection. */
  close(): void {
    this.ac.abort();
    this.db?.close();
    this.db = null;
  }

  /** Constant time: both sides are hashed to 32 bytes first, so neither the length nor a prefix shows in the timing. */
  private authorized(req: IncomingMessage): boolean {
    if (!this.tokenDigest) return true;
    const m = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? "");
    return timingSafeEqual(digest(m?.[1] ?? ""), this.tokenDigest) && m !== null;
  }

  private async answer(req: IncomingMessage): Promise<Reply> {
    const q = new URL(req.url ?? "/", "http://localhost").searchParams;
    const since = q.get("since") ?? "0";
    const wait = q.get("wait");
    if (!/^\d+$/.test(since) || !Number.isSafeInteger(Number(since))) return { status: 400, body: "since: expected a sequence number (0 or more)\n" };
    if (wait !== null && !/^\d+(\.\d+)?$/.test(wait)) return { status: 400, body: "wait: expected seconds (0 or more)\n" };
    const db = this.reader();
    if (!db) return { status: 503, body: "no change feed yet: the first sync has not created it\n", headers: { "Retry-After": "5" } };
    if (feedGapAfter(db, Number(since))) return { status: 410, body: `the changes after ${since} were pruned by retention; start again from a copy of the tables\n` };
    const timeoutMs = Math.min(this.o.longPollMs, wait === null ? Infinity : Number(wait) * 1000);
    const closed = new AbortController();
    const onClose = () => closed.abort();
    req.socket.once("close", onClose);
    try {
      const signal = AbortSignal.any([this.ac.signal, closed.signal]);
      const page = await waitForChanges(db, Number(since), { limit: DEFAULTS.feedPageSize, timeoutMs, intervalMs: DEFAULTS.feedPollIntervalMs, signal });
      const last = page.length ? page[page.length - 1]!.seq : Number(since);
      return { status: 200, body: page.map((c) => `${JSON.stringify(c)}\n`).join(""), headers: { "X-Feed-Last-Seq": String(last) } };
    } finally {
      req.socket.off("close", onClose);
    }
  }

  /** The read-only connection, opened once the database and its feed exist. */
  private reader(): DB | null {
    if (this.db) return this.db;
    if (!existsSync(this.o.dbPath)) return null;
    const db = openReadOnly(this.o.dbPath);
    if (!hasTable(db, "changes")) {
      db.close();
      return null;
    }
    this.db = db;
    return db;
  }
}

const digest = (s: string) => createHash("sha256").update(s).digest();
