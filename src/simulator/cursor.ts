/**
 * Opaque page cursors: base64url(JSON {e, f, k}) + "." + base64url(HMAC-SHA256 tag).
 *
 * - `k` is a keyset position (the last SKU id, or the last history row's occurredAt and
 *   sequence), so a walk stays correct while the data changes under it; or, for a server
 *   paging by offset (variance `cursorPosition: "offset"`), `{ o }`: how many items came
 *   before the next page, so a write landing ahead of it shifts the next page (an item or row
 *   seen twice, or skipped).
 * - `f` is a hash of the filters the cursor was issued for; presenting it with other
 *   filters (or for another SKU / scope) is rejected, as is anything not signed by this
 *   simulator's secret. `limit` is deliberately not part of `f`: the document lets it change.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

export type CursorEndpoint = "list" | "history";

/** Where the next page starts: after this SKU id (list) or this (occurredAt, seq) (history, descending). */
export type ListKey = { id: string };
export type HistoryKey = { t: number; s: number };
/** An offset cursor: the next page starts after this many items of the walk's current order. */
export type OffsetKey = { o: number };

const MAX_CURSOR_LENGTH = 1024;
const TAG_BYTES = 16;

export class CursorCodec {
  constructor(private readonly secret: Buffer) {}

  /** Stable fingerprint of the filters a cursor is bound to. */
  static fingerprint(parts: Record<string, string | null>): string {
    const canonical = JSON.stringify(
      Object.keys(parts)
        .sort()
        .map((k) => [k, parts[k]]),
    );
    return createHash("sha256").update(canonical).digest("base64url").slice(0, 16);
  }

  encode(e: "list", f: string, k: ListKey | OffsetKey): string;
  encode(e: "history", f: string, k: HistoryKey | OffsetKey): string;
  encode(e: CursorEndpoint, f: string, k: ListKey | HistoryKey | OffsetKey): string {
    const body = Buffer.from(JSON.stringify({ v: 1, e, f, k })).toString("base64url");
    return `${body}.${this.tag(body)}`;
  }

  /** The keyset position, or null for anything forged, garbled or issued for other filters. */
  decode(token: string, e: "list", f: string): ListKey | OffsetKey | null;
  decode(token: string, e: "history", f: string): HistoryKey | OffsetKey | null;
  decode(token: string, e: CursorEndpoint, f: string): ListKey | HistoryKey | OffsetKey | null {
    if (token.length > MAX_CURSOR_LENGTH) return null;
    const dot = token.indexOf(".");
    if (dot <= 0 || dot !== token.lastIndexOf(".")) return null;
    const body = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1), "base64url");
    const expected = Buffer.from(this.tag(body), "base64url");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    let payload: unknown;
    try {
      payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
    } catch {
      return null;
    }
    if (!isRecord(payload) || payload.v !== 1 || payload.e !== e || payload.f !== f || !isRecord(payload.k)) return null;
    const k = payload.k;
    if (k.o !== undefined) return Number.isSafeInteger(k.o) && (k.o as number) >= 0 ? { o: k.o as number } : null;
    if (e === "list") return typeof k.id === "string" ? { id: k.id } : null;
    return Number.isSafeInteger(k.t) && Number.isSafeInteger(k.s) ? { t: k.t as number, s: k.s as number } : null;
  }

  private tag(body: string): string {
    return createHmac("sha256", this.secret).update(body).digest().subarray(0, TAG_BYTES).toString("base64url");
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
