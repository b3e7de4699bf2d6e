/**
 * What to do after a failed request, as data. The scheduler reads this table;
 * nothing else decides whether a request is retried.
 */
import type { ApiError } from "../core/errors.js";

export type RetryAction =
  /** Wait (Retry-After, else backoff) with EVERY worker paused, then retry; does not consume maxRetries. */
  | "pause-all-and-retry"
  /** Wait (Retry-After, else backoff) with every worker paused, then retry up to maxRetries. */
  | "pause-all-and-retry-bounded"
  /** Back off this request only, then retry up to maxRetries. */
  | "backoff-and-retry"
  /** Back off this request only, then retry at most INVALID_RESPONSE_RETRIES times. */
  | "backoff-and-retry-twice"
  /** Fail now. */
  | "fail";

const RETRY_POLICY: ReadonlyArray<{ when: (e: ApiError) => boolean; action: RetryAction; why: string }> = [
  {
    when: (e) => e.kind === "http" && e.status === 429,
    action: "pause-all-and-retry",
    why: "Quota or pre-auth limit: the server says when to come back; the whole process waits, not just this worker, and the send rate is lowered.",
  },
  {
    when: (e) => e.kind === "http" && e.status === 503,
    action: "pause-all-and-retry-bounded",
    why: "Auth store or upstream down: everyone backs off together; bounded so a long outage ends the run with a clear error.",
  },
  {
    when: (e) => e.kind === "http" && (e.status === 502 || e.status === 504 || e.status === 500),
    action: "backoff-and-retry",
    why: "Gateway hiccups are usually transient; bounded.",
  },
  {
    when: (e) => e.kind === "network" || e.kind === "timeout",
    action: "backoff-and-retry",
    why: "Resets and timeouts are transient on a healthy network; bounded.",
  },
  {
    when: (e) => e.kind === "invalid-response" && e.status !== null,
    action: "backoff-and-retry-twice",
    why: "A truncated or garbled body is often a proxy hiccup; a body that stays wrong fails its unit of work (recorded, retried next run).",
  },
  {
    when: (e) => e.kind === "auth",
    action: "fail",
    why: "401 means the key is missing, expired or revoked: retrying cannot help and only spends the pre-auth limit.",
  },
  {
    when: () => true,
    action: "fail",
    why: "Other 4xx and invalid responses are not retried blindly; the caller decides (e.g. restart a walk on a rejected cursor).",
  },
];

/** Retries of a response that could not be read or validated. */
export const INVALID_RESPONSE_RETRIES = 2;

export function actionFor(e: ApiError): RetryAction {
  return (RETRY_POLICY.find((r) => r.when(e)) ?? { action: "fail" as const }).action;
}

/**
 * Exponential backoff with equal jitter (AWS architecture blog): uniform in [c/2, c], c = min(cap,
 * base·2^attempt). Half of each wait is sure, so a request's retries span at least half the sum of
 * the ceilings (6.3 s over the default 6 retries from 100 ms) and an outage shorter than that never
 * fails it. With full jitter ([0, c]) a request's retries could all fall inside outages (real CLI, 60/s
 * burst 10, 600 SKUs, 1 s outages of 503s starting on 0.3 % of requests: a SKU failed, a partial run, in
 * 1 of 3 seeds; with equal jitter 0 of 5. BENCHMARKS.md).
 */
export function backoffMs(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.max(1, Math.round(ceiling / 2 + (random() * ceiling) / 2));
}
