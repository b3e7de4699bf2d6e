/**
 * Compare a mirror database with the simulator's ground truth, row by row: the
 * workspace, every location, every current SKU, its root and leaf quantities with
 * freshness, and its complete history as a multiset of rows (rows identical in every field are
 * each counted: every copy must be stored). Returns the differences.
 *
 * One comparison for the tests and the bench: it lives in src/bench/truth.ts (the rows it
 * reads in src/store/mirror-rows.ts); test/bench/truth.test.ts checks that it sees each
 * kind of difference.
 */
export { diffAgainstTruth, historyNotInTruth, multisetMinus, tableCounts } from "../../src/bench/truth.js";
