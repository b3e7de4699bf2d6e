import { ISO_MOMENT_RE } from "../core/api-schemas.js";
import { DEFAULTS } from "../core/defaults.js";

/**
 * Retry-After in both forms RFC 9110 §10.2.3 allows: delta-seconds ("120") and
 * an HTTP-date ("Wed, 21 Oct 2026 07:28:00 GMT"). Returns the wait in ms from `now`.
 * Decimal seconds ("2.5", "0.05") and an ISO 8601 moment with its zone, which the RFC does not allow
 * but a server may send, are waited for exactly, as meant.
 * 0, a date in the past, or garbage all yield `minMs`: never a hot retry loop. A date ahead
 * is waited for exactly, even under `minMs`: it names the moment itself, to the second (a
 * bucket refilling 50 tokens a second names the next whole second, 0–1 s away, and a floor of
 * a second on top cost half a second per 429).
 * Waits beyond `capMs` (default DEFAULTS.maxServerWaitMs, a day) are returned as `capMs`:
 * any number of digits, or a date centuries ahead, is range-checked before it becomes a
 * time. Below the cap the caller decides whether to sit through a long wait.
 */
export function retryAfterMs(value: string | null | undefined, now: number, minMs: number, capMs: number = DEFAULTS.maxServerWaitMs): number | null {
  const asked = askedMs(value, now, minMs);
  return asked === null ? null : Math.min(asked, capMs);
}

/** True when `value` names a wait beyond `capMs` (a suspicious server: the caller journals it). */
export function retryAfterBeyondCap(value: string | null | undefined, now: number, capMs: number = DEFAULTS.maxServerWaitMs): boolean {
  const asked = askedMs(value, now, 0);
  return asked !== null && asked > capMs;
}

/**
 * True when `value` names no wait at all: zero seconds ("0", "0.0") or an HTTP-date not after `now`. A server
 * that writes its wait cut down (whole seconds by Math.floor or Math.round, or its deadline's date without
 * rounding up) says so for any wait under its grain: a token bucket's next token, milliseconds away. The
 * scheduler then takes the 429 as one naming no wait (its own short backoff, rate-control.ts's unnamed
 * waits), not as garbage held to the floor: a second per 429 where the server asked for none.
 */
export function retryAfterNamesNoWait(value: string | null | undefined, now: number): boolean {
  if (value == null) return false;
  const v = value.trim();
  if (/^0+(\.0+)?$/.test(v)) return true;
  if (!looksLikeHttpDate(v)) return false;
  const t = parseHttpDate(v);
  return Number.isFinite(t) && t <= now;
}

/** The wait `value` names, uncapped (may be Infinity for absurdly many digits). */
function askedMs(value: string | null | undefined, now: number, minMs: number): number | null {
  if (value == null) return null;
  const v = value.trim();
  if (v === "") return minMs;
  if (/^\d+$/.test(v)) return Math.max(minMs, Number(v) * 1000);
  // RFC 9110 allows only whole seconds; a server that sends a decimal ("1.5") still means that many
  // seconds: read as garbage (the floor), a wait over a second was cut short. Above 0 it names the
  // wait to the millisecond, as a date ahead names the moment: waited exactly, without the floor
  // (a bucket naming 0.05 s would otherwise cost a second per 429).
  if (/^\d+\.\d+$/.test(v)) {
    const ms = Math.ceil(Number(v) * 1000);
    return ms > 0 ? ms : minMs;
  }
  if (looksLikeHttpDate(v)) {
    const t = parseHttpDate(v);
    if (Number.isFinite(t)) return t > now ? t - now : minMs;
  }
  return minMs;
}

/** True when `value` is an HTTP-date (RFC 9110's forms, to the whole second), not an ISO 8601 moment to the millisecond. */
export function retryAfterIsHttpDate(value: string | null | undefined): boolean {
  if (value == null) return false;
  const v = value.trim();
  return !ISO_MOMENT_RE.test(v) && looksLikeHttpDate(v) && Number.isFinite(parseHttpDate(v));
}

/**
 * Only things that look like dates: Date.parse is lenient with junk such as "5 apples". Besides RFC 9110's
 * three forms, an ISO 8601 moment with its zone ("2026-11-29T06:00:05.120Z", what `toISOString()` writes):
 * outside the RFC, but a server that sends it names a moment, to the millisecond. Read as garbage it got
 * the 1 s floor, which cut a fixed window's named wait short (Retry-After violated) and hid the window's
 * end (replayed as a token bucket, held at 0.5 req/s). Without a zone it would be local time: garbage.
 */
function looksLikeHttpDate(v: string): boolean {
  return IMF_FIXDATE_RE.test(v) || /^[A-Za-z]+,?\s.*\d{2}:\d{2}:\d{2}/.test(v) || ISO_MOMENT_RE.test(v);
}

/** RFC 9110's preferred HTTP-date (IMF-fixdate, "Sun, 29 Nov 2026 08:00:05 GMT"), the only form a Date header may take. */
export const IMF_FIXDATE_RE = /^[A-Za-z]{3},\s+\d{1,2}\s+[A-Za-z]{3}\s+\d{4}\s+\d{2}:\d{2}:\d{2}\s+GMT$/;

/**
 * RFC 9110's asctime form ("Fri Nov 27 00:30:00 2026") names no zone and means GMT; Date.parse
 * reads a zoneless date as local time, hours off on any machine not set to UTC (a wait of hours
 * west of Greenwich, a violation east of it). The other two forms say GMT themselves.
 */
const ASCTIME = /^[A-Za-z]{3} [A-Za-z]{3} [ \d]?\d \d{2}:\d{2}:\d{2} \d{4}$/;
function parseHttpDate(v: string): number {
  return Date.parse(ASCTIME.test(v) ? `${v} GMT` : v);
}
