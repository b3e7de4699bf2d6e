/**
 * Retry-After in both forms RFC 9110 §10.2.3 allows: delta-seconds ("120") and
 * an HTTP-date ("Wed, 21 Oct 2026 07:28:00 GMT"). Returns the wait in ms from `now`.
 * 0, a date in the past, or garbage all yield `minMs`: never a hot retry loop.
 * Long waits are returned as they are; the caller decides whether to sit through them.
 */
export function retryAfterMs(value: string | null | undefined, now: number, minMs: number): number | null {
  if (value == null) return null;
  const v = value.trim();
  if (v === "") return minMs;
  if (/^\d+$/.test(v)) {
    const s = Number(v);
    return Math.max(minMs, s * 1000);
  }
  // Only accept things that look like dates; Date.parse is lenient with junk such as "5 apples".
  if (/^[A-Za-z]{3},\s+\d{1,2}\s+[A-Za-z]{3}\s+\d{4}\s+\d{2}:\d{2}:\d{2}\s+GMT$/.test(v) || /^[A-Za-z]+,?\s.*\d{2}:\d{2}:\d{2}/.test(v)) {
    const t = Date.parse(v);
    if (Number.isFinite(t)) return Math.max(minMs, t - now);
  }
  return minMs;
}
