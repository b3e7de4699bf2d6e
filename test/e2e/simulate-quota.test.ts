/**
 * The simulator's quota flags, the real command as a child process.
 * `--quota-start-tokens N`: a token bucket that another client (or the run before) has just emptied
 * refuses the first request that comes, however long after the simulator started; a level outside
 * 0..burst, or the flag without a token bucket, is a configuration error (exit 2) that says which.
 * `--quota-sliding N/S`: at most N requests in any S seconds, a refusal naming when the oldest
 * admission leaves the log; two quotas at once, or a malformed N/S, are configuration errors.
 * `--preauth-rps N`: a limit before authentication, ahead of the key check, in its own Retry-After form.
 * `--stall-ms MS [--stall-every-ms MS]`: the server's own stalls; requests arriving in one are held to its end.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { runCli, spawnCli } from "../helpers/cli.js";
import { waitFor } from "../helpers/wait-for.js";

const KEY = "sim_e2e_quota_flags_5f4e3d2c1b0a99887766";
let child: ChildProcess | null = null;

afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child!.once("exit", r));
    process.kill(child.pid!, "SIGTERM");
    await exited;
  }
  child = null;
});

/** `simulate ARGS` as a child process with this file's key; its base URL once it listens (stopped in afterEach). */
async function startSimulate(args: string[]): Promise<string> {
  child = spawnCli(["simulate", ...args], { env: { INVENTORY_API_KEY: KEY } });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  return waitFor(
    () => /base URL\s+(http:\S+)/.exec(out)?.[1],
    () => `the simulator's base URL in: ${out}`,
  );
}

describe("simulate --quota-start-tokens", () => {
  it("0: the first API request is refused (429 with Retry-After), and once the bucket refills requests pass again", async () => {
    const base = await startSimulate(["--port", "0", "--skus", "3", "--quota-rps", "40", "--quota-burst", "10", "--quota-start-tokens", "0"]);
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

describe("simulate --quota-sliding", () => {
  it("3/600: three requests pass, the fourth is refused with a Retry-After of the oldest admission's leaving (600 s at most)", async () => {
    const base = await startSimulate(["--port", "0", "--skus", "3", "--quota-sliding", "3/600"]);
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 4; i++) {
      const r = await fetch(`${base}/v1/external/workspace`, { headers: { authorization: `Bearer ${KEY}` } });
      await r.text();
      statuses.push(r.status);
      retryAfter = r.headers.get("retry-after");
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(Number(retryAfter)).toBeGreaterThan(590);
    expect(Number(retryAfter)).toBeLessThanOrEqual(600);
  });

  it("with another quota, or a malformed N/S, is a configuration error saying which", async () => {
    const two = await runCli(["simulate", "--port", "0", "--quota-sliding", "3/10", "--quota-window", "3/10"]);
    expect(two.code).toBe(2);
    expect(two.stderr).toMatch(/--quota-window and --quota-sliding are 2 quotas: give one/);
    const bad = await runCli(["simulate", "--port", "0", "--quota-sliding", "3 per 10"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--quota-sliding: expected N\/S \(requests per window of seconds\), got "3 per 10"/);
  });
});

describe("simulate --preauth-rps", () => {
  it("a limit before authentication: once spent, even a request with a wrong key is refused 429 (not 401), in the form --preauth-retry-after names", async () => {
    const base = await startSimulate(["--port", "0", "--skus", "3", "--preauth-rps", "0.02", "--preauth-burst", "2", "--preauth-retry-after", "date"]);
    const get = async (key: string) => {
      const r = await fetch(`${base}/v1/external/workspace`, { headers: { authorization: `Bearer ${key}` } });
      await r.text();
      return r;
    };
    expect((await get("wrong")).status).toBe(401);
    expect((await get(KEY)).status).toBe(200);
    const refused = await get("wrong");
    expect(refused.status).toBe(429);
    // 0.02 req/s: the next token is 50 s away, named as an HTTP-date.
    expect(Date.parse(refused.headers.get("retry-after") ?? "")).toBeGreaterThan(Date.now() + 30_000);
    expect((await get(KEY)).status).toBe(429);
  });

  it("its burst or Retry-After form without it, or a form it does not know, is a configuration error saying which", async () => {
    const alone = await runCli(["simulate", "--port", "0", "--preauth-burst", "3"]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/--preauth-burst needs --preauth-rps/);
    const form = await runCli(["simulate", "--port", "0", "--preauth-rps", "5", "--preauth-retry-after", "later"]);
    expect(form.code).toBe(2);
    expect(form.stderr).toMatch(/--preauth-retry-after: expected seconds, seconds-floor, seconds-round, date, date-floor, date-iso, none, got "later"/);
  });
});

describe("simulate --max-in-flight", () => {
  it("N = 1: of two requests sent together, one is served and the other refused 429 naming 1 s, whatever the rate", async () => {
    // Each answer 1.5 s late, after the decision: the first request decided holds the one place all that while.
    const base = await startSimulate(["--port", "0", "--skus", "3", "--max-in-flight", "1", "--latency-ms", "1500"]);
    const get = async () => {
      const r = await fetch(`${base}/v1/external/workspace`, { headers: { authorization: `Bearer ${KEY}` } });
      await r.text();
      return r;
    };
    const both = await Promise.all([get(), get()]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 429]);
    expect(both.find((r) => r.status === 429)!.headers.get("retry-after")).toBe("1");
  });

  it("0 is a configuration error saying so", async () => {
    const zero = await runCli(["simulate", "--port", "0", "--max-in-flight", "0"]);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/--max-in-flight: expected a whole number >= 1, got "0"/);
  });
});

describe("simulate --stall-ms", () => {
  // Stalls of up to 40 ms (30 ms: the profile's) every 20 ms on average: about half of the time is a stall.
  it.each([
    ["--stall-ms", "40", "--stall-every-ms", "20"],
    ["--profile", "quota-stalls", "--stall-every-ms", "20"],
  ])("%s %s %s %s: requests arriving in the server's own stalls are held and then answered, and the stats count them", async (...flags) => {
    const base = await startSimulate(["--port", "0", "--skus", "3", ...flags]);
    const auth = { authorization: `Bearer ${KEY}` };
    const statsNow = async () => (await (await fetch(`${base}/_sim/stats`, { headers: auth })).json()) as { stalled: number; accepted: number; requests: number };
    const stats = await waitFor(
      async () => {
        const r = await fetch(`${base}/v1/external/workspace`, { headers: auth });
        expect(r.status).toBe(200);
        await r.text();
        const s = await statsNow();
        return s.stalled > 0 ? s : undefined;
      },
      () => "a request held in a stall",
    );
    expect(stats.accepted).toBe(stats.requests);
  });

  it("--stall-every-ms without --stall-ms, or a length that is not a whole number, is a configuration error saying which", async () => {
    const alone = await runCli(["simulate", "--port", "0", "--stall-every-ms", "500"]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/--stall-every-ms needs --stall-ms \(or the quota-stalls profile\)/);
    const bad = await runCli(["simulate", "--port", "0", "--stall-ms", "soon"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--stall-ms: expected a whole number >= 0, got "soon"/);
    const zero = await runCli(["simulate", "--port", "0", "--stall-ms", "30", "--stall-every-ms", "0"]);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/--stall-every-ms: expected a whole number >= 1, got "0"/);
  });
});

describe("simulate --clock-skew-ms", () => {
  it("-30000 (written as the next argument, a number below 0): the Date header and a quota's Retry-After date read 30 s behind the machine's clock", async () => {
    const base = await startSimulate(["--port", "0", "--skus", "3", "--quota-rps", "1", "--quota-burst", "1", "--quota-retry-after", "date", "--clock-skew-ms", "-30000"]);
    const get = () => fetch(`${base}/v1/external/workspace`, { headers: { authorization: `Bearer ${KEY}` } });
    const before = Date.now();
    const first = await get();
    await first.text();
    const second = await get();
    await second.text();
    const after = Date.now();
    expect(first.status).toBe(200);
    expect(second.status).toBe(429);
    // Whole seconds: the stamp lies within the server's second of the request, 30 s behind ours.
    const stamped = Date.parse(second.headers.get("date")!);
    expect(stamped).toBeGreaterThanOrEqual(Math.floor((before - 30_000) / 1000) * 1000);
    expect(stamped).toBeLessThanOrEqual(after - 30_000);
    // The refusal names the next token, at most a second away on the server's clock (rounded up to its second).
    const named = Date.parse(second.headers.get("retry-after")!);
    expect(named).toBeGreaterThanOrEqual(before - 30_000);
    expect(named).toBeLessThanOrEqual(after - 30_000 + 2_000);
  });

  it("a value that is not a whole number of ms is a configuration error saying which", async () => {
    const bad = await runCli(["simulate", "--port", "0", "--clock-skew-ms", "-3.5"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--clock-skew-ms: expected a whole number of ms \(negative: behind\), got "-3.5"/);
  });
});
