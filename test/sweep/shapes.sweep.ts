/**
 * Sweeps of the quota harness (../scheduler/quota-harness.ts: the real scheduler, a model server, virtual time), for
 * finding the shapes we run far from. Not a test: it asserts nothing and prints what it measured. `npm run sweep`,
 * with SWEEP_SET (matrix, random, windows), SWEEP_SEEDS (matrix and windows; default 1-5), SWEEP_FROM and SWEEP_COUNT
 * (random: which of the seeded shapes), SWEEP_COLD=1 or 3 (the first 60 or 3 requests one at a time, as the CLI's slow or
 * usual start; default none) and SWEEP_OUT
 * (a file for the report). Found this way: sliding logs naming HTTP-dates, waited out a second too long per window.
 */
import { writeFileSync } from "node:fs";
import { test } from "vitest";
import { mulberry32 } from "../../src/simulator/prng.js";
import { QUOTA_MATRIX, type QuotaShape, type RetryAfterForm, runShape } from "../scheduler/quota-harness.js";

const FORMS: RetryAfterForm[] = ["seconds", "seconds", "date", "date-floor", "seconds-floor", "none"];

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)]!;
}

/** Shape `i` of the random sweep: a bucket, fixed window or sliding log, 2-200 req/s, 2-200 ms away, about 30 s of least time. */
function randomShape(i: number): QuotaShape {
  const r = mulberry32(9000 + i);
  const kind = pick(r, ["bucket", "bucket", "bucket", "window", "sliding"] as const);
  const retryAfter = pick(r, FORMS);
  const latencyMs = pick(r, [2, 2, 20, 50, 100, 200]);
  const far = latencyMs > 2 ? { latencyMs, jitterMs: Math.round(latencyMs * 0.15) } : {};
  const perSecond = 2 * 100 ** r();
  if (kind === "bucket") {
    const rate = Math.round(perSecond);
    const burst = Math.max(2, pick(r, [2, 5, 10, Math.round(rate / 4), rate, rate * 2]));
    const drained = r() < 0.2 ? { startTokens: 0 } : {};
    return {
      name: `#${i} bucket ${rate}/s burst ${burst} ${retryAfter} ${latencyMs} ms${drained.startTokens === 0 ? " drained" : ""}`,
      kind,
      rate,
      burst,
      retryAfter,
      requests: rate * 30 + burst,
      ...far,
      ...drained,
    };
  }
  const seconds = pick(r, [1, 2, 5, 10, 30, 60]);
  const allowance = Math.max(2, Math.round(perSecond * seconds));
  const requests = Math.max(allowance * 2, Math.round(perSecond * 30));
  return { name: `#${i} ${kind} ${allowance}/${seconds} s ${retryAfter} ${latencyMs} ms`, kind, rate: allowance, burst: seconds, retryAfter, requests, ...far };
}

/** Fixed windows and sliding logs of 1-5 s, 4-100 per second, in every `Retry-After` form. */
function windowShapes(): QuotaShape[] {
  const shapes: QuotaShape[] = [];
  for (const kind of ["window", "sliding"] as const)
    for (const seconds of [1, 2, 3, 5])
      for (const perSecond of [4, 10, 30, 100])
        for (const retryAfter of ["seconds", "seconds-floor", "date", "date-floor", "none"] as const) {
          const allowance = perSecond * seconds;
          shapes.push({ name: `${kind} ${allowance}/${seconds} s ${retryAfter}`, kind, rate: allowance, burst: seconds, retryAfter, requests: Math.max(2 * allowance, perSecond * 30) });
        }
  return shapes;
}

function numbers(value: string | undefined, fallback: number[]): number[] {
  return value ? value.split(",").map(Number) : fallback;
}

test("quota harness sweep", async () => {
  const set = process.env.SWEEP_SET ?? "matrix";
  const from = Number(process.env.SWEEP_FROM ?? 0);
  const count = Number(process.env.SWEEP_COUNT ?? 100);
  const shapes = set === "random" ? Array.from({ length: count }, (_, k) => randomShape(from + k)) : set === "windows" ? windowShapes() : QUOTA_MATRIX;
  const seeds = set === "random" ? [1] : numbers(process.env.SWEEP_SEEDS, [1, 2, 3, 4, 5]);
  // The CLI's slow start (60 requests one at a time, as against a slow server), its usual one (3: workspace, locations, a list page), or none.
  const coldStart = process.env.SWEEP_COLD === "1" ? { requests: 60, gapMs: 9 } : process.env.SWEEP_COLD === "3" ? { requests: 3, gapMs: 20 } : undefined;
  const lines: string[] = [];
  const logs: number[] = [];
  for (const shape of shapes) {
    const runs: string[] = [];
    for (const seed of seeds) {
      const r = await runShape(shape, { seed, timerLateMs: 2, ...(coldStart ? { coldStart } : {}) });
      logs.push(Math.log(r.ratio));
      runs.push(`${r.ratio.toFixed(3)}x ${r.throttled}/${r.requests} x 429${r.violations ? ` ${r.violations} VIOLATIONS` : ""}`);
    }
    lines.push(`${shape.name.padEnd(56)} ${runs.join("  ")}`);
  }
  lines.push(`geometric mean ${Math.exp(logs.reduce((a, b) => a + b, 0) / logs.length).toFixed(4)} over ${logs.length} runs`);
  const report = `${lines.join("\n")}\n`;
  if (process.env.SWEEP_OUT) writeFileSync(process.env.SWEEP_OUT, report);
  console.log(report);
});
