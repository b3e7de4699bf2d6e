/**
 * `inventory-mirror status`: the last runs with their outcome and counters, the
 * quota backoff state, and the SKU × locations whose latest scan is not reflected,
 * from the database alone: no key, no request. It reads through the store's status read
 * model (store/status.ts, shared with the daemon), read-only (WAL), so it works while the
 * daemon or a `sync` is writing.
 */
import { loadConfig } from "../../core/config.js";
import { ConfigError } from "../../core/errors.js";
import { writerLockHeld } from "../../store/db.js";
import { readStatusOf, type RunSummary, type StatusReport } from "../../store/status.js";
import { flagsFrom } from "../common.js";
import type { CliValues } from "../options.js";
import { forTerminal } from "../../core/terminal.js";

export const DEFAULT_RUNS = 10;
export const NOT_CLEAN_SHOWN = 20;

export default async function status(v: CliValues): Promise<number> {
  const config = loadConfig(flagsFrom(v));
  const runsRaw = v.runs === undefined ? String(DEFAULT_RUNS) : String(v.runs);
  const runs = Number(runsRaw);
  if (!/^\d+$/.test(runsRaw) || runs < 1 || runs > 1000) throw new ConfigError(`--runs: expected a whole number from 1 to 1000, got "${runsRaw}"`);
  const report = readStatusOf(config.db, { runs, notCleanLimit: NOT_CLEAN_SHOWN });
  // A run recorded as running whose process is gone (kill -9, a crash) is not running.
  if (report.running) report.running.alive = processAlive(report.running.pid) || writerLockHeld(config.db);
  process.stdout.write((v.json ? JSON.stringify(report) : forTerminal(formatStatus(report))) + "\n");
  return 0;
}

export function formatStatus(r: StatusReport): string {
  const now = Date.parse(r.generatedAt);
  const lines: string[] = [];
  lines.push(`database      ${r.database}`);
  lines.push(`workspace     ${r.workspace ? `${r.workspace.name} (${r.workspace.id}), last checked ${ago(r.workspace.checkedAt, now)}` : "(none yet)"}`);
  lines.push(
    `running       ${
      r.running
        ? r.running.alive === false
          ? `none: run ${r.running.id} (${r.running.mode}, started ${r.running.startedAt}) was left running by pid ${r.running.pid ?? "?"}, which is gone (killed or crashed); the next run marks it interrupted and resumes its walk`
          : `run ${r.running.id} (${r.running.mode}) since ${r.running.startedAt}, pid ${r.running.pid ?? "?"}`
        : "no run in progress"
    }`,
  );
  lines.push(`last success  ${r.lastSuccess ? `run ${r.lastSuccess.id} (${r.lastSuccess.mode}) ended ${r.lastSuccess.finishedAt}, ${ago(r.lastSuccess.finishedAt, now)}` : "none"}`);
  lines.push(`last full     ${r.lastFullSuccess ? `run ${r.lastFullSuccess.id} ended ${r.lastFullSuccess.finishedAt}, ${ago(r.lastFullSuccess.finishedAt, now)}` : "none"}`);
  lines.push(`quota         ${quotaLine(r)}`);
  for (const l of r.quota.learned) lines.push(`learned rate  ${learnedLine(l)}`);
  if (r.feed) {
    const consumers = r.feed.consumers.map((c) => `${c.name} confirmed ${c.confirmedSeq} (${c.behind} behind)`);
    lines.push(`change feed   seq ${r.feed.latest}, oldest kept ${r.feed.oldest ?? "(none)"}; consumers: ${consumers.length ? consumers.join(", ") : "none"}`);
  }
  lines.push("");
  lines.push(`last ${r.runs.length} run(s):`);
  if (r.runs.length) {
    const header = ["run", "mode", "status", "started", "duration", "listed", "fetched", "failed", "deleted", "history+", "requests", "429", "503", "retries", "waited"];
    const rows = r.runs.map((x) => [
      String(x.id),
      x.mode,
      x.status,
      x.startedAt.replace(/\.\d+Z$/, "Z"),
      x.durationMs === null ? "-" : seconds(x.durationMs),
      String(x.counters.skusListed),
      String(x.counters.skusFetched),
      String(x.counters.skusFailed),
      String(x.counters.skusDeleted),
      String(x.counters.historyRowsAdded),
      String(x.counters.requests),
      String(x.counters.responses429),
      String(x.counters.responses503),
      String(x.counters.retries),
      seconds(x.counters.waitMs),
    ]);
    lines.push(...table([header, ...rows]).map((l) => `  ${l}`));
    for (const x of r.runs) {
      const notes = runNotes(x);
      if (notes) lines.push(`  run ${x.id}: ${notes}`);
    }
  }
  lines.push("");
  const nc = r.notClean;
  lines.push(`scan not reflected: ${nc.pairs} SKU × location (${nc.skus} SKUs) with freshness other than clean`);
  if (nc.shown.length) {
    lines.push(`  ${nc.shown.length < nc.pairs ? `the ${nc.shown.length} longest-standing:` : "all:"}`);
    const rows = nc.shown.map((i) => [i.notCleanSince ?? "?", i.status ?? "(missing)", i.skuCode ?? i.skuId, i.skuName ?? "", i.location ?? i.locationId]);
    lines.push(...table([["since", "status", "sku", "name", "location"], ...rows]).map((l) => `    ${l}`));
  }
  return lines.join("\n");
}

function quotaLine(r: StatusReport): string {
  const q = r.quota;
  const b = q.lastBackoff;
  if (q.state === "paused" && b) {
    return `paused until ${b.until} (run ${b.runId}: ${b.status ?? "error"} on ${b.endpoint ?? "?"}${b.retryAfter ? `, Retry-After ${b.retryAfter}` : ""})`;
  }
  if (q.state === "waiting" && q.resumeAfter) return `waiting: run ${q.resumeAfter.runId} hit the quota wall; no run before ${q.resumeAfter.at}`;
  const last = b ? `; last backoff ${b.at} (run ${b.runId}: ${b.status ?? "error"} on ${b.endpoint ?? "?"}, waited ${seconds(b.waitMs ?? 0)})` : "";
  return `clear${last}`;
}

/** A quota a run learned: the rate the next run against that server starts at, while it is recent enough. */
function learnedLine(l: StatusReport["quota"]["learned"][number]): string {
  const refused = l.high === null ? "" : `, 429 at ${l.high.toFixed(1)}`;
  const use = l.usable ? "the next run against it starts there" : "too old: the next run finds the quota afresh";
  return `${l.low.toFixed(1)} req/s${refused} for ${l.server}, learned by run ${l.runId} at ${l.learnedAt}; ${use}`;
}

function runNotes(x: RunSummary): string {
  const parts: string[] = [];
  const ep = Object.entries(x.counters.requestsByEndpoint).map(([k, n]) => `${k} ${n}`);
  if (ep.length && x.status !== "succeeded") parts.push(`requests ${ep.join(", ")}`);
  if (x.resumeAfter) parts.push(`resume after ${x.resumeAfter}`);
  if (x.error) parts.push(x.error);
  return parts.join("; ");
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function ago(iso: string, now: number): string {
  const s = Math.round((now - Date.parse(iso)) / 1000);
  if (!Number.isFinite(s)) return "at an unknown time";
  if (s < 0) return "just now";
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h ago`;
  return `${(s / 86400).toFixed(1)} days ago`;
}

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd(),
  );
}

/** Does a process with this pid exist (in our pid namespace)? */
function processAlive(pid: number | null): boolean {
  if (pid === null) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
