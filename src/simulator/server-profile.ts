/** A named behaviour of the simulator (profiles.ts, quota-profiles.ts): the options that make it another server the API document allows. */
import type { SimulatorOptions } from "./index.js";

export interface ServerProfile {
  /** One line: which behaviour the document allows, that this profile takes. */
  about: string;
  options: Partial<SimulatorOptions>;
}
