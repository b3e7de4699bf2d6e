import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // End-to-end tests start real processes and servers; give them room on a 2-core machine.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    // .ci/run reads the JSON report for its "N passed, N failed" line.
    reporters: ["default", "json"],
    outputFile: { json: "test-results.json" },
  },
});
