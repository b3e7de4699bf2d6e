/**
 * docs/architecture.md draws the rooms of src/ and the arrows between them; .dependency-cruiser.cjs
 * checks them (npm run lint:deps). These tests keep the two saying the same, and keep every
 * folder of src/ a room with its rule.
 */
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url);
const depcruise = createRequire(import.meta.url)("../../.dependency-cruiser.cjs") as {
  forbidden: { name: string; from: { path?: string }; to: { path?: string; pathNot?: string } }[];
};

/** Each room's allowed imports as the layering rules say (`^src/(room|a|b)/` in `to.pathNot`). */
function rulesAllow(): Map<string, string[]> {
  const allow = new Map<string, string[]>();
  for (const rule of depcruise.forbidden) {
    const from = /^\^src\/(\w+)\/$/.exec(rule.from.path ?? "");
    const notTo = /^\^src\/\(([\w|]+)\)\/$/.exec(rule.to.pathNot ?? "");
    if (!from || !notTo || rule.to.path !== "^src/") continue;
    const room = from[1]!;
    allow.set(
      room,
      notTo[1]!
        .split("|")
        .filter((r) => r !== room)
        .sort(),
    );
  }
  return allow;
}

/** The table's rows: room -> { mayImport, importedBy }, rooms named as `src/x/` in backticks. */
function tableRows(): Map<string, { mayImport: string[]; importedBy: string[] }> {
  const rooms = (cell: string) => [...cell.matchAll(/`(\w+)`/g)].map((m) => m[1]!).sort();
  const rows = new Map<string, { mayImport: string[]; importedBy: string[] }>();
  for (const line of readFileSync(new URL("docs/architecture.md", root), "utf8").split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const room = /^`src\/(\w+)\/`$/.exec(cells[1] ?? "");
    if (!room || cells.length !== 6) continue;
    rows.set(room[1]!, { mayImport: rooms(cells[3]!), importedBy: cells[4] === "every room" ? ["*"] : rooms(cells[4]!) });
  }
  return rows;
}

describe("docs/architecture.md and the dependency rules", () => {
  const allow = rulesAllow();
  const rows = tableRows();

  it("every folder of src/ is a room with a rule and a row, and no file sits directly in src/", () => {
    const entries = readdirSync(new URL("src/", root), { withFileTypes: true });
    const folders = entries
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    expect(entries.filter((e) => !e.isDirectory()).map((e) => e.name)).toEqual([]);
    expect([...allow.keys()].sort()).toEqual(folders);
    expect([...rows.keys()].sort()).toEqual(folders);
  });

  it("each room's 'may import' is what its rule allows", () => {
    for (const [room, allowed] of allow) expect(rows.get(room)?.mayImport, room).toEqual(allowed);
  });

  it("each room's 'imported by' is every room whose rule allows importing it", () => {
    for (const room of allow.keys()) {
      const importers = [...allow]
        .filter(([, allowed]) => allowed.includes(room))
        .map(([r]) => r)
        .sort();
      const everyOther = [...allow.keys()].filter((r) => r !== room).sort();
      const said = rows.get(room)?.importedBy;
      expect(said?.[0] === "*" ? everyOther : said, room).toEqual(importers);
    }
  });
});
