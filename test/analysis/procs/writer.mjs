#!/usr/bin/env node
/**
 * A writer process for the WAL-cap test: full syncs of the simulator back to back (the
 * real runSync from dist/), with the WAL guard started on the database once the file
 * `guardOnFile` appears (so the test can first show the WAL growing without it). Stops
 * after the run in hand once `stopFile` appears; prints one JSON line with the guard's
 * stats.
 *
 *   node writer.mjs '{ "db", "baseUrl", "capBytes", "intervalMs", "maxWaitMs", "maxBackoffMs", "guardOnFile", "stopFile" }'
 *   (key in INVENTORY_API_KEY)
 */
import { existsSync } from "node:fs";

const dist = new URL("../../../dist/", import.meta.url);
const { runSync } = await import(new URL("sync/sync.js", dist).href);
const { loadConfig } = await import(new URL("core/config.js", dist).href);
const { createLogger } = await import(new URL("core/logger.js", dist).href);
const { Secret } = await import(new URL("core/secret.js", dist).href);
const { openDatabase } = await import(new URL("store/db.js", dist).href);
const { startWalGuard } = await import(new URL("store/wal-guard.js", dist).href);

const o = JSON.parse(process.argv[2]);
const config = loadConfig({ db: o.db, baseUrl: o.baseUrl, logLevel: "error" }, {});
const logger = createLogger("error");
const key = new Secret(process.env.INVENTORY_API_KEY);
openDatabase(o.db).close();

let guard = null;
const checks = [];
const poll = setInterval(() => {
  if (!guard && existsSync(o.guardOnFile)) {
    guard = startWalGuard(o.db, {
      capBytes: o.capBytes,
      intervalMs: o.intervalMs,
      maxWaitMs: o.maxWaitMs,
      maxBackoffMs: o.maxBackoffMs,
      onCheck: (c) => checks.push(c),
    });
  }
}, 20);

let runs = 0;
const statuses = [];
while (!existsSync(o.stopFile)) {
  const r = await runSync({ mode: "full", config, key, logger, signal: new AbortController().signal });
  statuses.push(r.status);
  runs++;
}
clearInterval(poll);
const stats = guard ? { ...guard.stats } : null;
guard?.stop();
const actions = {};
for (const c of checks) actions[c.action + (c.busy ? "-busy" : "")] = (actions[c.action + (c.busy ? "-busy" : "")] ?? 0) + 1;
if (process.env.WAL_DEBUG) for (const c of checks) process.stderr.write(`${c.at} ${c.action} busy=${c.busy} ${c.sizeBefore} -> ${c.sizeAfter}\n`);
process.stdout.write(JSON.stringify({ runs, statuses: [...new Set(statuses)], guard: stats, actions }) + "\n");
