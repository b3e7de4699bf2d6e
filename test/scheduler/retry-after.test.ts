import { describe, expect, it } from "vitest";
import { retryAfterIsHttpDate, retryAfterMs, retryAfterNamesNoWait } from "../../src/scheduler/retry-after.js";

describe("retryAfterMs", () => {
  const now = Date.UTC(2026, 10, 25, 6, 0, 0, 300);
  it("waits for an HTTP-date ahead exactly, even under the floor: it names the moment itself", () => {
    expect(retryAfterMs("Wed, 25 Nov 2026 06:00:01 GMT", now, 1_000)).toBe(700);
    expect(retryAfterMs("Wed, 25 Nov 2026 06:00:05 GMT", now, 1_000)).toBe(4_700);
  });
  it("a date now or past, 0 and garbage get the floor: never a hot retry loop", () => {
    expect(retryAfterMs("Wed, 25 Nov 2026 06:00:00 GMT", now, 1_000)).toBe(1_000);
    expect(retryAfterMs("Thu, 01 Jan 1970 00:00:00 GMT", now, 1_000)).toBe(1_000);
    expect(retryAfterMs("0", now, 1_000)).toBe(1_000);
    expect(retryAfterMs("soon", now, 1_000)).toBe(1_000);
  });
  it("delta-seconds keep the floor and the form's whole seconds; none names nothing", () => {
    expect(retryAfterMs("2", now, 1_000)).toBe(2_000);
    expect(retryAfterMs(null, now, 1_000)).toBeNull();
  });
  it("the RFC's obsolete date forms: RFC 850 and asctime, the latter GMT whatever the machine's zone", () => {
    const zone = process.env.TZ;
    process.env.TZ = "Asia/Tokyo"; // Node applies a changed TZ at once; a zoneless date read as local time would be 9 h off
    try {
      expect(retryAfterMs("Wednesday, 25-Nov-26 06:00:05 GMT", now, 1_000)).toBe(4_700);
      expect(retryAfterMs("Wed Nov 25 06:00:05 2026", now, 1_000)).toBe(4_700);
      expect(retryAfterMs("Thu Nov  5 06:00:05 2026", Date.UTC(2026, 10, 5, 6, 0, 0, 300), 1_000)).toBe(4_700);
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });
  it("an ISO 8601 moment with its zone, outside the RFC, is waited for exactly; without a zone it is garbage", () => {
    expect(retryAfterMs("2026-11-25T06:00:01.000Z", now, 1_000)).toBe(700);
    expect(retryAfterMs("2026-11-25T06:00:00.325Z", now, 1_000)).toBe(25);
    expect(retryAfterMs("2026-11-25T07:00:05+01:00", now, 1_000)).toBe(4_700);
    expect(retryAfterMs("2026-11-25T06:00:05", now, 1_000)).toBe(1_000);
    expect(retryAfterNamesNoWait("2026-11-25T06:00:00.300Z", now)).toBe(true);
    expect(retryAfterNamesNoWait("2026-11-25T06:00:00.301Z", now)).toBe(false);
  });
  it("decimal seconds, outside the RFC's form, are waited for exactly as named: 2.5 is not the 1 s floor, nor is 0.4 raised to it; 0.0 is 0 and gets the floor", () => {
    expect(retryAfterMs("2.5", now, 1_000)).toBe(2_500);
    expect(retryAfterMs(" 1.25 ", now, 0)).toBe(1_250);
    expect(retryAfterMs("0.4", now, 1_000)).toBe(400);
    expect(retryAfterMs("0.0", now, 1_000)).toBe(1_000);
    expect(retryAfterMs("0.4", now, 0)).toBe(400);
    expect(retryAfterMs("1.", now, 1_000)).toBe(1_000);
  });
});

describe("retryAfterNamesNoWait", () => {
  const now = Date.UTC(2026, 10, 25, 6, 0, 0, 300);
  it("zero seconds and a date not ahead name no wait (a server that cuts its wait down says so for any wait under its grain)", () => {
    expect(retryAfterNamesNoWait("0", now)).toBe(true);
    expect(retryAfterNamesNoWait(" 00 ", now)).toBe(true);
    expect(retryAfterNamesNoWait("0.0", now)).toBe(true);
    expect(retryAfterNamesNoWait("Wed, 25 Nov 2026 06:00:00 GMT", now)).toBe(true);
    expect(retryAfterNamesNoWait("Wed Nov 25 05:59:59 2026", now)).toBe(true);
  });
  it("a wait ahead, garbage, an empty value or none is not 'no wait'", () => {
    expect(retryAfterNamesNoWait("1", now)).toBe(false);
    expect(retryAfterNamesNoWait("0.4", now)).toBe(false);
    expect(retryAfterNamesNoWait("Wed, 25 Nov 2026 06:00:01 GMT", now)).toBe(false);
    expect(retryAfterNamesNoWait("soon", now)).toBe(false);
    expect(retryAfterNamesNoWait("Mon, 99 Foo 2026 25:61:61 GMT", now)).toBe(false);
    expect(retryAfterNamesNoWait("", now)).toBe(false);
    expect(retryAfterNamesNoWait("-1", now)).toBe(false);
    expect(retryAfterNamesNoWait(null, now)).toBe(false);
  });
});

describe("retryAfterIsHttpDate", () => {
  it("is true for the RFC's date forms (whole seconds), false for delta-seconds, ISO 8601 moments, garbage and none", () => {
    expect(retryAfterIsHttpDate("Wed, 25 Nov 2026 06:00:01 GMT")).toBe(true);
    expect(retryAfterIsHttpDate("Wednesday, 25-Nov-26 06:00:01 GMT")).toBe(true);
    expect(retryAfterIsHttpDate("Wed Nov 25 06:00:01 2026")).toBe(true);
    expect(retryAfterIsHttpDate("2")).toBe(false);
    expect(retryAfterIsHttpDate("2026-11-25T06:00:01.250Z")).toBe(false);
    expect(retryAfterIsHttpDate("Wed, 99 Foo 2026 99:99:99 GMT")).toBe(false);
    expect(retryAfterIsHttpDate(null)).toBe(false);
  });
});
