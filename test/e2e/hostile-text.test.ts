/**
 * Server text reaches no terminal raw (issue 11, A4). The simulator wraps every name in
 * sequences that retitle the window (OSC 0 … BEL), clear the screen and colour what follows
 * (hostile-text.ts). The real CLI's human output of check, sync, status, stock and reconcile
 * shows them as visible escapes; --json and the database keep the text as sent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { HOSTILE_PREFIX } from "../../src/simulator/hostile-text.js";
import { runCli } from "../helpers/cli.js";

const KEY = "sim_e2e_hostile_text_7a6b5c4d3e2f1a0b9c8d";
/** ESC, BEL, CR and the C1 controls: none may reach a terminal. */
const RAW_CONTROL = /[\u0007\u001b\r\u0080-\u009f]/;
let sim: RunningSimulator;
let dir: string;
let db: string;
let env: Record<string, string>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 31, skus: 6, historyDepth: 5, apiKey: KEY, hostileText: { controlChars: true } });
  dir = mkdtempSync(join(tmpdir(), "im-hostile-text-"));
  db = join(dir, "m.db");
  env = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db };
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

function firstSku(): { id: string; code: string } {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare("SELECT id, code FROM skus ORDER BY code LIMIT 1").get() as { id: string; code: string };
  } finally {
    d.close();
  }
}

describe("control characters in server text", () => {
  it("sync stores names as sent; its human output has no raw control character", async () => {
    const r = await runCli(["sync", "--full", "--no-progress"], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toMatch(RAW_CONTROL);
    const d = new Database(db, { readonly: true });
    try {
      const names = d.prepare("SELECT name FROM skus").all() as { name: string }[];
      expect(names.length).toBeGreaterThan(0);
      for (const n of names) expect(n.name.startsWith(HOSTILE_PREFIX)).toBe(true);
    } finally {
      d.close();
    }
  });

  it("check shows the workspace name escaped, and --json keeps it as sent", async () => {
    const human = await runCli(["check"], { env });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).not.toMatch(RAW_CONTROL);
    expect(human.stdout).toContain("\\x1b]0;pwned\\x07\\x1b[2J");
    const json = await runCli(["check", "--json"], { env });
    expect(JSON.parse(json.stdout).name.startsWith(HOSTILE_PREFIX)).toBe(true);
  });

  it("status, stock and reconcile print no raw control character", async () => {
    const sku = firstSku();
    for (const args of [["status"], ["stock", "--at", new Date().toISOString()], ["stock", "--at", new Date().toISOString(), "--sku", sku.id], ["reconcile", "--sku", sku.id]]) {
      const r = await runCli(args, { env });
      expect([0, 1], `${args.join(" ")}: ${r.stderr}`).toContain(r.code);
      expect(r.stdout + r.stderr, args.join(" ")).not.toMatch(RAW_CONTROL);
    }
  });
});
