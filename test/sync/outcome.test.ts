/**
 * The outcome table of a run (src/sync/outcome.ts): from what stopped it (its first fatal
 * error, its abort, its failed SKUs) to its status, the error it reports, the journal entry
 * it writes and the exit code of `inventory-mirror sync`. Every combination is a row below,
 * written out by hand from the rules the run had before they became a pure function.
 */
import { describe, expect, it } from "vitest";
import { ApiError, EXIT, StoreError, SyncError, type ApiErrorKind } from "../../src/core/errors.js";
import { decideOutcome, MIN_FAILURES_TO_ABORT, syncExitCode, tooManyFailures, type OutcomeInput } from "../../src/sync/outcome.js";

// fatal: the run's first fatal error ("none", an ApiError kind, "too-many-failed" = the failure
//   policy's SyncError, "local" = a StoreError that carries exit code 2 of its own).
// abort: "signal" = the caller's signal (SIGINT/SIGTERM, daemon stop); "deadline" = sync.maxRunSeconds;
//   "deadline+signal" = the deadline fired, then the caller stopped the run too.
// journal: kind of the entry the outcome writes ("-": none). error: which error the result carries.
const TABLE = `
  fatal             abort            failures  status       exit  journal      error
  none              none             0         succeeded    0     -            -
  none              none             1         partial      1     -            failures
  none              signal           0         interrupted  1     interrupted  interrupted
  none              signal           1         interrupted  1     interrupted  interrupted
  none              deadline         0         partial      1     partial      deadline
  none              deadline         1         partial      1     partial      deadline
  none              deadline+signal  0         interrupted  1     interrupted  interrupted
  none              deadline+signal  1         interrupted  1     interrupted  interrupted
  auth              none             0         failed       3     error        fatal
  auth              none             1         failed       3     error        fatal
  auth              signal           0         failed       3     error        fatal
  auth              signal           1         failed       3     error        fatal
  auth              deadline         0         partial      1     partial      deadline
  auth              deadline         1         partial      1     partial      deadline
  auth              deadline+signal  0         failed       3     error        fatal
  auth              deadline+signal  1         failed       3     error        fatal
  http              none             0         failed       1     error        fatal
  http              none             1         failed       1     error        fatal
  http              signal           0         failed       1     error        fatal
  http              signal           1         failed       1     error        fatal
  http              deadline         0         partial      1     partial      deadline
  http              deadline         1         partial      1     partial      deadline
  http              deadline+signal  0         failed       1     error        fatal
  http              deadline+signal  1         failed       1     error        fatal
  network           none             0         failed       1     error        fatal
  network           none             1         failed       1     error        fatal
  network           signal           0         failed       1     error        fatal
  network           signal           1         failed       1     error        fatal
  network           deadline         0         partial      1     partial      deadline
  network           deadline         1         partial      1     partial      deadline
  network           deadline+signal  0         failed       1     error        fatal
  network           deadline+signal  1         failed       1     error        fatal
  timeout           none             0         failed       1     error        fatal
  timeout           none             1         failed       1     error        fatal
  timeout           signal           0         failed       1     error        fatal
  timeout           signal           1         failed       1     error        fatal
  timeout           deadline         0         partial      1     partial      deadline
  timeout           deadline         1         partial      1     partial      deadline
  timeout           deadline+signal  0         failed       1     error        fatal
  timeout           deadline+signal  1         failed       1     error        fatal
  invalid-response  none             0         failed       1     error        fatal
  invalid-response  none             1         failed       1     error        fatal
  invalid-response  signal           0         failed       1     error        fatal
  invalid-response  signal           1         failed       1     error        fatal
  invalid-response  deadline         0         partial      1     partial      deadline
  invalid-response  deadline         1         partial      1     partial      deadline
  invalid-response  deadline+signal  0         failed       1     error        fatal
  invalid-response  deadline+signal  1         failed       1     error        fatal
  quota-wall        none             0         partial      1     partial      fatal
  quota-wall        none             1         partial      1     partial      fatal
  quota-wall        signal           0         partial      1     partial      fatal
  quota-wall        signal           1         partial      1     partial      fatal
  quota-wall        deadline         0         partial      1     partial      deadline
  quota-wall        deadline         1         partial      1     partial      deadline
  quota-wall        deadline+signal  0         partial      1     partial      fatal
  quota-wall        deadline+signal  1         partial      1     partial      fatal
  budget            none             0         partial      0     partial      fatal
  budget            none             1         partial      0     partial      fatal
  budget            signal           0         partial      0     partial      fatal
  budget            signal           1         partial      0     partial      fatal
  budget            deadline         0         partial      1     partial      deadline
  budget            deadline         1         partial      1     partial      deadline
  budget            deadline+signal  0         partial      0     partial      fatal
  budget            deadline+signal  1         partial      0     partial      fatal
  unreachable       none             0         partial      1     partial      fatal
  unreachable       none             1         partial      1     partial      fatal
  unreachable       signal           0         partial      1     partial      fatal
  unreachable       signal           1         partial      1     partial      fatal
  unreachable       deadline         0         partial      1     partial      deadline
  unreachable       deadline         1         partial      1     partial      deadline
  unreachable       deadline+signal  0         partial      1     partial      fatal
  unreachable       deadline+signal  1         partial      1     partial      fatal
  too-many-failed   none             0         failed       1     error        fatal
  too-many-failed   none             1         failed       1     error        fatal
  too-many-failed   signal           0         failed       1     error        fatal
  too-many-failed   signal           1         failed       1     error        fatal
  too-many-failed   deadline         0         partial      1     partial      deadline
  too-many-failed   deadline         1         partial      1     partial      deadline
  too-many-failed   deadline+signal  0         failed       1     error        fatal
  too-many-failed   deadline+signal  1         failed       1     error        fatal
  local             none             0         failed       1     error        fatal
  local             none             1         failed       1     error        fatal
  local             signal           0         failed       1     error        fatal
  local             signal           1         failed       1     error        fatal
  local             deadline         0         partial      1     partial      deadline
  local             deadline         1         partial      1     partial      deadline
  local             deadline+signal  0         failed       1     error        fatal
  local             deadline+signal  1         failed       1     error        fatal
`;

interface Row {
  fatal: string;
  abort: string;
  failures: number;
  status: string;
  exit: number;
  journal: string;
  error: string;
}

const rows: Row[] = TABLE.trim()
  .split("\n")
  .slice(1)
  .map((line) => {
    const [fatal, abort, failures, status, exit, journal, error] = line.trim().split(/\s+/) as [string, string, string, string, string, string, string];
    return { fatal, abort, failures: Number(failures), status, exit: Number(exit), journal, error };
  });

const API_KINDS: ApiErrorKind[] = ["auth", "http", "network", "timeout", "invalid-response", "quota-wall", "budget", "unreachable"];
const WALL_AT = Date.parse("2026-11-25T03:00:00.000Z");

function fatalError(name: string): Error | null {
  if (name === "none") return null;
  if (name === "too-many-failed") return new SyncError("12 SKUs failed (12.0% > sync.maxFailedShare 10%); last: detail: HTTP 500");
  if (name === "local") return new StoreError("the database file is not writable", { exitCode: EXIT.usage });
  if (!API_KINDS.includes(name as ApiErrorKind)) throw new Error(`unknown fatal kind in the table: ${name}`);
  const kind = name as ApiErrorKind;
  return new ApiError(`${kind} on detail`, { kind, endpoint: "detail", status: kind === "auth" ? 401 : kind === "http" ? 500 : null, resumeAfter: kind === "quota-wall" ? WALL_AT : null });
}

function deadlineError(): SyncError {
  const e = new SyncError("the run reached its deadline of 2 s (sync.maxRunSeconds) and stopped; the next run resumes");
  e.deadline = true;
  return e;
}

/** The input as a run produces it: the run's signal aborts with the first of deadline, caller's reason, fatal error. */
function inputFor(row: Row): { input: OutcomeInput; fatal: Error | null; deadline: SyncError } {
  const fatal = fatalError(row.fatal);
  const deadline = deadlineError();
  const signalReason = new DOMException("This operation was aborted", "AbortError");
  const reasons: Record<string, { stopReason: unknown; interrupted: boolean }> = {
    none: { stopReason: fatal ?? undefined, interrupted: false },
    signal: { stopReason: signalReason, interrupted: true },
    deadline: { stopReason: deadline, interrupted: false },
    "deadline+signal": { stopReason: deadline, interrupted: true },
  };
  const abort = reasons[row.abort];
  if (!abort) throw new Error(`unknown abort in the table: ${row.abort}`);
  return { input: { fatal, ...abort, failed: row.failures, maxRequests: 500 }, fatal, deadline };
}

describe("decideOutcome and syncExitCode: the outcome table", () => {
  it("covers every combination of fatal kind, abort and failures once", () => {
    const keys = new Set(rows.map((r) => `${r.fatal}|${r.abort}|${r.failures}`));
    expect(rows).toHaveLength(11 * 4 * 2);
    expect(keys.size).toBe(rows.length);
  });

  it.each(rows)("fatal $fatal, abort $abort, $failures failed -> $status, exit $exit, journal $journal, error $error", (row) => {
    const { input, fatal, deadline } = inputFor(row);
    const outcome = decideOutcome(input);
    expect(outcome.status).toBe(row.status);
    expect(syncExitCode(outcome.status, outcome.error)).toBe(row.exit);
    expect(outcome.journal.map((e) => e.kind)).toEqual(row.journal === "-" ? [] : [row.journal]);
    switch (row.error) {
      case "-":
        expect(outcome.error).toBeNull();
        break;
      case "fatal":
        expect(outcome.error).toBe(fatal);
        break;
      case "deadline":
        expect(outcome.error).toBe(deadline);
        break;
      case "interrupted":
        expect(outcome.error).toBeInstanceOf(SyncError);
        expect(outcome.error?.message).toBe("interrupted before the run finished; the next 'sync' resumes it");
        break;
      case "failures":
        expect(outcome.error).toBeInstanceOf(SyncError);
        expect(outcome.error?.message).toBe(`${row.failures} SKU(s) failed and stay queued; the next run retries them (see sync_journal)`);
        break;
      default:
        throw new Error(`unknown error column: ${row.error}`);
    }
    expect(outcome.resumeAfter).toBe(row.fatal === "quota-wall" && row.error === "fatal" ? new Date(WALL_AT).toISOString() : null);
  });
});

describe("decideOutcome: what the journal says", () => {
  const decide = (fatal: Error | null, extra: Partial<OutcomeInput> = {}) => decideOutcome({ fatal, stopReason: fatal ?? undefined, interrupted: false, failed: 0, maxRequests: 500, ...extra });

  it("a quota wall names the time the next run may start, with the endpoint and status that met it", () => {
    const wall = new ApiError("quota", { kind: "quota-wall", endpoint: "history", status: 429, resumeAfter: WALL_AT });
    expect(decide(wall).journal).toEqual([{ kind: "partial", endpoint: "history", status: 429, message: "quota wall: resume after 2026-11-25T03:00:00.000Z" }]);
    const unknown = new ApiError("quota", { kind: "quota-wall", endpoint: "list", status: 503 });
    expect(decide(unknown)).toMatchObject({ resumeAfter: null, journal: [{ kind: "partial", endpoint: "list", status: 503, message: "quota wall: resume after null" }] });
  });

  it("a spent budget names the budget; an unreachable server, the error's own message", () => {
    const budget = new ApiError("budget spent", { kind: "budget", endpoint: "detail" });
    expect(decide(budget, { maxRequests: 1234 }).journal).toEqual([{ kind: "partial", message: "request budget of 1234 spent; remaining work stays queued" }]);
    const down = new ApiError("every request failed to connect for 60 s", { kind: "unreachable", endpoint: "list" });
    expect(decide(down).journal).toEqual([{ kind: "partial", endpoint: "list", message: "every request failed to connect for 60 s" }]);
  });

  it("a failed run journals its error with the chain of causes; the deadline journals its own message", () => {
    const err = new ApiError("list: HTTP 500", { kind: "http", endpoint: "list", status: 500, cause: new Error("socket hang up") });
    expect(decide(err).journal).toEqual([{ kind: "error", message: "list: HTTP 500: socket hang up" }]);
    const deadline = deadlineError();
    expect(decide(null, { stopReason: deadline }).journal).toEqual([{ kind: "partial", message: deadline.message }]);
  });

  it("an interrupted run journals that the next run resumes the walk", () => {
    expect(decide(null, { stopReason: "SIGTERM", interrupted: true }).journal).toEqual([{ kind: "interrupted", message: "stopped by signal; the next run resumes the walk" }]);
  });
});

describe("tooManyFailures: the failure policy", () => {
  it.each([
    // failed, planned, maxFailedShare, aborts
    [9, 9, 0.05, false], // every SKU failed, but below the floor of 10
    [10, 10, 0.05, true],
    [10, 200, 0.05, false], // exactly 5% is not more than 5%
    [11, 200, 0.05, true],
    [10, 1000, 0.05, false],
    [10, 0, 0.05, true], // nothing counted as planned: the share is taken over at least 1
    [50, 50, 1, false], // a share of 1 never aborts
    [10, 10_000, 0, true], // a share of 0 aborts at the floor
  ])("%i failed of %i planned, maxFailedShare %d -> %s", (failed, planned, share, aborts) => {
    expect(tooManyFailures(failed, planned, share)).toBe(aborts);
  });

  it("the floor is 10 failed SKUs", () => {
    expect(MIN_FAILURES_TO_ABORT).toBe(10);
  });
});
