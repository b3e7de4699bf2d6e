/**
 * A server whose paging never ends (issue 11, A2): every history page of the chosen SKUs,
 * and every list page when `list` is set, carries a cursor never seen before. Each such
 * cursor is answered with the first page again (its rows repeat; the cursor is new), so a
 * client that trusts paging walks forever.
 */

export interface EndlessCursorOptions {
  /** SKU ids (lower case) whose history never ends, or "all". */
  history?: string[] | "all";
  /** The unscoped list never ends either. */
  list?: boolean;
}

const PREFIX = "endless-";

export class EndlessCursors {
  private n = 0;
  constructor(private readonly o: EndlessCursorOptions) {}

  /** Does this request get endless paging? */
  applies(endpoint: string, skuId: string | null): boolean {
    if (endpoint === "list") return this.o.list === true;
    if (endpoint !== "history" || skuId === null) return false;
    return this.o.history === "all" || (this.o.history ?? []).includes(skuId.toLowerCase());
  }

  /** The query to serve: an endless cursor is answered as the first page. */
  query(q: URLSearchParams): URLSearchParams {
    const cursor = q.get("cursor");
    if (cursor === null || !cursor.startsWith(PREFIX)) return q;
    const first = new URLSearchParams(q);
    first.delete("cursor");
    return first;
  }

  /** The page as served: a fresh cursor, whatever the real one was. */
  page(body: unknown): unknown {
    const b = body as { page?: { nextCursor?: string | null } };
    return { ...b, page: { ...(b.page ?? {}), nextCursor: `${PREFIX}${++this.n}` } };
  }
}
