/** `inventory-mirror sync [--full]`: one run, then exit. */
import { EXIT } from "../../core/errors.js";
import { DEFAULTS } from "../../core/defaults.js";
import { runSync, type SyncResult } from "../../sync/sync.js";
import { LogProgress, TtyProgress, type ProgressSink } from "../../sync/progress.js";
import { abortOnSignals, setup } from "../common.js";
import type { CliValues } from "../options.js";
import { ApiError, describeError } from "../../core/errors.js";
import { redactSecrets } from "../../core/secret.js";
import { forTerminal } from "../../core/terminal.js";

export default async function sync(v: CliValues): Promise<number> {
  const { config, key, logger } = setup(v);
  const mode = v.full ? "full" : "incremental";
  const { signal, dispose } = abortOnSignals(logger);
  const progress: ProgressSink =
    process.stderr.isTTY && !v["no-progress"] && !v.json ? new TtyProgress() : new LogProgress(logger, DEFAULTS.progressIntervalMs);
  let result: SyncResult;
  try {
    result = await runSync({ mode, config, key, logger, signal, progress, ignoreQuotaWall: v["ignore-quota-wall"] === true });
  } finally {
    progress.finish();
    dispose();
  }
  if (v.json) process.stdout.write(JSON.stringify({ ...result, error: result.error ? redactSecrets(describeError(result.error)) : null }) + "\n");
  else process.stdout.write(forTerminal(summarize(result)) + "\n");
  if (result.status === "succeeded") return EXIT.ok;
  // A run stopped by the budget the user set did what was asked: its work stays queued for the next run.
  const budget = result.error instanceof ApiError && result.error.kind === "budget";
  if (result.error) process.stderr.write(`inventory-mirror sync: ${result.status}: ${forTerminal(redactSecrets(describeError(result.error)))}\n`);
  if (budget) return EXIT.ok;
  if (result.error instanceof ApiError) return result.error.exitCode;
  return EXIT.syncFailed;
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
    `  requests   ${r.requests}${ep ? ` (${ep})` : ""}; ${r.responses429} × 429, ${r.responses503} × 503, ${r.retries} retries, waited ${(r.waitMs / 1000).toFixed(1)} s`,
    ...(r.resumeAfter ? [`  resume after ${r.resumeAfter}`] : []),
  ].join("\n");
}
