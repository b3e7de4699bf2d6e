// dependency-cruiser: the rooms of src/ and the arrows allowed between them (docs/architecture.md
// draws the same table; keep the two in step). `npm run lint` runs `depcruise src`.
//
// Type-only imports count (tsPreCompilationDeps): a type is a dependency on the room that
// defines it, and the layering is about who knows whom.

/**
 * Each room of src/ and the other rooms its files may import. A room may always import its own
 * files. Anything not listed is forbidden, including files directly in src/.
 */
const ROOMS = {
  // the bottom: schemas, config, defaults, errors, logger; imports nothing of ours
  core: [],
  // beside each other: the client's calls run through the scheduler, which does not look inside them
  client: ["core"],
  scheduler: ["core"],
  // every write and run-state query; defines the state it hands out
  store: ["core"],
  // the run: walks, plans, fetches through the client and scheduler, saves through the store
  sync: ["core", "client", "scheduler", "store"],
  // read-only BI queries over the mirror
  analysis: ["core", "store"],
  // PostgreSQL: the mirror's contract tables, read through the store, published into a server
  publish: ["core", "store"],
  // on top: the daemon publishes into PostgreSQL after its runs (publish.postgres.enabled)
  daemon: ["core", "client", "scheduler", "store", "sync", "analysis", "publish"],
  cli: ["core", "client", "scheduler", "store", "sync", "analysis", "publish", "daemon", "simulator"],
  // apart: the built-in API simulator knows only the shared shapes
  simulator: ["core"],
  // npm run bench: may measure anything (but, like everything, not the CLI)
  bench: ["core", "client", "scheduler", "store", "sync", "analysis", "publish", "daemon", "simulator"],
};

const layering = Object.entries(ROOMS).map(([room, allowed]) => ({
  name: `${room}-imports-only-${allowed.length ? allowed.join("-") : "itself"}`,
  comment: `src/${room}/ may import ${allowed.length ? allowed.map((r) => `src/${r}/`).join(", ") : "nothing of ours"} (docs/architecture.md)`,
  severity: "error",
  from: { path: `^src/${room}/` },
  to: { path: "^src/", pathNot: `^src/(${[room, ...allowed].join("|")})/` },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...layering,
    {
      name: "room-not-in-the-table",
      comment: "a file outside the rooms above (directly in src/ or in a new folder): add its room to ROOMS here and to docs/architecture.md",
      severity: "error",
      from: { path: "^src/", pathNot: `^src/(${Object.keys(ROOMS).join("|")})/` },
      to: {},
    },
    {
      name: "no-circular",
      comment: "an import cycle: two modules (or rooms) that need each other are one concern or a missing interface",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "src-not-to-dev-dependency",
      comment: "src/ is shipped with production dependencies only (npm prune --omit=dev in the Dockerfile)",
      severity: "error",
      from: { path: "^src/" },
      to: { dependencyTypes: ["npm-dev"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "not-to-unresolvable",
      comment: "an import that resolves to nothing",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: "no-non-package-json",
      comment: "a package imported but not in package.json (it works only by accident of hoisting)",
      severity: "error",
      from: {},
      to: { dependencyTypes: ["npm-no-pkg", "npm-unknown"] },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
