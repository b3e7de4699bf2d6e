/**
 * A .cpuprofile (node --cpu-prof) summarised: self time by source file (node_modules
 * packages folded into one line each) and the functions with the most self time.
 *
 *   node dist/bench/profile.js bench/profiles/CPU.*.cpuprofile
 */
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  durationMs: number;
  samples: number;
  byFile: Array<{ name: string; share: number }>;
  byFunction: Array<{ name: string; share: number }>;
}

function fileOf(url: string, fn: string): string {
  if (!url) return fn || "(native)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return `npm:${pkg[1]}`;
  const dist = /\/dist\/(.*)$/.exec(url);
  if (dist) return `dist/${dist[1]}`;
  return url;
}

export function summarise(path: string, top = 15): ProfileSummary {
  const p = JSON.parse(readFileSync(path, "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfFile = new Map<string, number>();
  const selfFn = new Map<string, number>();
  for (const id of p.samples) {
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    const file = fileOf(url, functionName);
    selfFile.set(file, (selfFile.get(file) ?? 0) + 1);
    const fn = `${functionName || "(anonymous)"} ${url ? `${file}:${lineNumber + 1}` : ""}`.trim();
    selfFn.set(fn, (selfFn.get(fn) ?? 0) + 1);
  }
  const total = p.samples.length || 1;
  const rank = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, c]) => ({ name, share: c / total }));
  return { durationMs: (p.endTime - p.startTime) / 1000, samples: p.samples.length, byFile: rank(selfFile), byFunction: rank(selfFn) };
}

export function formatSummary(s: ProfileSummary): string {
  const pct = (x: number) => `${(100 * x).toFixed(1).padStart(5)}%`;
  return [
    `${s.samples} samples over ${(s.durationMs / 1000).toFixed(1)} s`,
    "self time by file:",
    ...s.byFile.map((r) => `  ${pct(r.share)}  ${r.name}`),
    "self time by function:",
    ...s.byFunction.map((r) => `  ${pct(r.share)}  ${r.name}`),
  ].join("\n");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  for (const f of process.argv.slice(2)) process.stdout.write(`${f}\n${formatSummary(summarise(f))}\n`);
}
