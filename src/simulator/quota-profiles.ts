/**
 * Server profiles for the quota shapes of issue 10 §2: token buckets with no, a small or a
 * large burst, a fixed or a sliding window, 429s whose Retry-After is delta-seconds, an HTTP-date or
 * absent, 503 bursts that are not about quota, a server 20 or 100 ms away, and a workspace quota behind
 * the limit before authentication the document names beside it. Spread into
 * SERVER_PROFILES (profiles.ts); combine them (`--profile quota-small-burst --profile
 * quota-503-bursts`). The values are examples: the bench's quota matrix picks its own.
 */
import type { ServerProfile } from "./server-profile.js";

export const QUOTA_PROFILES: Record<string, ServerProfile> = {
  "quota-slow-no-burst": {
    about: "token bucket 4 req/s with no burst (bucket of 1): every request waits its turn",
    options: { quota: { requestsPerSecond: 4, burst: 1 } },
  },
  "quota-small-burst": {
    about: "token bucket 40 req/s, burst 10, Retry-After in whole seconds (an integer, rounded up)",
    options: { quota: { requestsPerSecond: 40, burst: 10 } },
  },
  "quota-fast-burst-eq-rate": {
    about: "token bucket 150 req/s whose burst equals its rate",
    options: { quota: { requestsPerSecond: 150, burst: 150 } },
  },
  "quota-fixed-window": {
    about: "fixed window: 250 requests per 10 s window, Retry-After pointing at the window's end",
    options: { quota: { kind: "fixed-window", requests: 250, windowSeconds: 10 } },
  },
  "quota-fixed-window-minute": {
    about: "fixed window: 1,200 requests per minute",
    options: { quota: { kind: "fixed-window", requests: 1200, windowSeconds: 60 } },
  },
  "quota-window-no-retry-after": {
    about: "fixed window: 200 requests per 2 s window, whose 429s carry no Retry-After (the window's end is ours to find)",
    options: { quota: { kind: "fixed-window", requests: 200, windowSeconds: 2, retryAfter: "none" } },
  },
  "quota-sliding-window": {
    about: "sliding window: at most 300 requests in any 10 s (a log of admissions), Retry-After pointing at the oldest one's leaving",
    options: { quota: { kind: "sliding-window", requests: 300, windowSeconds: 10 } },
  },
  "quota-no-retry-after": {
    about: "token bucket 25 req/s, burst 5, whose 429s carry no Retry-After at all",
    options: { quota: { requestsPerSecond: 25, burst: 5, retryAfter: "none" } },
  },
  "quota-date-retry-after": {
    about: "token bucket 60 req/s, burst 6, whose 429s carry Retry-After as an HTTP-date (1 s grain)",
    options: { quota: { requestsPerSecond: 60, burst: 6, retryAfter: "date" } },
  },
  "quota-seconds-floor-retry-after": {
    about: "token bucket 40 req/s, burst 10, whose 429s carry Retry-After in whole seconds cut down (Math.floor): 0 for every next token",
    options: { quota: { requestsPerSecond: 40, burst: 10, retryAfter: "seconds-floor" } },
  },
  "quota-503-bursts": {
    about: "1% of requests start a burst of 4 × 503 with no Retry-After (not about quota); add a quota profile",
    options: { faults: [{ kind: "503", probability: 0.01, burst: 4 }] },
  },
  "quota-503-bursts-retry-after": {
    about: "1% of requests start a burst of 3 × 503 with Retry-After: 1 (not about quota); add a quota profile",
    options: { faults: [{ kind: "503", probability: 0.01, burst: 3, retryAfter: "seconds:1" }] },
  },
  "quota-window-behind-preauth": {
    about: "fixed window of 250 requests per 10 s behind a limit before authentication of 40 req/s, burst 5 (the document names both limits)",
    options: { quota: { kind: "fixed-window", requests: 250, windowSeconds: 10 }, preAuthLimit: { requestsPerSecond: 40, burst: 5 } },
  },
  "quota-preauth": {
    about: "a limit before authentication of 30 req/s, burst 3, in front of whatever workspace quota is given (add a quota profile or flag)",
    options: { preAuthLimit: { requestsPerSecond: 30, burst: 3 } },
  },
  "quota-latency-20ms": {
    about: "every response leaves 20 ± 5 ms after its request arrived (after the quota's decision)",
    options: { latencyMs: 20, latencyJitterMs: 5 },
  },
  "quota-stalls": {
    about: "now and then (every second on average, seeded) the server decides nothing for up to 30 ms, then decides every request that arrived meanwhile at once",
    options: { stall: { everyMs: 1000, ms: 30 } },
  },
  "quota-latency-100ms": {
    about: "every response leaves 100 ± 15 ms after its request arrived, with a 100 req/s bucket of 20",
    options: { latencyMs: 100, latencyJitterMs: 15, quota: { requestsPerSecond: 100, burst: 20 } },
  },
};
