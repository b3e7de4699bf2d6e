/**
 * The backoff of failures that name no wait (503s without Retry-After, network errors, timeouts).
 */
import { describe, expect, it } from "vitest";
import { DEFAULTS } from "../../src/core/defaults.js";
import { backoffMs } from "../../src/scheduler/retry-policy.js";

describe("backoffMs (equal jitter)", () => {
  it("each wait lies between half its ceiling and the ceiling, min(cap, base·2^attempt)", () => {
    expect(backoffMs(1, 100, 30_000, () => 0)).toBe(100);
    expect(backoffMs(1, 100, 30_000, () => 0.999_999)).toBe(200);
    expect(backoffMs(3, 100, 30_000, () => 0.5)).toBe(600);
    expect(backoffMs(20, 100, 30_000, () => 0)).toBe(15_000);
    expect(backoffMs(20, 100, 30_000, () => 0.999_999)).toBe(30_000);
  });

  it("with the defaults, a request's retries span at least 6.3 s whatever the draw: an outage shorter than that never fails it", () => {
    let least = 0;
    for (let attempt = 1; attempt <= DEFAULTS.maxRetries; attempt++) least += backoffMs(attempt, DEFAULTS.backoffBaseMs, DEFAULTS.backoffCapMs, () => 0);
    expect(least).toBe(6_300);
  });
});
