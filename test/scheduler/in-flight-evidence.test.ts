import { describe, expect, it } from "vitest";
import { InFlightEvidence } from "../../src/scheduler/in-flight-evidence.js";

/** `n` passes sent with `k` others awaiting. */
function pass(e: InFlightEvidence, k: number, n: number): void {
  for (let i = 0; i < n; i++) e.passed(k);
}

describe("InFlightEvidence", () => {
  it("finds a limit of 4 when every refusal went with 4 or more awaiting and 10 passes went with 3", () => {
    const e = new InFlightEvidence();
    pass(e, 0, 30);
    pass(e, 1, 30);
    pass(e, 2, 20);
    expect(e.refused(4)).toBeNull();
    expect(e.refused(5)).toBeNull();
    pass(e, 3, 9);
    expect(e.refused(4)).toBeNull();
    expect(e.limit).toBeNull();
    // The tenth pass at 3 completes it: three refusals at 4 and above, no pass there.
    expect(e.passed(3)).toBe("found");
    expect(e.limit).toBe(4);
  });

  it("takes no limit where passes at the refusals' level outnumber them (a token bucket's 429s at the rate's usual in flight)", () => {
    const e = new InFlightEvidence();
    for (let i = 0; i < 200; i++) e.passed(i % 6);
    expect(e.refused(4)).toBeNull();
    expect(e.refused(4)).toBeNull();
    expect(e.refused(5)).toBeNull();
    expect(e.passed(3)).toBeNull();
    expect(e.limit).toBeNull();
  });

  it("takes no limit from a refusal with one or none awaiting (a limit of 1 is a bucket of one token's reading)", () => {
    const e = new InFlightEvidence();
    pass(e, 0, 50);
    for (let i = 0; i < 5; i++) expect(e.refused(1)).toBeNull();
    expect(e.passed(0)).toBeNull();
    expect(e.limit).toBeNull();
  });

  it("does not find while told it may not (a ramp), and finds at the next pass below once it may", () => {
    const e = new InFlightEvidence();
    pass(e, 2, 15);
    for (let i = 0; i < 3; i++) expect(e.refused(3, false)).toBeNull();
    expect(e.passed(2, false)).toBeNull();
    expect(e.limit).toBeNull();
    expect(e.passed(2)).toBe("found");
    expect(e.limit).toBe(3);
  });

  it("is not refuted by a refusal of a request sent before the limit was found (it went without it)", () => {
    const e = new InFlightEvidence();
    pass(e, 2, 15);
    for (let i = 0; i < 3; i++) e.refused(3);
    expect(e.refused(3, true, false)).toBeNull();
    expect(e.limit).toBe(3);
  });

  it("is refuted by a refusal under the limit in force, for the rest of the run", () => {
    const e = new InFlightEvidence();
    pass(e, 2, 15);
    for (let i = 0; i < 3; i++) e.refused(3);
    expect(e.limit).toBe(3);
    expect(e.refused(1)).toBe("refuted");
    expect(e.limit).toBeNull();
    pass(e, 2, 50);
    expect(e.refused(3)).toBeNull();
    expect(e.limit).toBeNull();
  });
});
