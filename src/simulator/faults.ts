/**
 * Fault injection: rules that make the simulator misbehave the way real servers and
 * proxies do, so the client's error handling can be tested end to end. Selection is
 * deterministic (per-rule counters and a seeded PRNG), so a failing test replays exactly.
 * Faults never change data.
 */
import { ENDPOINTS, type EndpointName } from "../core/defaults.js";
import { ConfigError } from "../core/errors.js";
import { createRng, type Rng } from "./prng.js";

export const FAULT_KINDS = ["429", "503", "slow", "reset", "malformed-json", "truncated", "wrong-content-type", "html", "missing-field", "oversize", "reject-cursor"] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultRule {
  kind: FaultKind;
  /** Only requests to these endpoints (default: all five). */
  endpoint?: EndpointName | EndpointName[];
  /** Only detail / history requests for this SKU. */
  skuId?: string;
  /** Fire on each candidate request with this probability (seeded). */
  probability?: number;
  /** Fire on every Nth matching request (after `after`). */
  every?: number;
  /** Let the first N matching requests through. */
  after?: number;
  /** Fire at most this many times. */
  count?: number;
  /** 429 / 503: 'seconds:N' | 'date:N' (HTTP-date N s ahead, rounded up) | 'raw:<header value>'. 429 default seconds:1; 503 default none. */
  retryAfter?: string;
  /** 429 / 503: once fired, the next burst−1 matching requests get the same answer. */
  burst?: number;
  /**
   * 429 / 503: once fired, every matching request for this many ms gets the same answer: an outage of
   * that length (the auth store or an upstream down for a while), which every request in flight meets,
   * where `burst` counts requests. Not with `burst`.
   */
  forMs?: number;
  /** slow: delay before responding (default 1000 ms); the response is then normal unless another rule fires. */
  delayMs?: number;
  /** oversize: body size in bytes (default 20 MB). */
  bytes?: number;
}

const ENDPOINT_NAMES = Object.keys(ENDPOINTS) as EndpointName[];
const DEFAULT_SLOW_MS = 1000;
export const DEFAULT_OVERSIZE_BYTES = 20 * 1024 * 1024;
const UUID_LIKE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Parse a CLI fault spec: `kind[:key=value,...]`, e.g. `429:p=0.05,retry-after=date`,
 * `503:every=10,count=3`, `reset:p=0.01`, `malformed-json:endpoint=detail,sku=<uuid>`.
 * Keys: p|probability, every, after, count, endpoint (names joined by `|` or `+`),
 * sku|skuId, retry-after (N | seconds:N | date | date:N | raw:<value>), burst, for|forMs (ms),
 * delay|delayMs|ms, bytes (suffix k or m allowed). A raw retry-after value may contain
 * commas (HTTP-dates do), so it takes the rest of the spec: put it last.
 */
export function parseFaultSpec(spec: string): FaultRule {
  const trimmed = spec.trim();
  const colon = trimmed.indexOf(":");
  const kind = colon < 0 ? trimmed : trimmed.slice(0, colon);
  const rule: Record<string, unknown> = { kind };
  const rest = colon < 0 ? "" : trimmed.slice(colon + 1);
  const parts = rest ? rest.split(",") : [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const eq = part.indexOf("=");
    if (eq <= 0) throw new ConfigError(`fault spec "${spec}": expected key=value, got "${part}"`);
    const key = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    switch (key) {
      case "p":
      case "probability":
        rule.probability = num(spec, key, value);
        break;
      case "every":
      case "after":
      case "count":
      case "burst":
        rule[key] = num(spec, key, value);
        break;
      case "for":
      case "forMs":
        rule.forMs = num(spec, key, value);
        break;
      case "delay":
      case "delayMs":
      case "ms":
        rule.delayMs = num(spec, key, value);
        break;
      case "bytes":
        rule.bytes = bytes(spec, value);
        break;
      case "endpoint":
        rule.endpoint = value.split(/[|+]/).map((s) => s.trim());
        if ((rule.endpoint as string[]).length === 1) rule.endpoint = (rule.endpoint as string[])[0];
        break;
      case "sku":
      case "skuId":
        rule.skuId = value;
        break;
      case "retry-after":
      case "retryAfter":
        if (value.startsWith("raw:")) {
          value = [part.slice(eq + 1).trimStart(), ...parts.slice(i + 1)].join(",");
          i = parts.length;
        }
        rule.retryAfter = /^\d+$/.test(value) ? `seconds:${value}` : value === "date" ? "date:1" : value;
        break;
      default:
        throw new ConfigError(`fault spec "${spec}": unknown key "${key}"`);
    }
  }
  return validateFaultRule(rule, `fault spec "${spec}"`);
}

function num(spec: string, key: string, value: string): number {
  const n = Number(value);
  if (value === "" || !Number.isFinite(n)) throw new ConfigError(`fault spec "${spec}": ${key} must be a number, got "${value}"`);
  return n;
}

function bytes(spec: string, value: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(k|kb|m|mb)?$/i.exec(value);
  if (!m) throw new ConfigError(`fault spec "${spec}": bytes must be a size like 20m, got "${value}"`);
  const unit = (m[2] ?? "").toLowerCase();
  return Math.round(Number(m[1]) * (unit.startsWith("m") ? 1024 * 1024 : unit.startsWith("k") ? 1024 : 1));
}

/** Check a rule from JSON (admin endpoint, setFaults) or a parsed spec; throws ConfigError. */
export function validateFaultRule(input: unknown, what = "fault rule"): FaultRule {
  if (typeof input !== "object" || input === null || Array.isArray(input)) throw new ConfigError(`${what}: expected an object`);
  const r = input as Record<string, unknown>;
  const fail = (msg: string): never => {
    throw new ConfigError(`${what}: ${msg}`);
  };
  if (!FAULT_KINDS.includes(r.kind as FaultKind)) fail(`kind must be one of ${FAULT_KINDS.join(", ")}, got ${JSON.stringify(r.kind)}`);
  const out: FaultRule = { kind: r.kind as FaultKind };
  const known = new Set(["kind", "endpoint", "skuId", "probability", "every", "after", "count", "retryAfter", "burst", "forMs", "delayMs", "bytes"]);
  for (const key of Object.keys(r)) if (!known.has(key)) fail(`unknown field "${key}"`);
  if (r.endpoint !== undefined) {
    const list = Array.isArray(r.endpoint) ? r.endpoint : [r.endpoint];
    for (const e of list) if (!ENDPOINT_NAMES.includes(e as EndpointName)) fail(`endpoint must be one of ${ENDPOINT_NAMES.join(", ")}, got ${JSON.stringify(e)}`);
    out.endpoint = Array.isArray(r.endpoint) ? (list as EndpointName[]) : (r.endpoint as EndpointName);
  }
  if (r.skuId !== undefined) {
    if (typeof r.skuId !== "string" || !UUID_LIKE.test(r.skuId)) fail(`skuId must be a UUID`);
    out.skuId = (r.skuId as string).toLowerCase();
  }
  const numberField = (key: "probability" | "every" | "after" | "count" | "burst" | "forMs" | "delayMs" | "bytes", min: number, max: number, int: boolean): void => {
    const v = r[key];
    if (v === undefined) return;
    if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max || (int && !Number.isInteger(v))) {
      fail(`${key} must be ${int ? "an integer" : "a number"} in [${min}, ${max}], got ${JSON.stringify(v)}`);
    }
    out[key] = v as number;
  };
  numberField("probability", 0, 1, false);
  numberField("every", 1, Number.MAX_SAFE_INTEGER, true);
  numberField("after", 0, Number.MAX_SAFE_INTEGER, true);
  numberField("count", 0, Number.MAX_SAFE_INTEGER, true);
  numberField("burst", 1, Number.MAX_SAFE_INTEGER, true);
  numberField("forMs", 1, 3_600_000, true);
  numberField("delayMs", 0, 600_000, true);
  numberField("bytes", 1, 1024 * 1024 * 1024, true);
  if (r.retryAfter !== undefined) {
    if (typeof r.retryAfter !== "string" || !/^(seconds:\d+|date:\d+|raw:.*)$/s.test(r.retryAfter)) {
      fail(`retryAfter must be seconds:N, date:N or raw:<value>, got ${JSON.stringify(r.retryAfter)}`);
    }
    // Anything is allowed except what cannot be sent as a header value at all.
    if (!/^[\t\x20-\x7e\x80-\xff]*$/.test(r.retryAfter as string)) fail(`retryAfter contains characters not allowed in a header`);
    if (r.kind !== "429" && r.kind !== "503") fail(`retryAfter only applies to 429 and 503`);
    out.retryAfter = r.retryAfter as string;
  }
  if (r.burst !== undefined && r.kind !== "429" && r.kind !== "503") fail(`burst only applies to 429 and 503`);
  if (r.forMs !== undefined && r.kind !== "429" && r.kind !== "503") fail(`forMs only applies to 429 and 503`);
  if (r.forMs !== undefined && r.burst !== undefined) fail(`give burst (requests) or forMs (time), not both`);
  if (r.delayMs !== undefined && r.kind !== "slow") fail(`delayMs only applies to slow`);
  if (r.bytes !== undefined && r.kind !== "oversize") fail(`bytes only applies to oversize`);
  return out;
}

/** The request facts rules select on. */
export interface FaultRequest {
  endpoint: EndpointName;
  /** Path SKU id of detail / history requests. */
  skuId: string | null;
  hasCursor: boolean;
}

export interface FaultDecision {
  /** Sum of fired `slow` rules' delays. */
  delayMs: number;
  /** The response-changing rule that fired, if any. */
  fault: FaultRule | null;
}

interface RuleState {
  rule: FaultRule;
  rng: Rng;
  seen: number;
  fired: number;
  burstLeft: number;
  /** forMs: the outage in course lasts until then (clock ms). */
  outageUntil: number;
}

/**
 * Rules are checked in order. Every `slow` rule sees every request; the first other rule
 * that fires decides the response, and later non-slow rules do not see that request
 * (their counters do not advance). A rule's counters count the requests it matched.
 */
export class FaultEngine {
  private states: RuleState[];

  constructor(
    rules: readonly FaultRule[],
    seed: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.states = rules.map((rule, i) => ({ rule, rng: createRng(seed, "faults", i), seen: 0, fired: 0, burstLeft: 0, outageUntil: -Infinity }));
  }

  get rules(): FaultRule[] {
    return this.states.map((s) => s.rule);
  }

  decide(req: FaultRequest): FaultDecision {
    let delayMs = 0;
    let fault: FaultRule | null = null;
    for (const s of this.states) {
      const slow = s.rule.kind === "slow";
      if (fault && !slow) continue;
      if (!matches(s.rule, req)) continue;
      if (!this.fires(s)) continue;
      if (slow) delayMs += s.rule.delayMs ?? DEFAULT_SLOW_MS;
      else fault = s.rule;
    }
    return { delayMs, fault };
  }

  private fires(s: RuleState): boolean {
    const { rule } = s;
    if (s.burstLeft > 0) {
      s.burstLeft--;
      return true;
    }
    if (rule.forMs !== undefined && this.clock() < s.outageUntil) return true;
    s.seen++;
    const n = s.seen - (rule.after ?? 0);
    if (n <= 0) return false;
    if (rule.count !== undefined && s.fired >= rule.count) return false;
    if (rule.every !== undefined && n % rule.every !== 0) return false;
    if (rule.probability !== undefined && !(s.rng.next() < rule.probability)) return false;
    s.fired++;
    if ((rule.kind === "429" || rule.kind === "503") && rule.burst !== undefined && rule.burst > 1) s.burstLeft = rule.burst - 1;
    if (rule.forMs !== undefined) s.outageUntil = this.clock() + rule.forMs;
    return true;
  }
}

function matches(rule: FaultRule, req: FaultRequest): boolean {
  if (rule.endpoint !== undefined) {
    const list = Array.isArray(rule.endpoint) ? rule.endpoint : [rule.endpoint];
    if (!list.includes(req.endpoint)) return false;
  }
  if (rule.skuId !== undefined && rule.skuId !== req.skuId?.toLowerCase()) return false;
  if (rule.kind === "reject-cursor" && !req.hasCursor) return false;
  return true;
}

/** The Retry-After header a 429/503 rule sends at `nowMs`, or null for none. */
export function faultRetryAfter(rule: FaultRule, nowMs: number): string | null {
  const spec = rule.retryAfter ?? (rule.kind === "429" ? "seconds:1" : null);
  if (spec === null) return null;
  const [form, ...rest] = spec.split(":");
  const arg = rest.join(":");
  if (form === "seconds") return String(Number(arg));
  if (form === "date") return new Date(Math.ceil((nowMs + Number(arg) * 1000) / 1000) * 1000).toUTCString();
  return arg;
}

/** A body with one field the client's schema requires taken out. */
export function withoutRequiredField(endpoint: EndpointName, body: unknown): unknown {
  const b = structuredClone(body) as Record<string, unknown>;
  const firstOf = (key: string): Record<string, unknown> | undefined => {
    const list = b[key];
    return Array.isArray(list) && list.length ? (list[0] as Record<string, unknown>) : undefined;
  };
  switch (endpoint) {
    case "workspace":
      delete b.workspace;
      break;
    case "locations": {
      const first = firstOf("locations");
      if (first) delete first.id;
      else delete b.locations;
      break;
    }
    case "list": {
      const first = firstOf("items");
      if (first) delete first.id;
      else delete b.items;
      break;
    }
    case "detail":
      delete (b.sku as Record<string, unknown>).id;
      break;
    case "history": {
      const first = firstOf("items");
      if (first) delete first.quantity;
      else delete b.items;
      break;
    }
  }
  return b;
}

/** What a reverse proxy shows when the upstream is down; sent with status 200 by the `html` fault. */
export const PROXY_ERROR_PAGE = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

/** The two ends of an oversize body; padding in between makes it exactly `bytes` long (valid JSON). */
export function oversizeFrame(bytes: number): { head: string; tail: string; padding: number } {
  const head = '{"items":[],"page":{"nextCursor":null},"padding":"';
  const tail = '"}';
  return { head, tail, padding: Math.max(0, bytes - head.length - tail.length) };
}
