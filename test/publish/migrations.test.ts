/**
 * The PostgreSQL side's migrations and the catalog, against a real server: numbered, forward-only,
 * applied once with their version rows; the place the change feed's sequence number is recorded.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type pg from "pg";
import { CATALOG_SCHEMA, recordPublishedPoint } from "../../src/publish/catalog.js";
import { migrateSchema } from "../../src/publish/migrations.js";
import { chooseSchemaName, schemaNameFor } from "../../src/publish/schema-name.js";
import { startPostgres, type RunningPostgres } from "../helpers/postgres.js";

let server: RunningPostgres;
let client: pg.Client;
beforeAll(async () => {
  server = await startPostgres();
  client = await server.client();
});
afterAll(async () => {
  await client?.end();
  await server?.stop();
});

describe("PostgreSQL migrations", () => {
  it("apply once, in order, with a version row each; a second run applies nothing", async () => {
    const schema = "ws_migrations_test";
    expect(await migrateSchema(client, CATALOG_SCHEMA, "catalog")).toEqual({ from: 0, to: 1 });
    expect(await migrateSchema(client, schema, "workspace")).toEqual({ from: 0, to: 1 });
    expect(await migrateSchema(client, schema, "workspace")).toEqual({ from: 1, to: 1 });
    const versions = await client.query(`SELECT version, name FROM ${schema}.schema_migrations ORDER BY version`);
    expect(versions.rows).toEqual([{ version: 1, name: "0001_contract.sql" }]);
    const views = await client.query("SELECT table_name FROM information_schema.views WHERE table_schema = $1 ORDER BY 1", [schema]);
    expect(views.rows.map((r) => r.table_name)).toEqual(["history_timeline", "stock_by_location", "stock_by_root", "stock_by_section", "stock_not_reflected"]);
  });

  it("refuse a schema migrated by a newer inventory-mirror", async () => {
    const schema = "ws_newer_test";
    await migrateSchema(client, schema, "workspace");
    await client.query(`INSERT INTO ${schema}.schema_migrations (version, name) VALUES (99, '0099_future.sql')`);
    await expect(migrateSchema(client, schema, "workspace")).rejects.toThrow(/newer than this inventory-mirror knows/);
  });

  it("record the change feed's sequence number beside the mirror's run, in the workspaces table", async () => {
    await migrateSchema(client, CATALOG_SCHEMA, "catalog");
    const point = { workspaceId: "feed-ws", workspaceName: "Feed", schemaName: "ws_feed", schemaVersion: 1, mirrorRunId: 7, loadKind: "bulk" as const };
    await recordPublishedPoint(client, { ...point, feedSequence: null });
    await recordPublishedPoint(client, { ...point, feedSequence: 123456789012 });
    const { rows } = await client.query("SELECT mirror_run_id, feed_sequence FROM inventory_mirror.workspaces WHERE id = 'feed-ws'");
    expect(rows).toEqual([{ mirror_run_id: 7, feed_sequence: 123456789012 }]);
  });
});

describe("the workspace's schema name", () => {
  it("is derived from the workspace id, fits an identifier, and never a reserved schema", () => {
    expect(schemaNameFor("3F1C0B8A-9D7E-4C5B-8A3F-2E1D0C9B8A7F")).toBe("ws_3f1c0b8a_9d7e_4c5b_8a3f_2e1d0c9b8a7f");
    const long = schemaNameFor("x".repeat(100));
    expect(long.length).toBe(63);
    expect(long).not.toBe(schemaNameFor(`${"x".repeat(99)}y`));
    expect(chooseSchemaName("bi_acme", "any")).toBe("bi_acme");
    for (const reserved of ["inventory_mirror", "public", "pg_catalog", "information_schema"]) expect(() => chooseSchemaName(reserved, "any")).toThrow(/reserved/);
  });
});
