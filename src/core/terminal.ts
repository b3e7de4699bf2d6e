/**
 * Text for a human's terminal. Server text (names, notes, error bodies) may carry control
 * characters: ESC sequences that retitle the window, clear the screen or colour a fake
 * message, a BEL, a carriage return that overwrites a line, bidirectional overrides that
 * reorder what is shown. Every such character is shown as a visible escape instead
 * (`\x1b`, `\u202e`); newlines and tabs stay. JSON output and the database keep the text
 * as sent (JSON escapes control characters itself).
 */

/** C0 controls except tab and newline, DEL, C1 controls, and the Unicode bidirectional controls. */
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function forTerminal(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}
