/**
 * The developer key, wrapped so it cannot be printed by accident: String(),
 * JSON.stringify, util.inspect and template literals all give "[redacted]".
 * Only `reveal()` gives the bytes, and only the HTTP client calls it, to build
 * the Authorization header.
 */
import { inspect } from "node:util";

const REDACTED = "[redacted]";
const registry = new Set<string>();

export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
    if (value.length >= 4) registry.add(value);
  }
  reveal(): string {
    return this.#value;
  }
  toString(): string {
    return REDACTED;
  }
  toJSON(): string {
    return REDACTED;
  }
  [inspect.custom](): string {
    return REDACTED;
  }
}

/**
 * Last line of defence for text that came from somewhere we do not control
 * (an error message from a library, a server's error body that echoes a header):
 * every known key's bytes become "[redacted]". Also strips "Bearer <token>" shapes.
 */
export function redactSecrets(text: string): string {
  let out = text;
  for (const key of registry) if (out.includes(key)) out = out.split(key).join(REDACTED);
  return out.replace(/(Bearer\s+)[^\s"',;]+/gi, `$1${REDACTED}`);
}
