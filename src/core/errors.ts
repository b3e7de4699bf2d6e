/**
 * One error class per boundary. Each message says what went wrong and what to do;
 * `cause` is kept; context travels as fields (endpoint, SKU id, status, code, Retry-After),
 * and a message is written once, where that context is known, never edited afterwards. No message
 * ever contains the developer key: the client never puts it anywhere but a header,
 * and `redactSecrets` is applied to any text that came from elsewhere.
 */
import type { EndpointName } from "./defaults.js";

/** Exit codes of the CLI contract. */
export const EXIT = {
  ok: 0,
  syncFailed: 1,
  usage: 2,
  auth: 3,
  workspace: 4,
  /** Stopped by SIGINT (Ctrl-C): 128 + 2, the shell's convention, so a script sees it was interrupted. */
  sigint: 130,
  /** A one-shot command stopped by SIGTERM: 128 + 15. (The daemon's SIGTERM is its normal stop: 0.) */
  sigterm: 143,
} as const;

/** The exit code of a command stopped by `sig` (130 or 143). */
export function exitCodeOfSignal(sig: "SIGINT" | "SIGTERM"): number {
  return sig === "SIGINT" ? EXIT.sigint : EXIT.sigterm;
}

/** A mistake in flags, environment or config file. Exit 2, before any request is made. */
export class ConfigError extends Error {
  override name = "ConfigError";
  readonly exitCode = EXIT.usage;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export type ApiErrorKind =
  | "auth" // 401: the key was refused
  | "http" // any other non-2xx status
  | "network" // connection refused/reset, DNS, socket closed
  | "timeout" // connect or response timeout
  | "invalid-response" // not JSON, wrong content type, too large, failed validation
  | "quota-wall" // the server asked us to wait longer than maxWaitMs
  | "budget" // this run's request budget (--max-requests) is spent
  | "not-sent" // kept from going at the last moment (a pause began after it was granted); the scheduler sends it again after the pause
  | "unreachable"; // every request failed to connect for a while: the server is down or the URL is wrong

/** Anything that went wrong talking to the API. */
export class ApiError extends Error {
  override name = "ApiError";
  readonly kind: ApiErrorKind;
  readonly endpoint: EndpointName;
  /** The SKU the request was about (detail, history), when there was one. */
  readonly skuId: string | null;
  readonly status: number | null;
  /** `error.code` from the server's error body, when it sent one. */
  readonly code: string | null;
  /** For quota-wall: the epoch ms after which a retry may be made. */
  readonly resumeAfter: number | null;
  /**
   * The response's Retry-After header as the server sent it (scrubbed of the key, clipped),
   * or null: what the scheduler reads to decide how long to wait.
   */
  readonly retryAfter: string | null;
  constructor(
    message: string,
    init: {
      kind: ApiErrorKind;
      endpoint: EndpointName;
      skuId?: string | null;
      status?: number | null;
      code?: string | null;
      resumeAfter?: number | null;
      retryAfter?: string | null;
      cause?: unknown;
    },
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.endpoint = init.endpoint;
    this.skuId = init.skuId ?? null;
    this.status = init.status ?? null;
    this.code = init.code ?? null;
    this.resumeAfter = init.resumeAfter ?? null;
    this.retryAfter = init.retryAfter ?? null;
  }
  get exitCode(): number {
    return this.kind === "auth" ? EXIT.auth : EXIT.syncFailed;
  }
  /** Worth another attempt later (in this run or the next)? */
  get transient(): boolean {
    return (
      this.kind === "network" ||
      this.kind === "timeout" ||
      this.kind === "quota-wall" ||
      this.kind === "budget" ||
      this.kind === "unreachable" ||
      (this.kind === "http" && (this.status === 429 || (this.status !== null && this.status >= 500)))
    );
  }
}

/** The key points at another workspace than expected, or the database belongs to another one. Exit 4, nothing written. */
export class WorkspaceMismatchError extends Error {
  override name = "WorkspaceMismatchError";
  readonly exitCode = EXIT.workspace;
}

/** The local database cannot be used (locked by another process, unreadable, newer schema). */
export class StoreError extends Error {
  override name = "StoreError";
  readonly exitCode: number;
  /** "locked": another process holds the writer lock (the daemon skips its tick instead of failing). */
  readonly code: "locked" | null;
  constructor(message: string, options?: { cause?: unknown; exitCode?: number; code?: "locked" }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.exitCode = options?.exitCode ?? EXIT.syncFailed;
    this.code = options?.code ?? null;
  }
}

/** A run ended without finishing: too many SKUs failed, or it was aborted. */
export class SyncError extends Error {
  override name = "SyncError";
  readonly exitCode = EXIT.syncFailed;
  /** Set when the run was stopped by its deadline (sync.maxRunSeconds): it ends partial and the next run resumes. */
  deadline = false;
}

/**
 * Publishing into PostgreSQL failed (connection, migration, bulk load). Exit 1; nothing of the
 * failed publish is visible there (it runs in one transaction). Context as fields: the table being
 * loaded and PostgreSQL's SQLSTATE; the message never holds the connection string.
 */
export class PublishError extends Error {
  override name = "PublishError";
  readonly exitCode = EXIT.syncFailed;
  /** The contract table being loaded when it failed, if any. */
  readonly table: string | null;
  /** PostgreSQL's SQLSTATE (e.g. 28P01 wrong password, 3D000 no such database), when it sent one. */
  readonly sqlState: string | null;
  constructor(message: string, init: { table?: string | null; sqlState?: string | null; cause?: unknown } = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.table = init.table ?? null;
    this.sqlState = init.sqlState ?? null;
  }
}

/** The process exit code for any error that reaches the top. */
export function exitCodeOf(err: unknown): number {
  if (err && typeof err === "object" && "exitCode" in err && typeof err.exitCode === "number") return err.exitCode;
  return EXIT.syncFailed;
}

/** Message with its chain of causes, one line, for humans. */
export function describeError(err: unknown): string {
  const parts: string[] = [];
  let cur: unknown = err;
  for (let depth = 0; cur && depth < 5; depth++) {
    if (cur instanceof Error) {
      if (!parts.some((p) => p.includes(cur instanceof Error ? cur.message : ""))) parts.push(cur.message);
      cur = cur.cause;
    } else {
      parts.push(String(cur));
      break;
    }
  }
  return parts.join(": ");
}
