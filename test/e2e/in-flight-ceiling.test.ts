/**
 * A run held back by its own in-flight ceiling (`--concurrency`), not by the server's quota, says
 * so (src/sync/ceiling-hint.ts): nothing else shows it, since such a run draws no 429 and waits for
 * nothing. The real CLI against the simulator 40 ms away (25 SKUs, about 55 requests): with one request in flight every request
 * waits a round trip for the one before, and the summary, the JSON result and the run's journal name
 * the ceiling; with the default ceiling the same server gets what Little's law asks for, and no note.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";
import { withDb } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_ceiling_8b7a6c5d4e3f2a1b0c9d";
const LATENCY_MS = 40;
let sim: RunningSimulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 21, skus: 25, apiKey: KEY, latencyMs: LATENCY_MS });
  dir = mkdtempSync(join(tmpdir(), "im-ceiling-"));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

function sync(db: string, args: string[]) {
  return runCli(["sync", "--full", "--no-progress", "--log-level", "error", ...args], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
}

function rateJournal(db: string): string[] {
  return withDb(db, (d) => (d.prepare("SELECT message FROM sync_journal WHERE kind = 'rate' ORDER BY id").all() as Array<{ message: string }>).map((r) => r.message));
}

describe("the in-flight ceiling", () => {
  it("one request in flight 40 ms from the server: the summary and the journal say the ceiling held the run, and how fast it allows", async () => {
    const db = join(dir, "one.db");
    const r = await sync(db, ["--concurrency", "1"]);
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    const note = r.stdout.split("\n").find((l) => l.startsWith("  note "));
    expect(note, r.stdout).toMatch(
      /the in-flight ceiling \(concurrency 1\) was full for [\d.]+ s of [\d.]+ s of sending: at a median round trip of \d+ ms, 1 in flight send at most about \d+ req\/s; .*raise --concurrency/,
    );
    // About 40 ms a request (a timer may fire a fraction of a millisecond early), so no more than 25-26 req/s.
    expect(Number(note!.match(/about (\d+) req\/s/)![1])).toBeLessThanOrEqual(26);
    expect(rateJournal(db).filter((m) => m.startsWith("the in-flight ceiling (concurrency 1)"))).toHaveLength(1);
  });

  it("the default ceiling against the same server: the JSON result has no note, and nothing in the journal", async () => {
    const db = join(dir, "default.db");
    const r = await sync(db, ["--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    const result = JSON.parse(r.stdout) as { ceilingHint: string | null; ceilingHeldMs: number; requests: number };
    expect(result.requests).toBeGreaterThan(50);
    // No ceiling note (the count sized before any quota is known may be all taken on a slow machine: the test below).
    expect(result.ceilingHint ?? "").not.toMatch(/in-flight ceiling/);
    expect(rateJournal(db).filter((m) => m.includes("in-flight ceiling"))).toEqual([]);
  });

  it("one request in flight, --json: the result carries the note and the time the ceiling was full, every request's round trip", async () => {
    const db = join(dir, "one-json.db");
    const r = await sync(db, ["--json", "--concurrency", "1"]);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as { ceilingHint: string | null; ceilingHeldMs: number; durationMs: number; requests: number };
    expect(result.ceilingHint).toMatch(/^the in-flight ceiling \(concurrency 1\)/);
    // One at a time, each in flight for at least the server's latency: the ceiling was full for all of those
    // (less 2 ms each: a Node timer may fire a fraction of a millisecond early against performance.now()).
    expect(result.ceilingHeldMs).toBeGreaterThanOrEqual(result.requests * (LATENCY_MS - 2));
    expect(result.ceilingHeldMs).toBeLessThanOrEqual(result.durationMs);
  });
});

describe("the in-flight count sized before any quota is known", () => {
  // No quota at all, 40 ms away, 300 SKUs (about 650 requests): no 429 ever sets a rate, so the scheduler
  // keeps the count it sizes for 200 req/s (200 × 0.04 s + 2 = 10 in flight) and the work waits behind it.
  let far: RunningSimulator;
  beforeAll(async () => {
    far = await startSimulator({ seed: 22, skus: 300, apiKey: KEY, latencyMs: LATENCY_MS });
  });
  afterAll(async () => {
    await far?.close();
  });
  const syncFar = (db: string, args: string[]) =>
    runCli(["sync", "--full", "--no-progress", "--log-level", "error", "--json", ...args], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: far.baseUrl, INVENTORY_DB: db } });

  it("no 429 and that count all taken: the result and the journal say so and name --max-rps; with --max-rps the count is sized for it and nothing is said", async () => {
    const db = join(dir, "unpaced.db");
    const r = await syncFar(db, []);
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(db, far.groundTruth())).toEqual([]);
    const result = JSON.parse(r.stdout) as { ceilingHint: string | null; responses429: number; requests: number; unpacedHeldMs: number; durationMs: number };
    expect(result.responses429).toBe(0);
    expect(result.unpacedHeldMs).toBeGreaterThan(0);
    expect(result.unpacedHeldMs).toBeLessThanOrEqual(result.durationMs);
    expect(result.ceilingHint).toMatch(
      /^no request was refused, and the \d+ requests in flight sized for a quota of 200 req\/s \(none named, none met\) were all taken for [\d.]+ s of [\d.]+ s of sending.*--max-rps N/,
    );
    expect(rateJournal(db).filter((m) => m.startsWith("no request was refused"))).toHaveLength(1);
    // Told the rate, the scheduler sizes the count for it: not held by the sizing for 200 req/s.
    const told = join(dir, "unpaced-told.db");
    const t = await syncFar(told, ["--max-rps", "1000"]);
    expect(t.code, t.stderr).toBe(0);
    expect(diffAgainstTruth(told, far.groundTruth())).toEqual([]);
    const toldResult = JSON.parse(t.stdout) as { ceilingHint: string | null; unpacedHeldMs: number };
    expect(toldResult.ceilingHint ?? "").not.toMatch(/sized for a quota/);
    expect(toldResult.unpacedHeldMs).toBe(0);
  });
});
