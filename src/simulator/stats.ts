/**
 * Request accounting for the API surface (never the /_sim admin endpoints), so tests can
 * assert how a client behaved: how many requests, to what, how concurrent, and whether it
 * respected Retry-After.
 */
import { ENDPOINTS, type EndpointName } from "../core/defaults.js";
import type { FaultKind } from "./faults.js";
import { RetryAfterLedger, type RetryAfterViolation } from "./quota.js";

export interface SimStats {
  /** API requests received (any path outside /_sim, any outcome). */
  requests: number;
  /** Requests whose path matched an endpoint, whatever their outcome. */
  byEndpoint: Record<EndpointName, number>;
  /** Outcome per HTTP status ("200", "429", ...); "reset" for connections destroyed without a response. */
  byStatus: Record<string, number>;
  /** 429s sent by the quota and the limit before authentication (fault-injected 429s are in faultsFired and byStatus). */
  rateLimited: number;
  /** Of those, the limit before authentication's (option preAuthLimit); 0 without one. */
  preAuthLimited: number;
  /**
   * Requests the quota admitted (authorized and not refused by it; every authorized request
   * when there is no quota). Faults act after the quota, so a fault-injected 503 or 429 is
   * an admitted request: it spent the quota.
   */
  accepted: number;
  /** Admitted requests per whole second since the first counted request (index 0: its first second). */
  acceptedBySecond: number[];
  /** Epoch ms the first counted request arrived, and the last response ended (null before any). */
  firstRequestAt: number | null;
  lastResponseAt: number | null;
  retryAfterViolations: RetryAfterViolation[];
  /** Most requests in flight at once (arrival to response end). */
  maxConcurrent: number;
  openConnections: number;
  peakConnections: number;
  /** Times each fault kind changed a response. */
  faultsFired: Partial<Record<FaultKind, number>>;
  /** Requests that arrived in one of the server's own stalls and were decided at its end (option stall); 0 without them. */
  stalled: number;
  /** Another client spending the quota (quota option otherClientRps): its requests since the quota was set, and the ones refused; null without one. */
  otherClient?: { requests: number; refused: number } | null;
}

export class StatsCollector {
  readonly ledger = new RetryAfterLedger();
  private requests = 0;
  private byEndpoint = emptyByEndpoint();
  private byStatus: Record<string, number> = {};
  private rateLimited = 0;
  private preAuthLimited = 0;
  private accepted = 0;
  private acceptedBySecond: number[] = [];
  private firstAt: number | null = null;
  private lastEnd: number | null = null;
  private faultsFired: Partial<Record<FaultKind, number>> = {};
  private stalled = 0;
  private inFlight = 0;
  private maxConcurrent = 0;
  private open = 0;
  private peak = 0;

  /** A request arrived; returns the function to call once when it is over. */
  begin(at: number, path: string, endpoint: EndpointName | null, conn: object | null = null): (status: number | "reset") => void {
    this.requests++;
    this.firstAt ??= at;
    if (endpoint) this.byEndpoint[endpoint]++;
    this.ledger.check(at, path, conn);
    this.inFlight++;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.inFlight);
    let done = false;
    return (status) => {
      if (done) return;
      done = true;
      this.inFlight--;
      this.lastEnd = Date.now();
      const key = String(status);
      this.byStatus[key] = (this.byStatus[key] ?? 0) + 1;
    };
  }

  quotaAdmitted(at = Date.now()): void {
    this.accepted++;
    const second = Math.max(0, Math.floor((at - (this.firstAt ?? at)) / 1000));
    while (this.acceptedBySecond.length <= second) this.acceptedBySecond.push(0);
    this.acceptedBySecond[second]!++;
  }

  quotaRejected(): void {
    this.rateLimited++;
  }

  preAuthRejected(): void {
    this.rateLimited++;
    this.preAuthLimited++;
  }

  /** A request arrived in the server's own stall (stalls.ts). */
  stalledRequest(): void {
    this.stalled++;
  }

  fault(kind: FaultKind): void {
    this.faultsFired[kind] = (this.faultsFired[kind] ?? 0) + 1;
  }

  connectionOpened(): void {
    this.open++;
    this.peak = Math.max(this.peak, this.open);
  }

  connectionClosed(): void {
    this.open--;
  }

  snapshot(): SimStats {
    return {
      requests: this.requests,
      byEndpoint: { ...this.byEndpoint },
      byStatus: { ...this.byStatus },
      rateLimited: this.rateLimited,
      preAuthLimited: this.preAuthLimited,
      accepted: this.accepted,
      acceptedBySecond: [...this.acceptedBySecond],
      firstRequestAt: this.firstAt,
      lastResponseAt: this.lastEnd,
      retryAfterViolations: this.ledger.violations.map((v) => ({ ...v })),
      maxConcurrent: this.maxConcurrent,
      openConnections: this.open,
      peakConnections: this.peak,
      faultsFired: { ...this.faultsFired },
      stalled: this.stalled,
    };
  }

  /** Zero the counters. Gauges restart from their current values; pending Retry-After deadlines stay in force. */
  reset(): void {
    this.requests = 0;
    this.byEndpoint = emptyByEndpoint();
    this.byStatus = {};
    this.rateLimited = 0;
    this.preAuthLimited = 0;
    this.accepted = 0;
    this.acceptedBySecond = [];
    this.firstAt = null;
    this.lastEnd = null;
    this.faultsFired = {};
    this.stalled = 0;
    this.maxConcurrent = this.inFlight;
    this.peak = this.open;
    this.ledger.clearViolations();
  }
}

function emptyByEndpoint(): Record<EndpointName, number> {
  return Object.fromEntries(Object.keys(ENDPOINTS).map((k) => [k, 0])) as Record<EndpointName, number>;
}
