/**
 * pino, writing JSON lines to stderr (stdout is for the command's own output); when stderr
 * is a terminal, the same lines formatted for a person and printed above the progress line
 * (log-format.ts).
 * Three layers keep the key out:
 * 1. every logged object (and child binding) is first turned into plain data
 *    (`toLoggable`): errors with their whole `cause` chain, Headers, Request/Response,
 *    URLs, Maps; any field named like a credential (authorization, cookie, *key, *token,
 *    *secret, *password) becomes "[redacted]" at any depth;
 * 2. pino's path redaction for the usual places (belt and braces: after step 1 it only
 *    ever sees plain objects, which it can clone safely; a class instance such as a
 *    fetch Request made it throw);
 * 3. a stream hook that scrubs the key's bytes and any "Bearer <token>" from every line
 *    before it is written, whatever path it came by (a message string, an array of raw
 *    header pairs, a server's echo inside a response dump).
 * Logging never throws: a value that cannot be converted is replaced by a placeholder.
 */
import { pino, type Logger, type LevelWithSilent } from "pino";
import { prettyDestination } from "./log-format.js";
import { isSecretName, redactSecrets, REDACTED, Secret } from "./secret.js";
import { LiveLine, stderrLine } from "./terminal.js";

export type { Logger };

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/** Usual places of an Authorization header or the key. Step 1 already covers every depth. */
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
  const onTerminal = (destination as NodeJS.WriteStream).isTTY === true;
  const out = onTerminal ? prettyDestination(destination === process.stderr ? stderrLine : new LiveLine(destination), { colour: !process.env.NO_COLOR }) : destination;
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: REDACT_PATHS, censor: REDACTED },
      formatters: {
        log: (obj) => toLoggable(obj, 0, new WeakSet()) as Record<string, unknown>,
        bindings: (b) => toLoggable(b, 0, new WeakSet()) as Record<string, unknown>,
      },
      // toLoggable already turned errors into plain data (type, message, stack, cause chain).
      serializers: { err: (e: unknown) => e },
      hooks: { streamWrite: (line: string) => redactSecrets(line) },
    },
    out as pino.DestinationStream,
  );
}

/** Deeper than this, a logged value is summarised: logs are for people, and depth costs. */
const MAX_DEPTH = 8;
const MAX_ITEMS = 200;

/**
 * A logged value as plain JSON-able data, with credential-named fields redacted at any
 * depth. Class instances are read through their own getters (never cloned, which is what
 * broke pino's redaction), errors keep message, stack, code, own fields and `cause`.
 */
function toLoggable(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  try {
    if (value === null || typeof value !== "object") {
      if (typeof value === "bigint") return value.toString();
      if (typeof value === "function" || typeof value === "symbol") return undefined;
      return value;
    }
    if (value instanceof Secret) return REDACTED;
    if (seen.has(value)) return "[circular]";
    if (depth >= MAX_DEPTH) return Array.isArray(value) ? `[array of ${value.length}]` : "[object]";
    seen.add(value);
    const next = (v: unknown) => toLoggable(v, depth + 1, seen);

    if (value instanceof Error) {
      const out: Record<string, unknown> = { type: value.name, message: value.message };
      if (value.stack) out.stack = value.stack;
      for (const [k, v] of Object.entries(value)) if (!(k in out)) out[k] = isSecretName(k) ? REDACTED : next(v);
      if ("code" in value && out.code === undefined) out.code = next(value.code);
      if (value.cause !== undefined) out.cause = next(value.cause);
      if (value instanceof AggregateError) out.errors = value.errors.slice(0, MAX_ITEMS).map(next);
      return out;
    }
    if (typeof Headers !== "undefined" && value instanceof Headers) return headersObject(value);
    if (typeof Request !== "undefined" && value instanceof Request) return { method: value.method, url: safeUrl(value.url), headers: headersObject(value.headers) };
    if (typeof Response !== "undefined" && value instanceof Response) return { status: value.status, url: safeUrl(value.url), headers: headersObject(value.headers) };
    if (value instanceof URL) return safeUrl(value.href);
    if (value instanceof Date) return Number.isNaN(value.getTime()) ? "Invalid Date" : value.toISOString();
    if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return `[${value.byteLength} bytes]`;
    if (value instanceof Map) return next(Object.fromEntries([...value.entries()].slice(0, MAX_ITEMS).map(([k, v]) => [String(k), v])));
    if (value instanceof Set) return next([...value].slice(0, MAX_ITEMS));
    if (Array.isArray(value)) {
      const items = value.slice(0, MAX_ITEMS).map(next);
      if (value.length > MAX_ITEMS) items.push(`[+${value.length - MAX_ITEMS} more]`);
      return items;
    }
    if (typeof (value as { toJSON?: unknown }).toJSON === "function") return next((value as { toJSON(): unknown }).toJSON());
    const out: Record<string, unknown> = {};
    let n = 0;
    for (const [k, v] of Object.entries(value)) {
      if (++n > MAX_ITEMS) {
        out["[more]"] = `+${Object.keys(value).length - MAX_ITEMS} fields`;
        break;
      }
      out[k] = isSecretName(k) ? REDACTED : next(v);
    }
    return out;
  } catch {
    return "[unloggable value]";
  }
}

function headersObject(h: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  h.forEach((v, k) => {
    out[k] = isSecretName(k) ? REDACTED : v;
  });
  return out;
}

/** A URL without userinfo (a password in a URL is a credential too). */
function safeUrl(href: string): string {
  try {
    const u = new URL(href);
    if (u.username || u.password) {
      u.username = "";
      u.password = "";
    }
    return u.href;
  } catch {
    return href;
  }
}
