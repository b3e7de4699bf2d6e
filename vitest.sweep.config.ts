import { defineConfig } from "vitest/config";

// The harness sweeps (test/sweep): not part of `npm test`; `npm run sweep` runs them and prints what they measured.
export default defineConfig({
  test: {
    include: ["test/sweep/**/*.sweep.ts"],
    testTimeout: 3_600_000,
    reporters: ["default"],
  },
});
