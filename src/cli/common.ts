/** What several commands share: flags -> config, the logger, signal handling. */
import { CONFIG_FLAGS, loadConfig, loadKey, optionOf, type Flags, type ResolvedConfig } from "../core/config.js";
import { createLogger, type Logger } from "../core/logger.js";
import type { Secret } from "../core/secret.js";
import { resolveSku } from "../analysis/resolve-sku.js";
import type { DB } from "../store/db.js";
import { ConfigError } from "../core/errors.js";
import type { CliValues } from "./options.js";

/** The options that config reads (--config, --db, --base-url, ...), as loadConfig takes them. */
export function flagsFrom(v: CliValues): Flags {
  const flags: Flags = {};
  for (const flag of CONFIG_FLAGS) {
    const value = v[optionOf(flag)];
    if (typeof value === "string") flags[flag] = value;
  }
  return flags;
}

export interface Context {
  config: ResolvedConfig;
  key: Secret;
  logger: Logger;
}

/** Config, then key (so a config mistake is reported even when the key is missing too). */
export function setup(v: CliValues): Context {
  const config = loadConfig(flagsFrom(v));
  const logger = createLogger(config.logLevel);
  const key = loadKey(process.env, (msg) => logger.warn(msg));
  return { config, key, logger };
}

/**
 * SIGINT/SIGTERM abort the controller: the run finishes the transaction in hand and
 * records itself as interrupted. A second signal exits at once (SQLite's journal keeps the file consistent).
 */
export function abortOnSignals(logger: Logger): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  let count = 0;
  const handler = (sig: NodeJS.Signals) => {
    count++;
    if (count > 1) {
      process.stderr.write(`inventory-mirror: second ${sig}, exiting now\n`);
      process.exit(1);
    }
    logger.warn({ signal: sig }, "stopping: finishing the transaction in hand");
    ac.abort(new Error(`received ${sig}`));
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  return {
    signal: ac.signal,
    dispose: () => {
      process.off("SIGINT", handler);
      process.off("SIGTERM", handler);
    },
  };
}

/** --sku by UUID or code; none matching is a usage error, not a consistent SKU. */
export function skuIdOf(db: DB, sku: string, dbPath: string): string {
  const found = resolveSku(db, sku);
  if (!found) throw new ConfigError(`--sku ${sku}: no SKU with that id or code in ${dbPath}`);
  return found.id;
}
