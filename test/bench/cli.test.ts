/**
 * `npm run bench`'s command line: a mistake prints what is wrong and the usage and exits 2, before
 * any simulator starts (no stack trace, no half-run bench); --help prints the usage and exits 0.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const RUN = fileURLToPath(new URL("../../dist/bench/run.js", import.meta.url));
const bench = (...args: string[]) => spawnSync(process.execPath, [RUN, ...args], { encoding: "utf8", timeout: 30_000 });

describe("the bench's command line", () => {
  for (const [args, says] of [
    [["--reps", "abc"], '--reps must be a whole number of runs, 1 or more, got "abc"'],
    [["--reps", "0"], '--reps must be a whole number of runs, 1 or more, got "0"'],
    [["--only", "x"], '--only takes scenario numbers from 1 to 6, separated by commas, got "x"'],
    [["--only", "1,9"], '--only takes scenario numbers from 1 to 6, separated by commas, got "1,9"'],
    [["quota", "--scale", "50"], '--scale must be a number from 1 to 20 (times each quota cell\'s SKUs), got "50"'],
    [["quota", "--cell", "no-such-cell"], 'unknown quota cell "no-such-cell"'],
    [["--no-such-option"], "Unknown option '--no-such-option'"],
  ] as const) {
    it(`${args.join(" ")}: says what is wrong, prints the usage, exits 2`, () => {
      const r = bench(...args);
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(says);
      expect(r.stderr).toContain("Usage: npm run bench");
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.stdout).toBe("");
    });
  }

  it("--help prints the usage and exits 0", () => {
    const r = bench("--help");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("Usage: npm run bench");
  });
});
