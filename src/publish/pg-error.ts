/** A failure from pg as our boundary's error: PostgreSQL's SQLSTATE kept as a field, the text scrubbed of secrets. */
import { PublishError } from "../core/errors.js";
import { redactSecrets } from "../core/secret.js";

export function asPublishError(err: unknown, table: string | null = null): PublishError {
  if (err instanceof PublishError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const message = redactSecrets(err instanceof Error ? err.message : String(err));
  return new PublishError(`PostgreSQL${table ? ` (loading ${table})` : ""}: ${message}`, { table, sqlState: typeof code === "string" ? code : null, cause: err });
}
