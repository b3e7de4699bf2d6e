/**
 * `inventory-mirror demo` (npm start): the simulator on 127.0.0.1, a full sync of it
 * into ./data/demo.db, a summary and three queries to try. No key or config needed.
 */
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { ConfigError, exitCodeOfSignal } from "../../core/errors.js";
import { loadConfig } from "../../core/config.js";
import { createLogger, LOG_LEVELS } from "../../core/logger.js";
import { Secret } from "../../core/secret.js";
import { startSimulator } from "../../simulator/index.js";
import { runSync } from "../../sync/sync.js";
import { abortOnSignals } from "../common.js";
import type { CliValues } from "../options.js";
import { summarize } from "./sync.js";
import { forTerminal } from "../../core/terminal.js";

export default async function demo(v: CliValues): Promise<number> {
  const dbPath = resolve((v.db as string | undefined) ?? "./data/demo.db");
  const skus = v.skus === undefined ? 500 : Number(v.skus);
  if (!Number.isInteger(skus) || skus < 1) throw new ConfigError(`--skus: expected a whole number >= 1, got "${String(v.skus)}"`);
  const level = (v["log-level"] as string | undefined) ?? "warn";
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new ConfigError(`--log-level: expected one of ${LOG_LEVELS.join(", ")}, got "${level}"`);
  mkdirSync(dirname(dbPath), { recursive: true });
  const apiKey = `sim_${randomBytes(16).toString("hex")}`;
  const logger = createLogger(level as (typeof LOG_LEVELS)[number]);

  process.stdout.write(`Starting the simulator (seed 42, ${skus} SKUs) on 127.0.0.1…\n`);
  const sim = await startSimulator({ seed: 42, skus, apiKey });
  const { signal, received, dispose } = abortOnSignals(logger);
  try {
    // The environment is ignored on purpose: the demo must not pick up a real base URL or database.
    const config = loadConfig({ db: dbPath, baseUrl: sim.baseUrl, logLevel: "warn" }, {});
    process.stdout.write(`Full sync of ${sim.baseUrl} into ${dbPath}…\n`);
    const result = await runSync({ mode: "full", config, key: new Secret(apiKey), logger, signal });
    process.stdout.write("\n" + forTerminal(summarize(result)) + "\n");
    if (result.status !== "succeeded") {
      const sig = received();
      return sig ? exitCodeOfSignal(sig) : 1;
    }
    const rel = dbPath.startsWith(process.cwd()) ? "." + dbPath.slice(process.cwd().length) : dbPath;
    process.stdout.write(
      [
        "",
        "Try it with the sqlite3 shell (or point Metabase, Grafana or DuckDB at the file):",
        "",
        "  # stock per root location, from leaf rows only (never parent + leaf)",
        `  sqlite3 -header -column ${rel} "SELECT root_name, sum(quantity) AS quantity, count(DISTINCT sku_id) AS skus FROM stock_by_root GROUP BY root_id ORDER BY root_name"`,
        "",
        "  # where the latest scan may not be reflected yet, and for how long",
        `  sqlite3 -header -column ${rel} "SELECT sku_name, display_path, quantity, freshness_status, rows_after_replay FROM stock_not_reflected ORDER BY seconds_not_clean DESC LIMIT 10"`,
        "",
        "  # full-text search over SKU name, codes, barcode, product and brand",
        `  sqlite3 -header -column ${rel} "SELECT s.name, s.code, s.total_quantity FROM sku_search JOIN skus s ON s.rowid = sku_search.rowid WHERE sku_search MATCH '\\"running shoe\\"' AND s.deleted_at IS NULL LIMIT 10"`,
        "",
        "  # the ten SKUs with the most movements and SETs, with their latest row",
        `  sqlite3 -header -column ${rel} "SELECT s.name, count(*) AS rows, max(h.occurred_at) AS latest FROM history h JOIN skus s ON s.id = h.sku_id GROUP BY h.sku_id ORDER BY rows DESC LIMIT 10"`,
        "",
        "  # is everything consistent? (history vs quantities vs list totals)",
        `  npx inventory-mirror reconcile --db ${rel}`,
        "",
      ].join("\n"),
    );
    return 0;
  } finally {
    dispose();
    await sim.close();
  }
}
