#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm install` through the "prepare" script).
import { existsSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
// A sync's garbage is mostly parsed responses that die young. After a few scavenges V8 starts
// allocating them straight into the old generation ("pretenuring"), where they die as garbage
// that only full GCs reclaim, and the heap grows to ~4x the 16 MB live set. Off, a 20,000-SKU
// sync peaked at 157 MB RSS instead of 195 MB, same CPU time (BENCHMARKS.md, scenario 5).
// This flag is read at allocation time, so setting it here, before the CLI loads, takes effect.
setFlagsFromString("--no-allocation-site-pretenuring");
const entry = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("inventory-mirror: dist/ is missing; run 'npm install' (or 'npm run build') in the repository first\n");
  process.exit(2);
}
await import(entry.href);
