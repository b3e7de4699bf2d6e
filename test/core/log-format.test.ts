/**
 * Log lines on a terminal: the formatter (one pino JSON line -> one human line), the live
 * line that log lines are printed above, and createLogger choosing the format by whether
 * its destination is a terminal. A tiny terminal model (helpers/terminal.ts `render`) turns
 * what was written into the lines a person would see.
 */
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { formatLogLine } from "../../src/core/log-format.js";
import { createLogger } from "../../src/core/logger.js";
import { LiveLine } from "../../src/core/terminal.js";
import { Secret } from "../../src/core/secret.js";
import { render } from "../helpers/terminal.js";

const KEY = "imk_test_9a8b7c6d5e4f30211f2e3d4c5b6a7988";
const T = new Date(2026, 0, 2, 14, 3, 7, 412).getTime();
const plain = { colour: false };

/** A writable that keeps what it was given, looking like a terminal or not. */
function sink(isTTY: boolean): Writable & { isTTY: boolean; text: () => string } {
  const chunks: string[] = [];
  const w = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(String(chunk));
      cb();
    },
  }) as Writable & { isTTY: boolean; text: () => string };
  w.isTTY = isTTY;
  w.text = () => chunks.join("");
  return w;
}

describe("formatLogLine", () => {
  it("gives local time, level, message, then the other fields as key=value, without pid or hostname", () => {
    const line = formatLogLine(JSON.stringify({ level: 40, time: T, pid: 123, hostname: "h", msg: "SKU failed", skuId: "0b6c4a52-7d3e-4f1a-9c2b-1e5d8f7a6b3c", status: 503, plan: { new: 2 } }), plain);
    expect(line).toBe('14:03:07.412 WARN  SKU failed  skuId=0b6c4a52-7d3e-4f1a-9c2b-1e5d8f7a6b3c status=503 plan={"new":2}\n');
  });

  it("shows an error as its type and message, and quotes a value with spaces", () => {
    const line = formatLogLine(
      JSON.stringify({ level: 50, time: T, msg: "run failed", err: { type: "ApiError", message: "list: HTTP 500", stack: "ApiError: ...\n at x" }, note: "two words" }),
      plain,
    );
    expect(line).toBe('14:03:07.412 ERROR run failed  err="ApiError: list: HTTP 500" note="two words"\n');
  });

  it("keeps server text from driving the terminal or forging a line: control characters visible, line breaks as \\n", () => {
    const line = formatLogLine(JSON.stringify({ level: 30, time: T, msg: "name \x1b]0;owned\x07 here\n14:00:00.000 ERROR forged", name: "a\rb" }), plain);
    expect(line.split("\n")).toEqual([expect.any(String), ""]);
    expect(line).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f]/);
    expect(line).toContain("\\x1b]0;owned\\x07 here\\n14:00:00.000 ERROR forged");
  });

  it("colours only the level and the fields when asked", () => {
    const line = formatLogLine(JSON.stringify({ level: 50, time: T, msg: "boom", a: 1 }), { colour: true });
    expect(line).toBe("14:03:07.412 \x1b[31mERROR\x1b[0m boom  \x1b[2ma=1\x1b[0m\n");
  });

  it("passes a line that is not JSON through, made safe", () => {
    expect(formatLogLine("not json \x1b[2J\n", plain)).toBe("not json \\x1b[2J\n");
  });
});

describe("LiveLine", () => {
  it("prints lines above the live line instead of through it, and redraws it below them", () => {
    const out = sink(true);
    const live = new LiveLine(out);
    live.show("SKUs 3/40 · 12 req/s");
    live.print("14:03:07.412 INFO  list page saved\n");
    live.show("SKUs 4/40 · 12 req/s");
    live.print("14:03:07.500 WARN  SKU failed\n14:03:07.501 INFO  retried\n");
    expect(render(out.text())).toEqual(["14:03:07.412 INFO  list page saved", "14:03:07.500 WARN  SKU failed", "14:03:07.501 INFO  retried", "SKUs 4/40 · 12 req/s"]);
    live.end();
    live.print("after\n");
    expect(render(out.text())).toEqual(["14:03:07.412 INFO  list page saved", "14:03:07.500 WARN  SKU failed", "14:03:07.501 INFO  retried", "SKUs 4/40 · 12 req/s", "after", ""]);
  });
});

describe("createLogger", () => {
  it("on a terminal: human-readable lines, the key still redacted", () => {
    const out = sink(true);
    const logger = createLogger("info", out);
    logger.warn({ endpoint: "detail", apiKey: new Secret(KEY), note: `echo Bearer ${KEY}` }, "something odd");
    const text = out.text();
    expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} (\x1b\[\d+m)?WARN (\x1b\[0m)? something odd {2}/);
    expect(text).toContain("endpoint=detail");
    expect(text).not.toContain(KEY);
    expect(text).not.toContain('{"level"');
  });

  it("not on a terminal: JSON lines, as before", () => {
    const out = sink(false);
    createLogger("info", out).info({ runId: 1 }, "sync started");
    const lines = out.text().trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 30, msg: "sync started", runId: 1, pid: process.pid });
  });
});
