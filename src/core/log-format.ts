/**
 * Log lines for a person at a terminal. pino writes JSON lines; when stderr is a terminal
 * each one is rewritten here as
 *
 *   14:03:07.412 WARN  SKU failed: detail (SKU …): HTTP 503  skuId=… endpoint=detail status=503
 *
 * (local time, level, message, then the other fields as key=value), and printed above the
 * progress line instead of through it (terminal.ts LiveLine). Not on a terminal, the JSON
 * lines are written unchanged. Every piece of text goes through `forTerminal` and onto one
 * line: a log line may quote server text, which must neither drive the terminal nor forge a
 * line of its own.
 */
import { redactSecrets } from "./secret.js";
import { forTerminal, type LiveLine } from "./terminal.js";

const LEVELS: Record<number, { label: string; colour: string }> = {
  10: { label: "TRACE", colour: "\x1b[2m" },
  20: { label: "DEBUG", colour: "\x1b[2m" },
  30: { label: "INFO ", colour: "\x1b[36m" },
  40: { label: "WARN ", colour: "\x1b[33m" },
  50: { label: "ERROR", colour: "\x1b[31m" },
  60: { label: "FATAL", colour: "\x1b[1;31m" },
};
const RESET = "\x1b[0m";
const DIM = "\x1b[2m";

/** Fields every line has, shown in their own places or not at all. */
const OWN_FIELDS = new Set(["level", "time", "pid", "hostname", "msg"]);

export interface LogFormat {
  /** Colour the level and the fields (a terminal that has not asked for NO_COLOR). */
  colour: boolean;
}

/** One pino JSON line (with or without its newline) as one human-readable line ending in a newline. */
export function formatLogLine(json: string, format: LogFormat): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return `${oneLine(json.trimEnd())}\n`;
  }
  if (entry === null || typeof entry !== "object") return `${oneLine(json.trimEnd())}\n`;
  const level = LEVELS[entry.level as number] ?? { label: String(entry.level).toUpperCase().padEnd(5), colour: "" };
  const time = typeof entry.time === "number" ? clock(entry.time) : "";
  const fields = Object.entries(entry)
    .filter(([k, v]) => !OWN_FIELDS.has(k) && v !== undefined)
    .map(([k, v]) => `${oneLine(k)}=${fieldValue(v)}`)
    .join(" ");
  const label = format.colour && level.colour ? `${level.colour}${level.label}${RESET}` : level.label;
  const rest = fields ? `  ${format.colour ? `${DIM}${fields}${RESET}` : fields}` : "";
  return `${time ? `${time} ` : ""}${label} ${oneLine(String(entry.msg ?? ""))}${rest}\n`;
}

/**
 * A pino destination that formats each line and prints it above `line`'s live line. The JSON
 * was scrubbed of the key already (logger.ts); the text is scrubbed again after parsing, in
 * case an escape in the JSON spelled the key in a way the first pass could not see.
 */
export function prettyDestination(line: LiveLine, format: LogFormat): { write(chunk: string): void } {
  return {
    write: (chunk) => {
      let text = "";
      for (const l of chunk.split("\n")) if (l) text += formatLogLine(l, format);
      if (text) line.print(redactSecrets(text));
    },
  };
}

/** HH:MM:SS.mmm, local time. */
function clock(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

/** A field's value: bare when it is a plain word or number, JSON otherwise; an error as "Type: message". */
function fieldValue(v: unknown): string {
  if (v !== null && typeof v === "object" && typeof (v as { message?: unknown }).message === "string" && typeof (v as { type?: unknown }).type === "string") {
    const e = v as { type: string; message: string };
    return oneLine(JSON.stringify(`${e.type}: ${e.message}`));
  }
  if (typeof v === "string") return /^[\w.:/@+-]+$/.test(v) ? oneLine(v) : oneLine(JSON.stringify(v));
  return oneLine(JSON.stringify(v) ?? String(v));
}

/** Terminal-safe and on one line: control characters made visible, line breaks and tabs as \n and \t. */
function oneLine(text: string): string {
  return forTerminal(text).replace(/\r?\n/g, "\\n").replace(/\t/g, "\\t");
}
