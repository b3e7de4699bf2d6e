/** config.example.json is what the README points people to: it must be valid and show every key the schema knows. */
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { ConfigSchema } from "../../src/core/config.js";

const example = JSON.parse(readFileSync(new URL("../../config.example.json", import.meta.url), "utf8")) as Record<string, unknown>;

/** A schema without optional, nullable, default and transform wrappers. */
function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    if (s instanceof z.ZodPipe) s = s.in as z.ZodType;
    else if (s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodDefault || s instanceof z.ZodPrefault) s = s.unwrap() as z.ZodType;
    else return s;
  }
}

/** Every key path of a (strict) object schema, descending into optional or defaulted objects. */
function schemaPaths(schema: z.ZodType, prefix = ""): string[] {
  const s = unwrap(schema);
  if (!(s instanceof z.ZodObject)) return [prefix];
  return Object.entries(s.shape as Record<string, z.ZodType>).flatMap(([k, v]) => schemaPaths(v, prefix ? `${prefix}.${k}` : k));
}
function valuePaths(v: unknown, prefix = ""): string[] {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return [prefix];
  return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) => valuePaths(x, prefix ? `${prefix}.${k}` : k));
}

describe("config.example.json", () => {
  it("passes the config file's schema", () => {
    expect(() => ConfigSchema.parse(example)).not.toThrow();
  });
  it("shows every key of the schema ($schema aside)", () => {
    expect(valuePaths(example).sort()).toEqual(
      schemaPaths(ConfigSchema)
        .filter((p) => p !== "$schema")
        .sort(),
    );
  });
});
