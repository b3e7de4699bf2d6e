/** The PostgreSQL schema that holds one workspace: named in config, or derived from the workspace id. */
import { createHash } from "node:crypto";
import { PG_SCHEMA_NAME } from "../core/config.js";
import { PublishError } from "../core/errors.js";
import { CATALOG_SCHEMA } from "./catalog.js";

/** Longest identifier PostgreSQL keeps (NAMEDATALEN - 1 bytes). */
const MAX_IDENTIFIER = 63;

/**
 * `ws_` + the workspace id in lower case with anything but a-z, 0-9 and _ made `_`
 * (a UUID gives `ws_3f1c..._...`). An id too long for an identifier keeps its first
 * characters and a hash of the whole id, so two long ids never share a schema.
 */
export function schemaNameFor(workspaceId: string): string {
  const name = `ws_${workspaceId.toLowerCase().replace(/[^a-z0-9_]/g, "_")}`;
  if (name.length <= MAX_IDENTIFIER) return name;
  const hash = createHash("sha1").update(workspaceId).digest("hex").slice(0, 10);
  return `${name.slice(0, MAX_IDENTIFIER - hash.length - 1)}_${hash}`;
}

/** The configured name if any (config.ts checked its shape), else the derived one; never the catalog's or a system schema. */
export function chooseSchemaName(configured: string | null, workspaceId: string): string {
  const name = configured ?? schemaNameFor(workspaceId);
  if (!PG_SCHEMA_NAME.test(name)) throw new PublishError(`"${name}" is not a schema name inventory-mirror creates (a-z, 0-9, _)`);
  if (name === CATALOG_SCHEMA || name === "public" || name.startsWith("pg_") || name === "information_schema") {
    throw new PublishError(`schema "${name}" is reserved; choose another publish.postgres.schema`);
  }
  return name;
}
