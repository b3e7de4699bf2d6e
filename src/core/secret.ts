/**
 * The developer key, wrapped so it cannot be printed by accident: String(),
 * JSON.stringify, util.inspect and template literals all give "[redacted]".
 * Only `reveal()` gives the bytes, and only the HTTP client calls it, to build
 * the Authorization header.
 */
import { inspect } from "node:util";

export const REDACTED = "[redacted]";
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
  const out = redactKnownKeys(text);
  // 8+ characters: a key is never shorter (config.ts refuses it), and prose such as
  // "--bearer is not accepted" must stay readable.
  return out.replace(/(Bearer\s+)[^\s"',;]{8,}/gi, `$1${REDACTED}`);
}

/**
 * A response body that echoes a key (a server reflecting the Authorization header into a name or a note),
 * parsed with every known key made "[redacted]" in its values, so the key is neither stored nor printed: first
 * in the text as sent ("[redacted]" needs no escaping: the body stays valid JSON), then, where the text escapes characters and a key may hide in the escapes
 * (`\/`, or any character as `\uXXXX`: System.Text.Json writes `+` as `\u002B`), in every string it parses to.
 * The second pass costs a reviver over the whole body, so it runs only when the unescaped text holds a key.
 */
export function parseScrubbed(text: string): unknown {
  const scrubbed = redactKnownKeys(text);
  if (!scrubbed.includes("\\") || !holdsKeyUnescaped(scrubbed)) return JSON.parse(scrubbed);
  return JSON.parse(scrubbed, (_name, value: unknown) => (typeof value === "string" ? redactKnownKeys(value) : value));
}

/** Does `json` hold a known key once its escapes are read (roughly: a false alarm only costs the reviver)? */
function holdsKeyUnescaped(json: string): boolean {
  const unescaped = json.replace(/\\(?:u([0-9a-fA-F]{4})|(.))/g, (_e, hex: string | undefined, char: string | undefined) =>
    hex === undefined ? (char ?? "") : String.fromCharCode(Number.parseInt(hex, 16)),
  );
  for (const key of registry) if (unescaped.includes(key)) return true;
  return false;
}

function redactKnownKeys(text: string): string {
  let out = text;
  for (const key of registry) if (out.includes(key)) out = out.split(key).join(REDACTED);
  return out;
}

/**
 * Is a field of this name a credential? (authorization, proxy-authorization, cookie,
 * apiKey, x-api-key, token, accessToken, secret, password...). Case and separators are
 * ignored. The logger redacts such fields at any depth; a false positive only hides a
 * value from a log line.
 */
export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name.toLowerCase().replace(/[^a-z0-9]/g, ""));
}
const SECRET_NAME = /(authorization|cookie|key|token|secret|password|passwd|credentials?)$/;
