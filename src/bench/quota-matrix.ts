/**
 * Scenario 1 of `npm run bench`: the quota matrix (issue 10 §2). Each cell is a quota shape
 * the API document allows; for each, a fresh `inventory-mirror simulate` process (the real
 * command, its own flags) serves a workspace, the real CLI runs `sync --full` against it,
 * and the mirror is compared with the simulator's ground truth (truth.ts).
 *
 * Figures per cell, all read from the simulator's own counters (/_sim/stats) except wall:
 * - requests: every API request; accepted: the ones the quota admitted (a fault 503 spent
 *   the quota, so it is accepted); 429 %: 429s of the quota and of the limit before authentication ÷ requests; 503s: fault 503s;
 *   violations: requests that came back before a Retry-After deadline (the ledger, quota.ts).
 * - wall: from the arrival of the CLI's first request at the simulator to the CLI process's
 *   exit (both epoch ms on this machine's clock). Node's start-up and the opening of the
 *   database before the first request are left out (no quota governs them); the CLI's own
 *   work after its last response (final commit, close) is in. The process wall (spawn to
 *   exit) is reported beside it.
 * - least: the least time the quota allows for the accepted requests, from the first one:
 *   token bucket (accepted − burst) ÷ rate (less what it held at the first request, when a cell
 *   starts it part empty); fixed window (windows the accepted requests
 *   need − 1) × window − how far into its window the first request came (the bench sets the
 *   quota afresh just before the sync, so that offset is the CLI's start-up, ~0.3 s).
 *   sliding window: (windows the accepted requests need − 1) × window, from the first request.
 *   Behind a limit before authentication too (a cell's `preAuth`): the longer of the quota's least
 *   time and the limit's own for the requests it let through (each limit alone bounds the time).
 *   Latency is not in `least`: a cell behind latency also pays at least one round trip.
 * - ratio = wall ÷ least. Targets: ≤ 1.10 every cell, ≤ 1.05 median, 429s < 2 %, 0 violations.
 * - steady: what the quota admitted over the middle half of the run (its second quarter to its
 *   third, whole seconds) ÷ what a token bucket's rate allows over that time. The ratio above
 *   includes the fixed cost of finding the quota (the first 429s and the ramp, a few seconds
 *   whatever the run's length); this column is the rate the scheduler then holds, which is
 *   what a long backfill runs at. Not given for a fixed window (per-second counts of a window's
 *   allowance say nothing by themselves).
 * - known (`--known-rate`): the same cell run again with `--max-rps` set to the quota's rate (the
 *   slower of the quota and a limit before authentication), as a client that was told the rate
 *   would run: the cell's ratio without the cost of finding the quota, so that what is left is the
 *   server's own (Retry-After waits the rule makes every worker sit out, a bucket of one token that
 *   jitter on the way keeps from being sent at its rate). Token buckets only: sent evenly, a window's
 *   allowance would go out over the window, not at its opening, and its ratio would not be a floor.
 */
import { join } from "node:path";
import type { GroundTruth, QuotaOptions } from "../simulator/index.js";
import { type Simulator, startSimulator, syncCli } from "./proc.js";
import { compareWithTruth } from "./truth.js";

export interface QuotaCell {
  name: string;
  about: string;
  skus: number;
  seed: number;
  quota: QuotaOptions;
  /** More `simulate` flags: latency, faults. */
  args?: string[];
  /** A limit before authentication in front of the quota (`simulate --preauth-rps`), set afresh with the quota. */
  preAuth?: { requestsPerSecond: number; burst: number };
  /**
   * A limit on requests in flight (`simulate --max-in-flight`): at most `max` being answered at once, each for
   * `servedMs` on average (the cell's latency, spent after the decision): its least time is the accepted requests
   * × servedMs ÷ max.
   */
  inFlight?: { max: number; servedMs: number };
}

/**
 * Sized so the least time is 20–40 s per cell (about 2.05 requests per SKU in a full sync:
 * detail + history pages + list pages). Values deliberately differ from the simulator's
 * named quota profiles (src/simulator/quota-profiles.ts).
 */
export const QUOTA_CELLS: QuotaCell[] = [
  { name: "bucket-2-burst-2", about: "token bucket 2 req/s, burst 2", skus: 25, seed: 111, quota: { requestsPerSecond: 2, burst: 2 } },
  { name: "bucket-5-no-burst", about: "token bucket 5 req/s, no burst (1)", skus: 60, seed: 112, quota: { requestsPerSecond: 5, burst: 1 } },
  { name: "bucket-100-no-burst", about: "token bucket 100 req/s, no burst (1)", skus: 1000, seed: 122, quota: { requestsPerSecond: 100, burst: 1 } },
  { name: "bucket-40-burst-10", about: "token bucket 40 req/s, burst 10, Retry-After whole seconds", skus: 600, seed: 113, quota: { requestsPerSecond: 40, burst: 10 } },
  {
    name: "bucket-40-burst-10-drained",
    about: "token bucket 40 req/s, burst 10, empty when the sync's first request comes (another client, or the run before, just used it)",
    skus: 600,
    seed: 124,
    quota: { requestsPerSecond: 40, burst: 10, startTokens: 0 },
  },
  {
    name: "bucket-100-burst-20-partly-used",
    about: "token bucket 100 req/s, burst 20, with 5 tokens left when the sync's first request comes (another client used the rest): the first requests' passes understate the capacity",
    skus: 1000,
    seed: 135,
    quota: { requestsPerSecond: 100, burst: 20, startTokens: 5 },
  },
  { name: "bucket-150-burst-150", about: "token bucket 150 req/s, burst = rate", skus: 1500, seed: 114, quota: { requestsPerSecond: 150, burst: 150 } },
  { name: "bucket-200-burst-20", about: "token bucket 200 req/s, burst 20", skus: 2000, seed: 115, quota: { requestsPerSecond: 200, burst: 20 } },
  {
    name: "bucket-200-burst-5",
    about: "token bucket 200 req/s, burst 5 (25 ms of its rate: a stall of either process that bunches a few requests spends it)",
    skus: 2000,
    seed: 136,
    quota: { requestsPerSecond: 200, burst: 5 },
  },
  {
    name: "bucket-200-burst-5-server-stalls",
    about: "token bucket 200 req/s, burst 5, the server stalling up to 30 ms about every second (simulate --stall-ms): what arrived in a stall is decided at once at its end",
    skus: 2000,
    seed: 138,
    quota: { requestsPerSecond: 200, burst: 5 },
    args: ["--stall-ms", "30", "--stall-every-ms", "1000"],
  },
  {
    name: "bucket-100-burst-2",
    about: "token bucket 100 req/s, burst 2 (the first requests' wave after the list page passes one, as a bucket of one token's does)",
    skus: 1000,
    seed: 137,
    quota: { requestsPerSecond: 100, burst: 2 },
  },
  { name: "window-300-per-10s", about: "fixed window 300 requests / 10 s", skus: 500, seed: 116, quota: { kind: "fixed-window", requests: 300, windowSeconds: 10 } },
  {
    name: "window-400-per-10s-no-retry-after",
    about: "fixed window 400 requests / 10 s, 429 without Retry-After (each window's opening found by polling)",
    skus: 600,
    seed: 125,
    quota: { kind: "fixed-window", requests: 400, windowSeconds: 10, retryAfter: "none" },
  },
  {
    name: "sliding-250-per-5s",
    about: "sliding window: at most 250 requests in any 5 s (a log of admissions), Retry-After whole seconds",
    skus: 600,
    seed: 126,
    quota: { kind: "sliding-window", requests: 250, windowSeconds: 5 },
  },
  {
    name: "sliding-60-per-3s-date",
    about:
      "sliding window: at most 60 requests in any 3 s, Retry-After as an HTTP-date rounded up to its second (a log that admitted its allowance just after a whole second names the whole second after its slots free)",
    skus: 300,
    seed: 143,
    quota: { kind: "sliding-window", requests: 60, windowSeconds: 3, retryAfter: "date" },
  },
  { name: "bucket-30-no-retry-after", about: "token bucket 30 req/s, burst 5, 429 without Retry-After", skus: 400, seed: 117, quota: { requestsPerSecond: 30, burst: 5, retryAfter: "none" } },
  { name: "bucket-50-date-retry-after", about: "token bucket 50 req/s, burst 5, Retry-After as HTTP-date", skus: 600, seed: 118, quota: { requestsPerSecond: 50, burst: 5, retryAfter: "date" } },
  {
    name: "bucket-20-date-floor",
    about: "token bucket 20 req/s, burst 2, Retry-After as an HTTP-date cut to its second (up to 1 s early)",
    skus: 300,
    seed: 123,
    quota: { requestsPerSecond: 20, burst: 2, retryAfter: "date-floor" },
  },
  {
    name: "bucket-40-seconds-floor",
    about: "token bucket 40 req/s, burst 10, Retry-After in whole seconds cut down (Math.floor): 0 for every next token",
    skus: 600,
    seed: 142,
    quota: { requestsPerSecond: 40, burst: 10, retryAfter: "seconds-floor" },
  },
  {
    name: "bucket-60-503-bursts",
    about: "token bucket 60 req/s, burst 10; 1% of requests start a burst of 4 × 503 (no Retry-After)",
    skus: 600,
    seed: 119,
    quota: { requestsPerSecond: 60, burst: 10 },
    args: ["--fault", "503:p=0.01,burst=4"],
  },
  {
    name: "bucket-60-503-outages-400ms",
    about: "token bucket 60 req/s, burst 10; 0.3% of requests start an outage of 400 ms in time (every request in it a 503, no Retry-After): an external API's blip, not a count of answers",
    skus: 600,
    seed: 134,
    quota: { requestsPerSecond: 60, burst: 10 },
    args: ["--fault", "503:p=0.003,for=400"],
  },
  {
    name: "bucket-60-503-bursts-retry-after",
    about:
      "token bucket 60 req/s, burst 10; 1% of requests start a burst of 4 × 503 naming Retry-After: 1 (every worker waits it out: the first 503 alone, the rest at once, two pauses a burst at least; the least time leaves them out)",
    skus: 600,
    seed: 119,
    quota: { requestsPerSecond: 60, burst: 10 },
    args: ["--fault", "503:p=0.01,burst=4,retry-after=1"],
  },
  {
    name: "bucket-80-latency-20ms",
    about: "token bucket 80 req/s, burst 8, responses 20 ± 5 ms late",
    skus: 800,
    seed: 120,
    quota: { requestsPerSecond: 80, burst: 8 },
    args: ["--latency-ms", "20", "--latency-jitter-ms", "5"],
  },
  {
    name: "bucket-100-latency-100ms",
    about: "token bucket 100 req/s, burst 20, responses 100 ± 10 ms late",
    skus: 1000,
    seed: 121,
    quota: { requestsPerSecond: 100, burst: 20 },
    args: ["--latency-ms", "100", "--latency-jitter-ms", "10"],
  },
  {
    name: "bucket-200-burst-100-latency-100ms",
    about: "token bucket 200 req/s, burst 100, responses 100 ± 10 ms late (a generous quota: 20 in flight needed at its rate)",
    skus: 2000,
    seed: 127,
    quota: { requestsPerSecond: 200, burst: 100 },
    args: ["--latency-ms", "100", "--latency-jitter-ms", "10"],
  },
  {
    name: "bucket-100-burst-100-latency-100ms",
    about: "token bucket 100 req/s, burst 100, responses 100 ± 10 ms late, at the issue's 600-SKU size (every request in flight beyond the quota's share when the bucket runs dry is a 429)",
    skus: 600,
    seed: 131,
    quota: { requestsPerSecond: 100, burst: 100 },
    args: ["--latency-ms", "100", "--latency-jitter-ms", "10"],
  },
  {
    name: "window-250-per-10s-behind-preauth-40-burst-5",
    about: "fixed window 250 requests / 10 s behind a limit before authentication of 40 req/s, burst 5 (the document names both; each window's allowance meets the per-client bucket)",
    skus: 400,
    seed: 126,
    quota: { kind: "fixed-window", requests: 250, windowSeconds: 10 },
    preAuth: { requestsPerSecond: 40, burst: 5 },
  },
  {
    name: "bucket-60-no-burst-latency-20ms",
    about: "token bucket 60 req/s, no burst (1), responses 20 ± 2 ms late (two requests decided within a token interval: a 429 and a second's pause)",
    skus: 600,
    seed: 133,
    quota: { requestsPerSecond: 60, burst: 1 },
    args: ["--latency-ms", "20", "--latency-jitter-ms", "2"],
  },
  {
    name: "bucket-100-no-burst-latency-30ms",
    about:
      "token bucket 100 req/s, no burst (1), responses 30 ± 3 ms late: a round trip of three token intervals (10 ms each), so one request in flight spaced from answers sends at most ~1 per round trip, and several in flight meet the jitter on the way (a shape we do not run close to: 2.1-3.5x, BENCHMARKS.md)",
    skus: 600,
    seed: 141,
    quota: { requestsPerSecond: 100, burst: 1 },
    args: ["--latency-ms", "30", "--latency-jitter-ms", "3"],
  },
  {
    name: "in-flight-4-latency-100ms",
    about:
      "at most 4 requests answered at once (a limit on concurrency, not rate, as a gateway's often is; a server written apart from ours put one before authentication), responses 100 ± 50 ms late, one more a 429 naming 1 s; the quota a bucket that never binds",
    skus: 600,
    seed: 142,
    quota: { requestsPerSecond: 1000, burst: 1000 },
    args: ["--latency-ms", "100", "--latency-jitter-ms", "50"],
    inFlight: { max: 4, servedMs: 100 },
  },
  {
    name: "window-100-per-1s",
    about: "fixed window 100 requests / 1 s (a counter per second: its 429s name 1 s, as a token bucket's do, and it admits a whole allowance at each second's start)",
    skus: 1000,
    seed: 134,
    quota: { kind: "fixed-window", requests: 100, windowSeconds: 1 },
  },
];

export const QUOTA_TARGETS = { ratioEveryCell: 1.1, ratioMedian: 1.05, share429: 0.02, violations: 0 } as const;

/** The `simulate` flags of a quota. */
export function quotaFlags(q: QuotaOptions): string[] {
  const shape =
    q.kind === "fixed-window" || q.kind === "sliding-window"
      ? [q.kind === "fixed-window" ? "--quota-window" : "--quota-sliding", `${q.requests}/${q.windowSeconds}`]
      : ["--quota-rps", String(q.requestsPerSecond), "--quota-burst", String(q.burst ?? q.requestsPerSecond), ...(q.startTokens === undefined ? [] : ["--quota-start-tokens", String(q.startTokens)])];
  return [...shape, ...(q.retryAfter ? ["--quota-retry-after", q.retryAfter] : []), ...(q.otherClientRps ? ["--quota-other-client-rps", String(q.otherClientRps)] : [])];
}

/**
 * A cell's least time (ms): its quota's for the `accepted` requests, and behind a limit before
 * authentication the longer of that and the limit's own for the requests it let through (`passedPreAuth`).
 */
export function cellLeastMs(cell: Pick<QuotaCell, "quota" | "preAuth" | "inFlight">, accepted: number, passedPreAuth: number, offsetMs: number): number {
  const quota = leastMs(cell.quota, accepted, offsetMs);
  const served = cell.inFlight ? (accepted * cell.inFlight.servedMs) / cell.inFlight.max : 0;
  return Math.max(served, cell.preAuth ? Math.max(quota, leastMs(cell.preAuth, passedPreAuth, 0)) : quota);
}

/** The `simulate` flags of a cell's limits before the quota: before authentication, on requests in flight (none without). */
function limitFlags(cell: QuotaCell): string[] {
  const inFlight = cell.inFlight ? ["--max-in-flight", String(cell.inFlight.max)] : [];
  return cell.preAuth ? ["--preauth-rps", String(cell.preAuth.requestsPerSecond), "--preauth-burst", String(cell.preAuth.burst), ...inFlight] : inFlight;
}

/** Least time (ms) the quota allows for `accepted` requests, the first `offsetMs` into the quota's first window. */
export function leastMs(q: QuotaOptions, accepted: number, offsetMs: number): number {
  if (q.kind === "fixed-window") {
    const windows = Math.ceil(accepted / q.requests);
    return Math.max(0, (windows - 1) * q.windowSeconds * 1000 - (offsetMs % (q.windowSeconds * 1000)));
  }
  // A log of admissions has no alignment: its first window opens at the first request, and at best
  // each later allowance goes out at once as the one a window before leaves the log.
  if (q.kind === "sliding-window") return (Math.ceil(accepted / q.requests) - 1) * q.windowSeconds * 1000;
  // What the bucket held at the first request went out at once; the rest came at its rate.
  const start = q.startTokens ?? q.burst ?? Math.max(1, q.requestsPerSecond);
  return (Math.max(0, accepted - start) / q.requestsPerSecond) * 1000;
}

interface CellStats {
  requests: number;
  accepted: number;
  acceptedBySecond: number[];
  rateLimited: number;
  byStatus: Record<string, number>;
  retryAfterViolations: unknown[];
  firstRequestAt: number | null;
  preAuthLimited: number;
}

export interface CellResult {
  name: string;
  about: string;
  skus: number;
  requests: number;
  accepted: number;
  rateLimited: number;
  share429: number;
  responses503: number;
  violations: number;
  wallMs: number;
  processWallMs: number;
  leastMs: number;
  ratio: number;
  /** Admitted over the run's middle half ÷ the quota's rate over it (token buckets; null for a window). */
  steadyShare: number | null;
  equalToTruth: boolean;
  truthDifferences: string[];
  syncStatus: string;
  /** The cell run again at the quota's rate (`--known-rate`; null when not run or not a token bucket). */
  known?: { maxRps: number; ratio: number; share429: number; violations: number; equalToTruth: boolean } | null;
  /** `--again`: a second `sync --full` into the same database, which starts from the quota the first learned. */
  again?: { ratio: number; share429: number; violations: number; equalToTruth: boolean };
  /** `--again`: then an incremental `sync` after churn (CYCLE_CHURN), a daemon's cycle: its requests and 429s. */
  cycle?: { requests: number; rateLimited: number; violations: number; wallMs: number; ratio: number };
}

/** The rate a client told the quota would set (`--max-rps`): the slower of the bucket and a limit before authentication; null for a window or a limit on in flight. */
export function knownRateOf(cell: Pick<QuotaCell, "quota" | "preAuth" | "inFlight">): number | null {
  const q = cell.quota;
  if (q.kind === "fixed-window" || q.kind === "sliding-window" || cell.inFlight) return null;
  return Math.min(q.requestsPerSecond, cell.preAuth?.requestsPerSecond ?? Infinity);
}

const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

/** What `runCellWithKnown` runs besides each cell: `knownRate` (column known), `again` (columns again and cycle). */
export interface CellExtras {
  knownRate: boolean;
  again: boolean;
}

/**
 * `runCell`, then with `knownRate` the same cell again at the quota's rate (knownRateOf), its figures in
 * `known`; with `again`, the next runs into the same database (cells[].again, cells[].cycle).
 */
export async function runCellWithKnown(cell: QuotaCell, work: string, log: (m: string) => void, extras: CellExtras): Promise<CellResult> {
  const r = await runCell(cell, work, log, [], extras.again);
  const rate = extras.knownRate ? knownRateOf(cell) : null;
  if (rate === null) return { ...r, known: null };
  const k = await runCell(cell, work, (m) => log(`(known rate) ${m}`), ["--max-rps", String(rate)]);
  return { ...r, known: { maxRps: rate, ratio: k.ratio, share429: k.share429, violations: k.violations, equalToTruth: k.equalToTruth } };
}

/**
 * One cell: a fresh simulator, `sync --full` (with `syncArgs`), its figures against the quota and the ground
 * truth. With `again`, then into the same database: a second `sync --full` (the quota set afresh: it starts
 * from what the first learned) and an incremental `sync` after churn of CYCLE_CHURN of the SKUs (a daemon's cycle).
 */
async function runCell(cell: QuotaCell, work: string, log: (m: string) => void, syncArgs: string[] = [], again = false): Promise<CellResult> {
  const sim = await startSimulator({ cli: true, skus: cell.skus, seed: cell.seed, args: [...quotaFlags(cell.quota), ...limitFlags(cell), ...(cell.args ?? [])] });
  try {
    const db = join(work, `quota-${cell.name}${syncArgs.length ? "-known" : ""}.db`);
    const r = await measureSync(sim, cell, db, ["--full", ...syncArgs]);
    log(`1 quota ${cell.name}: ${describeRun(r)}; equal to truth: ${r.equalToTruth ? "yes" : `NO (${r.truthDifferences.length} differences shown)`}`);
    if (!again) return r;
    const a = await measureSync(sim, cell, db, ["--full", ...syncArgs]);
    log(`1 quota ${cell.name} (again): ${describeRun(a)}; equal to truth: ${a.equalToTruth ? "yes" : "NO"}`);
    await sim.admin(`/churn?fraction=${CYCLE_CHURN}&seed=${cell.seed}`, "POST");
    const c = await measureSync(sim, cell, db, syncArgs, false);
    log(`1 quota ${cell.name} (cycle): ${describeRun(c)}`);
    return {
      ...r,
      again: { ratio: a.ratio, share429: a.share429, violations: a.violations, equalToTruth: a.equalToTruth },
      cycle: { requests: c.requests, rateLimited: c.rateLimited, violations: c.violations, wallMs: c.wallMs, ratio: c.ratio },
    };
  } finally {
    await sim.stop();
  }
}

/** A daemon's cycle in `--again`: churn over this share of the SKUs, then an incremental sync. */
const CYCLE_CHURN = 0.02;

const describeRun = (r: CellResult) =>
  `${r.requests} requests (${r.accepted} accepted, ${r.rateLimited} × 429, ${r.responses503} × 503, ${r.violations} violations) in ${(r.wallMs / 1000).toFixed(1)} s; least ${(r.leastMs / 1000).toFixed(1)} s → ratio ${r.ratio}, steady ${r.steadyShare ?? "-"}`;

/** One sync into `db` against `sim`, the quota and counters set afresh just before it; its figures (the truth compared when `compare`). */
async function measureSync(sim: Simulator, cell: QuotaCell, db: string, args: string[], compare = true): Promise<CellResult> {
  // A fresh quota (full bucket, window starting now) and fresh counters, just before the sync.
  const quotaSetAt = Date.now();
  await sim.admin("/quota", "POST", cell.quota);
  if (cell.preAuth) await sim.admin("/preauth", "POST", cell.preAuth);
  await sim.admin("/stats/reset", "POST");
  const m = await syncCli(sim.baseUrl, db, args);
  const exitedAt = Date.now();
  const s = await sim.admin<CellStats>("/stats");
  const check = compare ? compareWithTruth(db, await sim.admin<GroundTruth>("/ground-truth")) : { equal: true, sample: [] };
  const first = s.firstRequestAt ?? exitedAt;
  const wallMs = exitedAt - first;
  const least = cellLeastMs(cell, s.accepted, s.requests - s.preAuthLimited, first - quotaSetAt);
  return {
    name: cell.name,
    about: cell.about,
    skus: cell.skus,
    requests: s.requests,
    accepted: s.accepted,
    rateLimited: s.rateLimited,
    share429: round(s.rateLimited / Math.max(1, s.requests), 4),
    responses503: s.byStatus["503"] ?? 0,
    violations: s.retryAfterViolations.length,
    wallMs: Math.round(wallMs),
    processWallMs: Math.round(m.wallMs),
    leastMs: Math.round(least),
    ratio: least > 0 ? round(wallMs / least) : Number.NaN,
    steadyShare: cell.inFlight ? null : steadyShare(cell.quota, s.acceptedBySecond, wallMs),
    equalToTruth: check.equal,
    truthDifferences: check.sample,
    syncStatus: m.result.status,
  };
}

/** Admitted over the middle half of the run's whole seconds ÷ the token bucket's rate over them. */
export function steadyShare(q: QuotaOptions, acceptedBySecond: number[], wallMs: number): number | null {
  if (q.kind === "fixed-window" || q.kind === "sliding-window") return null;
  const seconds = Math.floor(wallMs / 1000);
  const from = Math.floor(seconds / 4);
  const to = Math.floor((3 * seconds) / 4);
  if (to <= from) return null;
  const admitted = acceptedBySecond.slice(from, to).reduce((a, n) => a + n, 0);
  return round(admitted / ((to - from) * q.requestsPerSecond));
}

export function medianOf(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return Number.NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function summariseMatrix(cells: CellResult[]) {
  const ratio = medianOf(cells.map((c) => c.ratio));
  const worst = Math.max(...cells.map((c) => c.ratio));
  const met = cells.every((c) => c.ratio <= QUOTA_TARGETS.ratioEveryCell && c.share429 < QUOTA_TARGETS.share429 && c.violations === 0 && c.equalToTruth) && ratio <= QUOTA_TARGETS.ratioMedian;
  const steady = medianOf(cells.map((c) => c.steadyShare ?? Number.NaN));
  return {
    medianRatio: round(ratio),
    worstRatio: round(worst),
    medianSteady: round(steady),
    allEqualToTruth: cells.every((c) => c.equalToTruth),
    violations: cells.reduce((a, c) => a + c.violations, 0),
    met,
  };
}

/** The matrix as a text table (the same columns as BENCHMARKS.md). */
export function matrixTable(cells: CellResult[]): string {
  const withKnown = cells.some((c) => c.known);
  const withAgain = cells.some((c) => c.again);
  const head = [
    "cell",
    "SKUs",
    "requests",
    "accepted",
    "429 %",
    "503s",
    "RA viol.",
    "wall s",
    "least s",
    "ratio",
    "steady",
    "= truth",
    ...(withKnown ? ["known"] : []),
    ...(withAgain ? ["again", "cycle 429s"] : []),
  ];
  const rows = cells.map((c) => [
    c.name,
    String(c.skus),
    String(c.requests),
    String(c.accepted),
    (100 * c.share429).toFixed(2),
    String(c.responses503),
    String(c.violations),
    (c.wallMs / 1000).toFixed(1),
    (c.leastMs / 1000).toFixed(1),
    Number.isFinite(c.ratio) ? c.ratio.toFixed(3) : "-",
    c.steadyShare === null ? "-" : c.steadyShare.toFixed(3),
    c.equalToTruth ? "yes" : "NO",
    ...(withKnown ? [knownCell(c)] : []),
    ...(withAgain ? againCells(c) : []),
  ]);
  const all = [head, ...rows];
  const width = head.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((cell, i) => (i === 0 ? cell.padEnd(width[i]!) : cell.padStart(width[i]!))).join("  ");
  const s = summariseMatrix(cells);
  const known = cells.flatMap((c) => (c.known ? [c.known.ratio] : []));
  const again = cells.flatMap((c) => (c.again ? [c.again.ratio] : []));
  const cycles = cells.flatMap((c) => (c.cycle ? [c.cycle] : []));
  return [
    line(head),
    width.map((n) => "-".repeat(n)).join("  "),
    ...rows.map(line),
    "",
    `median ratio ${s.medianRatio} (target ≤ ${QUOTA_TARGETS.ratioMedian}), worst ${s.worstRatio} (target ≤ ${QUOTA_TARGETS.ratioEveryCell} every cell), ` +
      `429s < ${100 * QUOTA_TARGETS.share429} % and 0 violations in every cell: ${s.met ? "met" : "NOT met"}; median steady share ${s.medianSteady}`,
    ...(known.length
      ? [
          `known: ratio with --max-rps at the quota's rate, median ${round(medianOf(known))} over ${known.length} token-bucket cells (* = a 429, a violation or a difference from the truth in that run)`,
        ]
      : []),
    ...(again.length
      ? [
          `again: a second sync --full into the same database (it starts from the quota the first learned), median ratio ${round(medianOf(again))} (* = a 429 share of 2 % or more, a violation or a difference from the truth)`,
          `cycle 429s: then an incremental sync after churn of ${100 * CYCLE_CHURN} % of the SKUs: ${cycles.reduce((a, c) => a + c.rateLimited, 0)} × 429 in ${cycles.reduce((a, c) => a + c.requests, 0)} requests over ${cycles.length} cycles, ${cycles.filter((c) => c.rateLimited / Math.max(1, c.requests) >= QUOTA_TARGETS.share429).length} cycles at 2 % or more`,
        ]
      : []),
  ].join("\n");
}

/** The known-rate ratio, starred when that run drew a 429, broke a Retry-After or differed from the truth. */
function knownCell(c: CellResult): string {
  if (!c.known) return "-";
  const flawed = c.known.share429 > 0 || c.known.violations > 0 || !c.known.equalToTruth;
  return `${Number.isFinite(c.known.ratio) ? c.known.ratio.toFixed(3) : "-"}${flawed ? "*" : ""}`;
}

/** The second full sync's ratio (starred as knownCell stars) and the cycle's 429s of its requests. */
function againCells(c: CellResult): string[] {
  if (!c.again || !c.cycle) return ["-", "-"];
  const flawed = c.again.share429 >= QUOTA_TARGETS.share429 || c.again.violations > 0 || !c.again.equalToTruth;
  return [`${Number.isFinite(c.again.ratio) ? c.again.ratio.toFixed(3) : "-"}${flawed ? "*" : ""}`, `${c.cycle.rateLimited}/${c.cycle.requests}`];
}
