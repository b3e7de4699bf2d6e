/**
 * The PostgreSQL connection string for `publish --postgres`, handled like the developer key:
 * it comes only from INVENTORY_PG_URL or the file named by INVENTORY_PG_URL_FILE, is wrapped in
 * a Secret (never printed, never logged, never stored), and a connection string found in the
 * config file is refused (config.ts). Its password is registered as a secret of its own, so a
 * library's error that quotes it is scrubbed too. No message here contains the value.
 */
import { readFileSync, statSync } from "node:fs";
import { ConfigError } from "./errors.js";
import { Secret } from "./secret.js";

/** A connection-string file larger than this is the wrong file. */
const MAX_URL_FILE_BYTES = 16 * 1024;

/** Does this text look like a PostgreSQL connection URL? (What the config file must not hold.) */
export function looksLikePostgresUrl(text: string): boolean {
  return /^\s*postgres(ql)?:\/\//i.test(text);
}

/** INVENTORY_PG_URL, or the contents of INVENTORY_PG_URL_FILE (trimmed). */
export function loadPostgresUrl(env: NodeJS.ProcessEnv = process.env, warn: (msg: string) => void = () => {}): Secret {
  const direct = env.INVENTORY_PG_URL;
  const file = env.INVENTORY_PG_URL_FILE;
  if (direct && file) throw new ConfigError("both INVENTORY_PG_URL and INVENTORY_PG_URL_FILE are set; set only one");
  if (direct) return wrap(direct.trim(), "INVENTORY_PG_URL");
  if (file) return wrap(readUrlFile(file, warn), `INVENTORY_PG_URL_FILE (${file})`);
  throw new ConfigError(
    "no PostgreSQL connection string: set INVENTORY_PG_URL (postgres://user:password@host:5432/database), " +
      "or INVENTORY_PG_URL_FILE to a file that holds it. It is never read from the config file or a flag.",
  );
}

function readUrlFile(file: string, warn: (msg: string) => void): string {
  const what = `INVENTORY_PG_URL_FILE (${file})`;
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(code === "ENOENT" ? `${what}: the file does not exist` : `${what}: cannot read the file (${code ?? "error"})`, { cause: err });
  }
  if (!st.isFile()) throw new ConfigError(`${what}: not a regular file; expected a file holding the connection string on one line`);
  if (st.size > MAX_URL_FILE_BYTES) throw new ConfigError(`${what}: ${st.size} bytes is too large; expected the connection string on one line`);
  if (st.mode & 0o077) warn(`connection string file ${file} is readable by group or others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`);
  try {
    return readFileSync(file, "utf8").trim();
  } catch (err) {
    throw new ConfigError(`${what}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? "error"})`, { cause: err });
  }
}

function wrap(value: string, source: string): Secret {
  if (value === "") throw new ConfigError(`${source} is empty; expected postgres://user:password@host:5432/database`);
  if (!looksLikePostgresUrl(value)) throw new ConfigError(`${source} is not a postgres:// or postgresql:// URL`);
  let passwords: string[] = [];
  try {
    const raw = new URL(value).password;
    passwords = [raw, decodeURIComponent(raw)];
  } catch {
    // The value is not shown: a URL that fails to parse may still carry a password.
    throw new ConfigError(`${source} is not a valid URL; expected postgres://user:password@host:5432/database`);
  }
  // Registered for redaction (secret.ts): as written in the URL and percent-decoded.
  for (const p of passwords) if (p) new Secret(p);
  return new Secret(value);
}
