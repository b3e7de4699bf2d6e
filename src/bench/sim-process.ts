/**
 * The bench's simulator, in a process of its own: exactly what `inventory-mirror simulate`
 * runs (startSimulator, the same server, model and quota), plus one thing the command has
 * no flag for: `settle` on stdin settles every projection (model.settle(), as
 * test/e2e/incremental-scale.test.ts does before it measures call economy).
 *
 *   node dist/bench/sim-process.js --skus 20000 --seed 7 [--quota-rps 100] [--history 12]
 *   stdout: one JSON line {"baseUrl": ...} when listening, then one JSON line per command.
 *   stdin:  "settle" | "stop"  (SIGTERM stops it too)
 *
 * The key is INVENTORY_API_KEY (required): the bench chooses it, so nothing is parsed from text.
 */
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { startSimulator } from "../simulator/index.js";

const { values } = parseArgs({
  options: {
    skus: { type: "string" },
    seed: { type: "string" },
    history: { type: "string" },
    "quota-rps": { type: "string" },
  },
});
const apiKey = process.env.INVENTORY_API_KEY;
if (!apiKey) {
  process.stderr.write("sim-process: set INVENTORY_API_KEY\n");
  process.exit(2);
}
const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
const rps = num(values["quota-rps"]);
const t0 = Date.now();
const sim = await startSimulator({
  apiKey,
  port: 0,
  ...(values.skus ? { skus: num(values.skus)! } : {}),
  ...(values.seed ? { seed: num(values.seed)! } : {}),
  ...(values.history ? { historyDepth: num(values.history)! } : {}),
  quota: rps ? { requestsPerSecond: rps } : null,
});
const out = (o: unknown) => process.stdout.write(JSON.stringify(o) + "\n");
out({ baseUrl: sim.baseUrl, skus: sim.model.size().skus, rows: sim.model.size().rows, generatedMs: Date.now() - t0 });

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await sim.close();
  process.exit(0);
};
process.once("SIGTERM", () => void stop());
process.once("SIGINT", () => void stop());
const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const cmd = line.trim();
  if (cmd === "settle") out({ settled: sim.model.settle() });
  else if (cmd === "stop") void stop();
  else out({ error: `unknown command ${JSON.stringify(cmd)}` });
});
rl.on("close", () => void stop());
