/**
 * `inventory-mirror simulate --quota-start-tokens N`, the real command as a child process: a token
 * bucket that another client (or the run before) has just emptied refuses the first request that
 * comes, however long after the simulator started; a level outside 0..burst, or the flag without a
 * token bucket, is a configuration error (exit 2) that says which.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { runCli, spawnCli } from "../helpers/cli.js";
import { waitFor } from "../helpers/wait-for.js";

const KEY = "sim_e2e_start_tokens_5f4e3d2c1b0a99887766";
let child: ChildProcess | null = null;

afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child!.once("exit", r));
    process.kill(child.pid!, "SIGTERM");
    await exited;
  }
  child = null;
});

describe("simulate --quota-start-tokens", () => {
  it("0: the first API request is refused (429 with Retry-After), and once the bucket refills requests pass again", async () => {
    child = spawnCli(["simulate", "--port", "0", "--skus", "3", "--quota-rps", "40", "--quota-burst", "10", "--quota-start-tokens", "0"], { env: { INVENTORY_API_KEY: KEY } });
    let out = "";
    child.stdout!.on("data", (d) => (out += d));
    const base = await waitFor(
      () => /base URL\s+(http:\S+)/.exec(out)?.[1],
      () => `the simulator's base URL in: ${out}`,
    );
    const get = () => fetch(`${base}/v1/external/workspace`, { headers: { authorization: `Bearer ${KEY}` } });
    const first = await get();
    await first.text();
    expect(first.status).toBe(429);
    expect(first.headers.get("retry-after")).toBe("1");
    // A full bucket again once its refill allows (10 tokens at 40/s): waited for, not slept.
    const admitted = await waitFor(
      async () => {
        const r = await get();
        await r.text();
        return r.status === 200;
      },
      () => "a request admitted after the bucket refilled",
    );
    expect(admitted).toBe(true);
  });

  it("a level above the burst, or the flag without a token bucket, is a configuration error saying which", async () => {
    const above = await runCli(["simulate", "--port", "0", "--quota-rps", "40", "--quota-burst", "10", "--quota-start-tokens", "11"]);
    expect(above.code).toBe(2);
    expect(above.stderr).toMatch(/--quota-start-tokens: expected a number from 0 to the burst, got "11"/);
    const alone = await runCli(["simulate", "--port", "0", "--quota-start-tokens", "0"]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/--quota-start-tokens needs a token bucket \(--quota-rps\)/);
  });
});
