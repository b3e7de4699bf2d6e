/**
 * `inventory-mirror changes [--since SEQ] [--follow] [--json]`: the change feed (the outbox
 * every committed unit of work appends to, store/outbox.ts), oldest first. Read-only, no key:
 * it works while the daemon or a `sync` writes. With --follow it keeps printing the changes
 * of each unit as it commits, until SIGINT/SIGTERM (exit 0). Shapes: docs/schema.md.
 */
import { openReadOnly } from "../../analysis/open.js";
import { loadConfig } from "../../core/config.js";
import { DEFAULTS } from "../../core/defaults.js";
import { ConfigError, StoreError } from "../../core/errors.js";
import { forTerminal } from "../../core/terminal.js";
import type { DB } from "../../store/db.js";
import { type Change, feedGapAfter, readChanges, waitForChanges } from "../../store/outbox.js";
import { flagsFrom } from "../common.js";
import type { CliValues } from "../options.js";

export default async function changes(v: CliValues): Promise<number> {
  const config = loadConfig(flagsFrom(v));
  const since = parseSince(v.since);
  const db = openReadOnly(config.db);
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  try {
    if (feedGapAfter(db, since)) {
      throw new StoreError(
        `the changes after seq ${since} are no longer all in the feed (retention pruned them); ` + "start again from a copy of the tables, or register the consumer so retention waits for it",
      );
    }
    const print = (c: Change) => process.stdout.write(`${v.json ? JSON.stringify(c) : forTerminal(describeChange(c))}\n`);
    await printFrom(db, since, v.follow === true, print, ac.signal);
    return 0;
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    db.close();
  }
}

/** Print every change after `since`; with `follow`, then wait for the next ones until `signal` aborts. */
async function printFrom(db: DB, since: number, follow: boolean, print: (c: Change) => void, signal: AbortSignal): Promise<void> {
  let after = since;
  while (!signal.aborted) {
    const page = follow
      ? await waitForChanges(db, after, { limit: DEFAULTS.feedPageSize, timeoutMs: DEFAULTS.feedLongPollSeconds * 1000, intervalMs: DEFAULTS.feedPollIntervalMs, signal })
      : readChanges(db, after, DEFAULTS.feedPageSize);
    for (const c of page) print(c);
    if (page.length) after = page[page.length - 1]!.seq;
    if (!follow && page.length < DEFAULTS.feedPageSize) return;
  }
}

function parseSince(raw: unknown): number {
  if (raw === undefined) return 0;
  const s = String(raw);
  if (!/^\d+$/.test(s) || !Number.isSafeInteger(Number(s))) throw new ConfigError(`--since: expected a sequence number (0 or more), got "${s}"`);
  return Number(s);
}

/** One change on one line, for a terminal: seq, run, entity and id, what changed (before → after). */
function describeChange(c: Change): string {
  const what = c.sku && c.entity !== "history" ? `${c.entity} ${c.sku}/${c.id}` : `${c.entity} ${c.id}`;
  let detail: string;
  if (c.entity === "history") detail = `${((c.after?.rows ?? c.before?.rows) as unknown[] | undefined)?.length ?? 0} row(s)`;
  else if (c.change === "created" || c.change === "removed") detail = "";
  else
    detail = Object.keys(c.after ?? {})
      .map((k) => `${k} ${JSON.stringify(c.before?.[k] ?? null)} → ${JSON.stringify(c.after?.[k] ?? null)}`)
      .join(", ");
  return `#${c.seq} run ${c.run} ${c.at} ${what} ${c.change}${detail ? `: ${detail}` : ""}`;
}
