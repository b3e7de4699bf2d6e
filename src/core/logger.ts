/**
 * pino, writing JSON lines to stderr (stdout is for the command's own output).
 * Two layers keep the key out: path redaction for every place a header or the key
 * could sit in a logged object, and a stream hook that scrubs the key's bytes
 * from every line before it is written, whatever path it came by.
 */
import { pino, type Logger, type LevelWithSilent } from "pino";
import { redactSecrets } from "./secret.js";

export type { Logger };

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/** Every object path where an Authorization header or the key could appear. */
const REDACT_PATHS = [
  "authorization",
  "Authorization",
  "apiKey",
  "key",
  "headers.authorization",
  "headers.Authorization",
  "*.headers.authorization",
  "*.headers.Authorization",
  "*.*.headers.authorization",
  "req.headers.authorization",
  "request.headers.authorization",
  "options.headers.authorization",
  "err.config.headers.authorization",
  "err.cause.headers.authorization",
  "err.request.headers.authorization",
  "*.apiKey",
  "*.key",
];

export function createLogger(level: LevelWithSilent = "info", destination: NodeJS.WritableStream = process.stderr): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
      hooks: { streamWrite: (line: string) => redactSecrets(line) },
      serializers: { err: pino.stdSerializers.err },
    },
    destination as pino.DestinationStream,
  );
}
