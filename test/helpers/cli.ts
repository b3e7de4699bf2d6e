/** Run the real CLI (bin/inventory-mirror.js, the built dist/) as a child process. */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

export const BIN = fileURLToPath(new URL("../../bin/inventory-mirror.js", import.meta.url));

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The child's environment: ours without any INVENTORY_* variable, plus `env`. */
export function cliEnv(env: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("INVENTORY_") && !k.startsWith("VITEST") && v !== undefined) base[k] = v;
  for (const [k, v] of Object.entries(env)) if (v !== undefined) base[k] = v;
  return base;
}

export function spawnCli(args: string[], opts: { env?: Record<string, string | undefined>; cwd?: string } = {}): ChildProcess {
  return spawn(process.execPath, [BIN, ...args], { env: cliEnv(opts.env), cwd: opts.cwd, stdio: ["ignore", "pipe", "pipe"] });
}

export function runCli(args: string[], opts: { env?: Record<string, string | undefined>; cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, opts);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d) => (stdout += d));
    child.stderr!.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`CLI ${args.join(" ")} timed out\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, opts.timeoutMs ?? 110_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
