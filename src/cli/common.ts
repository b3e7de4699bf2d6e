/** What several commands share: flags -> config, the logger, signal handling. */
import { CONFIG_FLAGS, loadConfig, loadKey, optionOf, type Flags, type ResolvedConfig } from "../core/config.js";
import { createLogger, type Logger } from "../core/logger.js";
import type { Secret } from "../core/secret.js";
import { resolveSku } from "../analysis/resolve-sku.js";
import type { DB } from "../store/db.js";
import { ConfigError, exitCodeOfSignal } from "../core/errors.js";
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
 * records itself as interrupted; `received()` then names the signal, for the exit code
 * (130 or 143). A second signal exits at once with that code (SQLite's journal keeps the
 * file consistent).
 */
export function abortOnSignals(logger: Logger): { signal: AbortSignal; received(): "SIGINT" | "SIGTERM" | null; dispose(): void } {
  const ac = new AbortController();
  let received: "SIGINT" | "SIGTERM" | null = null;
  const handler = (sig: "SIGINT" | "SIGTERM") => {
    if (received) {
      process.stderr.write(`inventory-mirror: second ${sig}, exiting now\n`);
      process.exit(exitCodeOfSignal(sig));
    }
    received = sig;
    logger.warn({ signal: sig }, "stopping: finishing the transaction in hand");
    ac.abort(new Error(`received ${sig}`));
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  return {
    signal: ac.signal,
    received: () => received,
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
