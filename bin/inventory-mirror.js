#!/usr/bin/env node
// The compiled CLI lives in dist/ (built by `npm install` through the "prepare" script).
import { existsSync } from "node:fs";
const entry = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("inventory-mirror: dist/ is missing; run 'npm install' (or 'npm run build') in the repository first\n");
  process.exit(2);
}
await import(entry.href);
