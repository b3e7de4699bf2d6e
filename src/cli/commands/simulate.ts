/** `inventory-mirror simulate`: the built-in API simulator, in the foreground. */
import { ConfigError } from "../../core/errors.js";
import { parseFaultSpec, RETRY_AFTER_FORMS, startSimulator, type RetryAfterForm, type SimulatorOptions } from "../../simulator/index.js";
import { profileOptions } from "../../simulator/profiles.js";
import type { CliValues } from "../options.js";

function int(v: unknown, name: string, min = 0): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(String(v)) || n < min) throw new ConfigError(`--${name}: expected a whole number >= ${min}, got "${String(v)}"`);
  return n;
}
function num(v: unknown, name: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new ConfigError(`--${name}: expected a positive number, got "${String(v)}"`);
  return n;
}

/** N/S of --quota-window or --quota-sliding. */
function requestsPerWindow(value: string, flag: string): { requests: number; windowSeconds: number } {
  const m = /^(\d+)\/(\d+(?:\.\d+)?)$/.exec(value.trim());
  if (!m || Number(m[1]) < 1 || !(Number(m[2]) > 0)) throw new ConfigError(`--${flag}: expected N/S (requests per window of seconds), got "${value}"`);
  return { requests: Number(m[1]), windowSeconds: Number(m[2]) };
}

/** The mean gap between the server's stalls when --stall-ms gives none: a few stalls in a run of seconds. */
const DEFAULT_STALL_EVERY_MS = 1_000;

/** --quota-window, --quota-sliding, --quota-retry-after, --quota-other-client-rps, --latency-ms, --latency-jitter-ms, --latency-inbound-share, --stall-ms, --clock-skew-ms (after --profile and --quota-rps). */
function applyQuotaShape(opts: SimulatorOptions, v: CliValues): void {
  const window = v["quota-window"] as string | undefined;
  const sliding = v["quota-sliding"] as string | undefined;
  const given = ["quota-rps", "quota-window", "quota-sliding"].filter((k) => v[k] !== undefined);
  if (given.length > 1) throw new ConfigError(`${given.map((k) => `--${k}`).join(" and ")} are ${given.length} quotas: give one`);
  if (window !== undefined) opts.quota = { kind: "fixed-window", ...requestsPerWindow(window, "quota-window") };
  if (sliding !== undefined) opts.quota = { kind: "sliding-window", ...requestsPerWindow(sliding, "quota-sliding") };
  const form = v["quota-retry-after"] as string | undefined;
  if (form !== undefined) {
    if (!RETRY_AFTER_FORMS.includes(form as RetryAfterForm)) throw new ConfigError(`--quota-retry-after: expected ${RETRY_AFTER_FORMS.join(", ")}, got "${form}"`);
    if (!opts.quota) throw new ConfigError("--quota-retry-after needs a quota (--quota-rps, --quota-window, --quota-sliding or a quota profile)");
    opts.quota = { ...opts.quota, retryAfter: form as RetryAfterForm };
  }
  const other = num(v["quota-other-client-rps"], "quota-other-client-rps");
  if (other !== undefined) {
    if (!opts.quota) throw new ConfigError("--quota-other-client-rps needs a quota (--quota-rps, --quota-window, --quota-sliding or a quota profile)");
    opts.quota = { ...opts.quota, otherClientRps: other };
  }
  applyPreAuthLimit(opts, v);
  const maxInFlight = int(v["max-in-flight"], "max-in-flight", 1);
  if (maxInFlight !== undefined) opts.concurrencyLimit = { maxInFlight };
  const latency = int(v["latency-ms"], "latency-ms");
  if (latency !== undefined) opts.latencyMs = latency;
  const jitter = int(v["latency-jitter-ms"], "latency-jitter-ms");
  if (jitter !== undefined) opts.latencyJitterMs = jitter;
  const share = v["latency-inbound-share"] as string | undefined;
  if (share !== undefined) {
    const n = Number(share);
    if (share.trim() === "" || !(n >= 0 && n <= 1)) throw new ConfigError(`--latency-inbound-share: expected a share from 0 to 1, got "${share}"`);
    if (!(opts.latencyMs ?? 0) && !(opts.latencyJitterMs ?? 0)) throw new ConfigError("--latency-inbound-share needs a latency (--latency-ms or a latency profile)");
    opts.latencyInboundShare = n;
  }
  applyStalls(opts, v);
  const skew = v["clock-skew-ms"] as string | undefined;
  if (skew !== undefined) {
    if (!/^-?\d+$/.test(skew.trim())) throw new ConfigError(`--clock-skew-ms: expected a whole number of ms (negative: behind), got "${skew}"`);
    opts.clockSkewMs = Number(skew);
  }
}

/** --stall-ms, --stall-every-ms: the server's own stalls (simulator/stalls.ts). */
function applyStalls(opts: SimulatorOptions, v: CliValues): void {
  const ms = int(v["stall-ms"], "stall-ms");
  const every = int(v["stall-every-ms"], "stall-every-ms", 1);
  if (ms === undefined && every !== undefined && !opts.stall) throw new ConfigError("--stall-every-ms needs --stall-ms (or the quota-stalls profile)");
  if (ms === undefined && every === undefined) return;
  opts.stall = { ms: ms ?? opts.stall!.ms, everyMs: every ?? opts.stall?.everyMs ?? DEFAULT_STALL_EVERY_MS };
}

/** --preauth-rps, --preauth-burst, --preauth-retry-after: the limit before authentication (server.ts). */
function applyPreAuthLimit(opts: SimulatorOptions, v: CliValues): void {
  const rps = num(v["preauth-rps"], "preauth-rps");
  const burst = num(v["preauth-burst"], "preauth-burst");
  const form = v["preauth-retry-after"] as string | undefined;
  if (rps === undefined) {
    if (burst !== undefined || form !== undefined) throw new ConfigError(`--${burst !== undefined ? "preauth-burst" : "preauth-retry-after"} needs --preauth-rps`);
    return;
  }
  if (form !== undefined && !RETRY_AFTER_FORMS.includes(form as RetryAfterForm)) throw new ConfigError(`--preauth-retry-after: expected ${RETRY_AFTER_FORMS.join(", ")}, got "${form}"`);
  if (burst !== undefined && burst < 1) throw new ConfigError(`--preauth-burst: expected a number >= 1, got "${String(v["preauth-burst"])}"`);
  opts.preAuthLimit = { requestsPerSecond: rps, ...(burst === undefined ? {} : { burst }), ...(form === undefined ? {} : { retryAfter: form as RetryAfterForm }) };
}

export default async function simulate(v: CliValues): Promise<number> {
  let profile: Partial<SimulatorOptions>;
  try {
    profile = profileOptions((v.profile as string[] | undefined) ?? []);
  } catch (err) {
    throw new ConfigError(`--profile: ${(err as Error).message}`);
  }
  const opts: SimulatorOptions = { ...profile, port: int(v.port, "port") ?? 4010, host: (v.host as string | undefined) ?? "127.0.0.1" };
  const set = <K extends keyof SimulatorOptions>(k: K, val: SimulatorOptions[K] | undefined) => {
    if (val !== undefined) opts[k] = val;
  };
  set("seed", int(v.seed, "seed"));
  set("skus", int(v.skus, "skus"));
  set("roots", int(v.roots, "roots", 1));
  set("sectionsPerRoot", int(v.sections, "sections", 1));
  set("leavesPerSection", int(v.leaves, "leaves", 1));
  set("historyDepth", int(v.history, "history"));
  set("workspaceName", v["workspace-name"] as string | undefined);
  set("prefix", v.prefix as string | undefined);
  if (process.env.INVENTORY_API_KEY) opts.apiKey = process.env.INVENTORY_API_KEY;
  const rps = num(v["quota-rps"], "quota-rps");
  if (rps !== undefined) {
    const burst = num(v["quota-burst"], "quota-burst");
    const startTokens = v["quota-start-tokens"] === undefined ? undefined : Number(v["quota-start-tokens"]);
    if (startTokens !== undefined && !(startTokens >= 0 && startTokens <= (burst ?? Math.max(1, rps)))) {
      throw new ConfigError(`--quota-start-tokens: expected a number from 0 to the burst, got "${String(v["quota-start-tokens"])}"`);
    }
    opts.quota = { requestsPerSecond: rps, ...(burst === undefined ? {} : { burst }), ...(startTokens === undefined ? {} : { startTokens }) };
  } else if (v["quota-start-tokens"] !== undefined) {
    throw new ConfigError("--quota-start-tokens needs a token bucket (--quota-rps)");
  }
  applyQuotaShape(opts, v);
  const faults = (v.fault as string[] | undefined) ?? [];
  try {
    opts.faults = [...(opts.faults ?? []), ...faults.map(parseFaultSpec)];
  } catch (err) {
    throw new ConfigError(`--fault: ${(err as Error).message}`);
  }
  const churnPct = v.churn === undefined ? undefined : num(v.churn, "churn");
  const churnEvery = num(v["churn-interval"], "churn-interval") ?? 60;

  // A key the user chose is theirs (it may be a real key reused for a test): never print it back.
  const keyFromEnv = opts.apiKey !== undefined;
  const t0 = Date.now();
  const sim = await startSimulator(opts);
  const truth = sim.groundTruth();
  process.stdout.write(
    [
      `inventory-mirror simulator listening (workspace generated in ${Date.now() - t0} ms)`,
      `  base URL   ${sim.baseUrl}`,
      `  key        ${keyFromEnv ? "the value of INVENTORY_API_KEY" : sim.apiKey}`,
      `  workspace  ${truth.workspace.workspace.name} (${truth.workspace.workspace.id}): ${truth.skus.length} SKUs, ${truth.locations.length} locations`,
      "",
      "Mirror it from another terminal:",
      `  export INVENTORY_BASE_URL=${sim.baseUrl}`,
      keyFromEnv ? "  export INVENTORY_API_KEY=...   # the same key this simulator was started with" : `  export INVENTORY_API_KEY=${sim.apiKey}`,
      "  npx inventory-mirror sync --full",
      "",
    ].join("\n") + "\n",
  );
  const timer =
    churnPct !== undefined
      ? setInterval(() => {
          const changed = sim.model.randomChurn(churnPct / 100);
          process.stdout.write(`churn: ${JSON.stringify(changed)}\n`);
        }, churnEvery * 1000)
      : null;
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  if (timer) clearInterval(timer);
  await sim.close();
  const st = sim.stats();
  process.stdout.write(`simulator stopped after ${st.requests} API requests (${st.accepted} admitted by the quota, ${st.rateLimited} answered 429)\n`);
  return 0;
}
