/** A tiny terminal model for tests of what a person sees on a terminal. */

/**
 * The lines a terminal shows after `written`: \r returns to column 0, ESC[2K clears the
 * line, \n starts a new one; colour sequences are ignored.
 */
export function render(written: string): string[] {
  const lines: string[] = [""];
  let col = 0;
  const text = written.replace(/\x1b\[[0-9;]*m/g, "");
  for (let i = 0; i < text.length; i++) {
    if (text.startsWith("\x1b[2K", i)) {
      lines[lines.length - 1] = "";
      i += 3;
    } else if (text[i] === "\r") col = 0;
    else if (text[i] === "\n") {
      lines.push("");
      col = 0;
    } else {
      const cur = lines[lines.length - 1]!;
      lines[lines.length - 1] = cur.slice(0, col).padEnd(col) + text[i] + cur.slice(col + 1);
      col++;
    }
  }
  return lines;
}
