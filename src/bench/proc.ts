/**
 * Processes for the bench: the simulator in its own process, the real CLI in another, and
 * how each is measured from the outside.
 *
 * - Wall time: from spawn to exit, as a user waits for it (node's start-up included).
 * - CPU time of a child: this process's cutime + cstime (/proc/self/stat) before and after
 *   the child is reaped. The kernel adds a child's user and system time there when it is
 *   waited for, so the difference is exactly that child's CPU time (10 ms resolution), as
 *   long as no other child ends meanwhile (the bench runs one measured child at a time; the
 *   simulator lives on).
 * - Peak RSS of a child: VmHWM from /proc/<pid>/status, polled every 20 ms while it runs.
 *   VmHWM is the kernel's high-water mark, so the last value read (at most 20 ms before
 *   exit, when the process is closing its database) is the peak of the run.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const BIN = fileURLToPath(new URL("../../bin/inventory-mirror.js", import.meta.url));
const SIM_PROCESS = fileURLToPath(new URL("./sim-process.js", import.meta.url));
export const NAIVE = fileURLToPath(new URL("./naive.js", import.meta.url));
export const WRITE_PATH = fileURLToPath(new URL("./write-path.js", import.meta.url));

/** The bench's own key for its simulators (the simulator accepts the one in INVENTORY_API_KEY). */
export const KEY = "sim_bench_5c1e9a7f3b2d4e6f8a0b1c2d3e4f5a6b";

/** The environment of a child: ours without INVENTORY_* or NODE_OPTIONS, plus `extra`. */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("INVENTORY_") && k !== "NODE_OPTIONS" && v !== undefined) env[k] = v;
  return { ...env, ...extra };
}

/** Children's CPU time so far (ms): cutime + cstime of this process. */
function childrenCpuMs(): number {
  const stat = readFileSync("/proc/self/stat", "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // After "(comm) ": state is field 3, so field n is fields[n - 3]; cutime = 16, cstime = 17.
  const ticks = Number(fields[16 - 3]) + Number(fields[17 - 3]);
  return (ticks * 1000) / CLOCK_TICKS;
}
/** USER_HZ: 100 on every Linux this runs on (getconf CLK_TCK). */
const CLOCK_TICKS = 100;

function vmHwmKb(pid: number): number | null {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

export interface Measured {
  code: number | null;
  stdout: string;
  stderr: string;
  wallMs: number;
  cpuMs: number;
  peakRssKb: number;
  /** VmHWM (MB) once a second while it ran: how the peak was reached. */
  hwmTimelineMb: number[];
}

/** Run `node <args>` to completion and measure it. */
export function measure(nodeArgs: string[], env: NodeJS.ProcessEnv, timeoutMs = 15 * 60_000): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const cpu0 = childrenCpuMs();
    const t0 = performance.now();
    const child = spawn(process.execPath, nodeArgs, { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let peak = 0;
    const timeline: number[] = [];
    let nextSample = t0 + 1000;
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const poll = setInterval(() => {
      const v = child.pid ? vmHwmKb(child.pid) : null;
      if (v !== null) peak = Math.max(peak, v);
      if (performance.now() >= nextSample) {
        nextSample += 1000;
        timeline.push(Math.round(peak / 1024));
      }
    }, 20);
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`timed out after ${timeoutMs} ms: node ${nodeArgs.join(" ")}\n${stderr.slice(-2000)}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      const wallMs = performance.now() - t0;
      clearInterval(poll);
      clearTimeout(timer);
      resolve({ code, stdout, stderr, wallMs, cpuMs: childrenCpuMs() - cpu0, peakRssKb: peak, hwmTimelineMb: timeline });
    });
  });
}

/** `inventory-mirror sync` against `baseUrl` into `db`, measured; its --json result parsed. */
export async function syncCli(baseUrl: string, db: string, args: string[], nodeFlags: string[] = []) {
  const m = await measure([...nodeFlags, BIN, "sync", "--db", db, "--json", "--no-progress", "--log-level", "warn", ...args], childEnv({ INVENTORY_BASE_URL: baseUrl, INVENTORY_API_KEY: KEY }));
  if (m.code !== 0) throw new Error(`sync ${args.join(" ")} exited ${m.code}\n${m.stderr.slice(-3000)}`);
  const result = JSON.parse(m.stdout.trim().split("\n").pop()!) as SyncJson;
  return { ...m, result };
}

/** The fields of `sync --json` the bench reads. */
export interface SyncJson {
  status: string;
  skusListed: number;
  skusFetched: number;
  plan: Record<string, number>;
  historyRowsAdded: number;
  requests: number;
  requestsByEndpoint: Record<string, number>;
  responses429: number;
  durationMs: number;
}

export interface Simulator {
  baseUrl: string;
  pid: number;
  /** Admin request (never counted in the simulator's API stats). */
  admin<T = unknown>(path: string, method?: "GET" | "POST", body?: unknown): Promise<T>;
  /** Settle every projection (bench simulator only). */
  settle(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * A simulator in its own process. `cli`: the `inventory-mirror simulate` command itself;
 * otherwise the bench's sim-process (the same startSimulator, plus `settle`). `args`: more
 * flags (the `simulate` command's: quota shape, latency, faults).
 */
export async function startSimulator(o: { skus: number; seed: number; quotaRps?: number; cli: boolean; args?: string[] }): Promise<Simulator> {
  const flags = ["--skus", String(o.skus), "--seed", String(o.seed), ...(o.quotaRps ? ["--quota-rps", String(o.quotaRps)] : []), ...(o.args ?? [])];
  const args = o.cli ? [BIN, "simulate", "--port", "0", ...flags] : [SIM_PROCESS, ...flags];
  const child = spawn(process.execPath, args, { env: childEnv({ INVENTORY_API_KEY: KEY }), stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! });
  const waiting: Array<(line: string) => void> = [];
  const buffered: string[] = [];
  lines.on("line", (line) => {
    const w = waiting.shift();
    if (w) w(line);
    else buffered.push(line);
  });
  const nextLine = () =>
    new Promise<string>((resolve, reject) => {
      const b = buffered.shift();
      if (b !== undefined) return resolve(b);
      waiting.push(resolve);
      child.once("exit", (code) => reject(new Error(`simulator exited (${code}) before answering`)));
    });
  let baseUrl = "";
  for (;;) {
    const line = await nextLine();
    if (o.cli) {
      // "  base URL   http://127.0.0.1:PORT"
      const m = /base URL\s+(\S+)/.exec(line);
      if (m) baseUrl = m[1]!;
      if (baseUrl && /^\s*$/.test(line)) break;
    } else {
      baseUrl = (JSON.parse(line) as { baseUrl: string }).baseUrl;
      break;
    }
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    baseUrl,
    pid: child.pid!,
    async admin<T>(path: string, method: "GET" | "POST" = "GET", body?: unknown): Promise<T> {
      const res = await fetch(`${baseUrl}/_sim${path}`, {
        method,
        headers: { authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (!res.ok) throw new Error(`admin ${method} ${path}: HTTP ${res.status} ${await res.text()}`);
      return (await res.json()) as T;
    },
    async settle(): Promise<number> {
      if (o.cli) throw new Error("settle needs the bench simulator");
      child.stdin!.write("settle\n");
      return (JSON.parse(await nextLine()) as { settled: number }).settled;
    },
    async stop(): Promise<void> {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
