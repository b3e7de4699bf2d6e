/**
 * Named server profiles: each is a bundle of simulator options that makes the simulator
 * behave like another server the API document equally allows (another item order, nulls
 * left out instead of sent, identical history rows, another quota shape...). The suite runs
 * the mirror against each; `inventory-mirror simulate --profile NAME` (repeatable) serves one.
 * docs/server-variance.md lists every open point of the document, the profiles that vary
 * it and the test that covers it.
 */
import type { SimulatorOptions } from "./index.js";
import { QUOTA_PROFILES } from "./quota-profiles.js";

export interface ServerProfile {
  /** One line: which behaviour the document allows, that this profile takes. */
  about: string;
  options: Partial<SimulatorOptions>;
}

export const SERVER_PROFILES: Record<string, ServerProfile> = {
  default: { about: "the simulator's own choices (README 'Simulator', src/simulator/index.ts)", options: {} },
  ...QUOTA_PROFILES,
};

/** The options of the named profiles, merged left to right (later names win; nested objects merge). */
export function profileOptions(names: readonly string[]): Partial<SimulatorOptions> {
  let out: Partial<SimulatorOptions> = {};
  for (const name of names) {
    const p = SERVER_PROFILES[name];
    if (!p) throw new RangeError(`unknown server profile "${name}"; known: ${Object.keys(SERVER_PROFILES).join(", ")}`);
    out = mergeOptions(out, p.options);
  }
  return out;
}

export function mergeOptions(a: Partial<SimulatorOptions>, b: Partial<SimulatorOptions>): Partial<SimulatorOptions> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b) as Array<[string, unknown]>) {
    const prev = out[k];
    out[k] = isPlainObject(prev) && isPlainObject(v) ? { ...prev, ...v } : v;
  }
  return out as Partial<SimulatorOptions>;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
