/**
 * A hostile server's text (issue 11, A4): names that carry terminal control sequences, and
 * a server that echoes the request's Authorization header into successful fields. Applied
 * to a copy of each successful response body; the model (and so ground truth) is untouched.
 */

export interface HostileTextOptions {
  /** Wrap every `name` in sequences that retitle the window (OSC 0), clear the screen and colour text. */
  controlChars?: boolean;
  /** Append the request's Authorization header to every `name` (and to the workspace's name). */
  echoAuthorization?: boolean;
  /**
   * Write every character of every string (property names too) as a `\uXXXX` escape: valid JSON, the same
   * values, and none of their bytes as themselves (an echoed key appears in no form but escaped). JSON allows
   * any character so; encoders escape some by default (System.Text.Json: `+`, `<`, `&`, non-ASCII).
   */
  escapeStrings?: boolean;
}

/** What `controlChars` puts before and after a name: retitle, bell, clear screen, red; then reset. */
export const HOSTILE_PREFIX = "\u001b]0;pwned\u0007\u001b[2J\u001b[31m";
const HOSTILE_SUFFIX = "\u001b[0m\r";

export function hostileBody(body: unknown, o: HostileTextOptions, authorization: string | undefined): unknown {
  if (!o.controlChars && !o.echoAuthorization) return body;
  const copy = JSON.parse(JSON.stringify(body)) as unknown;
  const rewrite = (name: string) => (o.controlChars ? HOSTILE_PREFIX : "") + name + (o.echoAuthorization && authorization ? ` (${authorization})` : "") + (o.controlChars ? HOSTILE_SUFFIX : "");
  visit(copy, rewrite);
  return copy;
}

function visit(v: unknown, rewrite: (name: string) => string): void {
  if (Array.isArray(v)) {
    for (const x of v) visit(x, rewrite);
    return;
  }
  if (v === null || typeof v !== "object") return;
  const o = v as Record<string, unknown>;
  for (const [k, x] of Object.entries(o)) {
    if (k === "name" && typeof x === "string") o[k] = rewrite(x);
    else visit(x, rewrite);
  }
}

/** `json` (JSON text) with every string's every UTF-16 unit written as a `\uXXXX` escape (HostileTextOptions.escapeStrings). */
export function escapeEveryCharacter(json: string): string {
  return json.replace(/"((?:[^"\\]|\\.)*)"/g, (_whole, inner: string) => {
    const value = JSON.parse(`"${inner}"`) as string;
    let out = "";
    for (let i = 0; i < value.length; i++) out += `\\u${value.charCodeAt(i).toString(16).padStart(4, "0")}`;
    return `"${out}"`;
  });
}
