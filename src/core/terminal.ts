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

/** Erase the cursor's line and return to its start. */
const CLEAR_LINE = "\r\x1b[2K";

/**
 * One live line at the bottom of a terminal (the sync's progress line) and lines printed
 * above it (log lines) without tearing it: a print erases the live line, writes its own
 * lines, and draws the live line again below them.
 */
export class LiveLine {
  private text: string | null = null;
  constructor(private readonly out: NodeJS.WritableStream) {}

  /** Draw (or redraw) the live line. */
  show(text: string): void {
    this.text = text;
    this.out.write(`${CLEAR_LINE}${text}`);
  }

  /** Write whole lines (ending with a newline) above the live line. */
  print(lines: string): void {
    this.out.write(this.text === null ? lines : `${CLEAR_LINE}${lines}${this.text}`);
  }

  /** Leave the live line where it is (as ordinary output) and end it with a newline. */
  end(): void {
    if (this.text === null) return;
    this.text = null;
    this.out.write("\n");
  }
}

/** The live line of this process's stderr, shared by the progress line and the logger. */
export const stderrLine = new LiveLine(process.stderr);
