/**
 * `inventory-mirror daemon`: the sidecar. Scheduled incremental and full syncs
 * (config schedule.*), /healthz /readyz /metrics on daemon.listen, until SIGTERM or
 * SIGINT: then it stops scheduling, interrupts the run in hand after its current
 * transaction, closes the database (no -wal/-shm left behind) and exits within
 * STOP_DEADLINE_MS: 0 after SIGTERM (its normal stop, as under `docker stop`), 130 after
 * SIGINT (Ctrl-C, the shell's convention). A second signal exits at once with 130 or 143
 * (SQLite's journal keeps the file consistent).
 */
import { checkDirectory } from "../../store/db.js";
import { loadConfig, loadFeedToken, loadKey } from "../../core/config.js";
import { ConfigError, EXIT, exitCodeOfSignal } from "../../core/errors.js";
import { createLogger } from "../../core/logger.js";
import { loadPostgresUrl } from "../../core/pg-url.js";
import { Daemon } from "../../daemon/daemon.js";
import { flagsFrom } from "../common.js";
import type { CliValues } from "../options.js";

/** Exit before `docker stop`'s default 10 s grace period runs out, even if the run in hand does not end. */
const STOP_DEADLINE_MS = 9_000;
/** After a clean stop, give stray handles (sockets in close) this long before exiting anyway. */
const EXIT_GRACE_MS = 1_000;

export default async function daemon(v: CliValues): Promise<number> {
  // --listen > INVENTORY_DAEMON_LISTEN > daemon.listen (config file) > DEFAULTS.daemonListen, as every other key.
  const config = loadConfig(flagsFrom(v));
  const logger = createLogger(config.logLevel);
  // Fail fast on what no tick could fix: no key, no base URL, no database directory (exit 2).
  let warned = false;
  const key = () =>
    loadKey(process.env, (msg) => {
      if (!warned) logger.warn(msg);
      warned = true;
    });
  key();
  if (!config.baseUrl) throw new ConfigError("no base URL: set --base-url, INVENTORY_BASE_URL or baseUrl in the config file");
  checkDirectory(config.db);

  // The bearer token of GET /changes (feed.serve): read once, checked as the key is, never logged.
  const feedToken = config.feed.serve ? loadFeedToken(process.env, (msg) => logger.warn(msg)) : null;

  // publish.postgres.enabled: the connection string is required now (exit 2 without it), read once, never logged.
  const pgUrl = config.publish.postgres.enabled ? loadPostgresUrl(process.env, (msg) => logger.warn(msg)) : null;

  const d = new Daemon({ config, key, logger, feedToken, postgres: pgUrl ? { url: pgUrl } : null });
  const startup = d.start();
  let stopping: Promise<number> | null = null;
  let resolveStopped!: (code: number) => void;
  const stopped = new Promise<number>((resolve) => (resolveStopped = resolve));
  const onSignal = (sig: "SIGINT" | "SIGTERM") => {
    if (stopping) {
      process.stderr.write(`inventory-mirror daemon: second ${sig}, exiting now\n`);
      process.exit(exitCodeOfSignal(sig));
    }
    // SIGTERM is how a daemon is meant to stop (docker stop, systemd): a clean stop, 0.
    const code = sig === "SIGTERM" ? EXIT.ok : exitCodeOfSignal(sig);
    logger.info({ signal: sig }, "stopping: no new runs; interrupting the run in hand after its current transaction");
    const deadline = setTimeout(() => {
      logger.error(`the daemon did not stop within ${STOP_DEADLINE_MS / 1000} s; exiting (the database stays consistent)`);
      process.exit(1);
    }, STOP_DEADLINE_MS);
    deadline.unref();
    stopping = startup.then(
      () => d.stop(new Error(`received ${sig}`)).then(() => code),
      () => code,
    );
    void stopping.then((code) => {
      clearTimeout(deadline);
      resolveStopped(code);
    });
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);

  try {
    await startup;
  } catch (err) {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
    await d.stop().catch(() => undefined);
    throw err;
  }
  const code = await stopped;
  process.off("SIGTERM", onSignal);
  process.off("SIGINT", onSignal);
  // Everything is closed; if some handle still keeps the event loop alive, do not wait for it.
  setTimeout(() => {
    logger.warn("exiting with handles still open");
    process.exit(code);
  }, EXIT_GRACE_MS).unref();
  return code;
}
