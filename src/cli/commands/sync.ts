/** `inventory-mirror sync [--full]`: one run, then exit. */
import { DEFAULTS } from "../../core/defaults.js";
import { runSync, type SyncResult } from "../../sync/sync.js";
import { syncExitCode } from "../../sync/outcome.js";
import { LogProgress, TtyProgress, type ProgressSink } from "../../sync/progress.js";
import { abortOnSignals, setup } from "../common.js";
import type { CliValues } from "../options.js";
import { describeError, exitCodeOfSignal } from "../../core/errors.js";
import { redactSecrets } from "../../core/secret.js";
import { forTerminal } from "../../core/terminal.js";

export default async function sync(v: CliValues): Promise<number> {
  const { config, key, logger } = setup(v);
  const mode = v.full ? "full" : "incremental";
  const stop = abortOnSignals(logger);
  const progress: ProgressSink = process.stderr.isTTY && !v["no-progress"] && !v.json ? new TtyProgress() : new LogProgress(logger, DEFAULTS.progressIntervalMs);
  let result: SyncResult;
  try {
    result = await runSync({ mode, config, key, logger, signal: stop.signal, progress, ignoreQuotaWall: v["ignore-quota-wall"] === true });
  } catch (err) {
    // Stopped by a signal before the run had begun (it was checking the workspace): nothing was recorded.
    const sig = stop.received();
    if (!sig) throw err;
    process.stderr.write(`inventory-mirror sync: interrupted (${sig}): ${forTerminal(redactSecrets(describeError(err)))}\n`);
    return exitCodeOfSignal(sig);
  } finally {
    progress.finish();
    stop.dispose();
  }
  if (v.json) process.stdout.write(JSON.stringify({ ...result, error: result.error ? redactSecrets(describeError(result.error)) : null }) + "\n");
  else process.stdout.write(forTerminal(summarize(result)) + "\n");
  if (result.status !== "succeeded" && result.error) process.stderr.write(`inventory-mirror sync: ${result.status}: ${forTerminal(redactSecrets(describeError(result.error)))}\n`);
  // Stopped by a signal: the shell's convention (130, 143), whatever the run had reached.
  const signal = stop.received();
  if (signal) return exitCodeOfSignal(signal);
  // The outcome table (src/sync/outcome.ts): 0 also for a run stopped by the budget the user set.
  return syncExitCode(result.status, result.error);
}

export function summarize(r: SyncResult): string {
  const ep = Object.entries(r.requestsByEndpoint)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  return [
    `sync ${r.mode === "full" ? "--full " : ""}${r.status} in ${(r.durationMs / 1000).toFixed(1)} s (run ${r.runId}${r.resumedFrom ? `, resumed from run ${r.resumedFrom}` : ""})`,
    `  workspace  ${r.workspace.name} (${r.workspace.id})`,
    `  SKUs       ${r.resumedFrom && r.skusListed === 0 ? `list walked by an earlier run of this walk` : `${r.skusListed} listed`}, ${r.skusFetched} fetched, ${r.skusFailed} failed, ${r.skusDeleted} marked deleted`,
    ...(r.mode === "incremental"
      ? [`  planned    ${r.plan.new} new, ${r.plan.changed} changed, ${r.plan.repolled} re-polled (freshness), ${r.plan.retried} retried, ${r.plan.reverified} re-verified`]
      : []),
    `  locations  ${r.locations}`,
    `  history    ${r.historyRowsAdded} rows added`,
    `  requests   ${r.requests}${ep ? ` (${ep})` : ""}; ${r.responses429} × 429, ${r.responses503} × 503, ${r.retries} retries${r.heldAtWrite ? `, ${r.heldAtWrite} held back at the write` : ""}, waited ${(r.waitMs / 1000).toFixed(1)} s`,
    ...(r.ceilingHint ? [`  note       ${r.ceilingHint}`] : []),
    ...(r.resumeAfter ? [`  resume after ${r.resumeAfter}`] : []),
  ].join("\n");
}
