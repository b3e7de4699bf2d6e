/**
 * Logs on a terminal, through the real CLI: `sync` run under `script` (util-linux), which
 * gives it a pseudo-terminal, so stderr is a TTY and the live progress line is drawn. What
 * the terminal shows (helpers/terminal.ts `render`) must be human-readable log lines, none
 * torn by the progress line, and no JSON. (Not on a terminal, logs stay JSON lines: every
 * other e2e test reads them that way.)
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { BIN, cliEnv } from "../helpers/cli.js";
import { withDb } from "../helpers/mirror-state.js";
import { render } from "../helpers/terminal.js";

const KEY = "sim_e2e_tty_5d4c3b2a1f0e9d8c7b6a5f4e";
const hasScript = (() => {
  try {
    execFileSync("script", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

let sim: RunningSimulator;
let dir: string;
beforeAll(async () => {
  sim = await startSimulator({ seed: 41, skus: 40, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-tty-"));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Run the CLI with a pseudo-terminal as its stdout and stderr; resolve with everything the terminal received. */
function underScript(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const quote = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  const command = [process.execPath, BIN, ...args].map(quote).join(" ");
  const child = spawn("script", ["-qec", command, "/dev/null"], { env: cliEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

const LOG_LINE = /^\d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) /;
const PROGRESS = /SKUs \d+\/(\d+|\?)/;

describe.skipIf(!hasScript)("sync on a terminal", () => {
  it("prints human-readable log lines above the progress line, never through it, and no JSON", async () => {
    const db = join(dir, "tty.db");
    // Paced so the run lasts a couple of seconds: the progress line is drawn between log lines.
    const r = await underScript(["sync", "--full", "--log-level", "debug", "--max-rps", "40"], {
      INVENTORY_API_KEY: KEY,
      INVENTORY_BASE_URL: sim.baseUrl,
      INVENTORY_DB: db,
      NO_COLOR: "1",
    });
    expect(r.code, r.output).toBe(0);
    const shown = render(r.output);
    const logLines = shown.filter((l) => LOG_LINE.test(l));
    expect(
      logLines.some((l) => /^\S+ INFO {2}sync started {2}runId=1 mode=full/.test(l)),
      shown.join("\n"),
    ).toBe(true);
    expect(logLines.filter((l) => /DEBUG SKU saved {2}skuId=[0-9a-f-]{36} /.test(l))).toHaveLength(40);
    expect(shown.filter((l) => l.includes('{"level"'))).toEqual([]);
    // Torn: a log line that starts in the middle of a progress line, or a progress line with a log line's text.
    expect(shown.filter((l) => PROGRESS.test(l) && !/^SKUs /.test(l))).toEqual([]);
    expect(shown.filter((l) => /^SKUs /.test(l) && /\d\d:\d\d:\d\d\.\d{3}/.test(l))).toEqual([]);
    // Log lines did come while the progress line was on screen, and it was drawn last at 40/40.
    const raw = r.output.replace(/\x1b\[[0-9;]*m/g, "");
    expect(raw.lastIndexOf("DEBUG SKU saved")).toBeGreaterThan(raw.indexOf("SKUs "));
    expect(shown.filter((l) => /^SKUs /.test(l)).at(-1)).toMatch(/^SKUs 40\/40 \(100\.0%\)/);
  });
});

describe.skipIf(!hasScript).each([
  // A SKU removed while its own history is walked (pages of 8): its worker finds it gone (404). Whether the list's walk
  // was still under way then (and so walked again) is a race, not asserted.
  { writes: { historyRemovals: 1 }, kind: "history-removal", skus: 29, vanished: 1, walkedAgain: null, shown: "30/30", before: "29/30 (96.7%)" },
  // Offset cursors: a SKU created between two list pages moves the count from 30 to 31, the list is walked again, and the run fetches 31.
  { writes: { listCreations: 1 }, kind: "list-creation", skus: 31, vanished: 0, walkedAgain: 1, shown: "31/31", before: "31/30 (103.3%)" },
] as const)("sync on a terminal, a $kind during the run", ({ writes, kind, skus, vanished, walkedAgain, shown, before }) => {
  let moving: RunningSimulator;
  beforeAll(async () => {
    moving = await startSimulator({ seed: 31, skus: 30, historyDepth: 30, apiKey: KEY, variance: { cursorPosition: "offset", maxPageSize: 8 }, liveWrites: writes });
  });
  afterAll(async () => {
    await moving?.close();
  });

  it(`ends the progress line at 100 %: ${shown}, every SKU the run handled (a SKU found gone included) of what it queued`, async () => {
    const db = join(dir, `${kind}.db`);
    const r = await underScript(["sync", "--full"], { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: moving.baseUrl, INVENTORY_DB: db, NO_COLOR: "1" });
    expect(r.code, r.output).toBe(0);
    expect(moving.liveWritesMade().map((w) => w.kind)).toEqual([kind]);
    expect(moving.groundTruth().skus).toHaveLength(skus);
    const count = (sql: string) => withDb(db, (d) => (d.prepare(sql).get() as { n: number }).n);
    expect(count("SELECT count(*) AS n FROM sync_journal WHERE kind = 'sku_vanished'")).toBe(vanished);
    if (walkedAgain !== null) expect(count("SELECT count(*) AS n FROM sync_journal WHERE message LIKE 'the list changed under its walk%'")).toBe(walkedAgain);
    // Before, the line ended at `before`: a SKU found gone was not counted done, and the total stayed the first page's count.
    const lines = render(r.output);
    expect(lines.filter((l) => /^SKUs /.test(l)).at(-1), before).toMatch(new RegExp(`^SKUs ${shown} \\(100\\.0%\\)`));
  });
});
