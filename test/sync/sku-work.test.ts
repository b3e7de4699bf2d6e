/**
 * One SKU's result (src/sync/sku-work.ts, classifySkuError): which errors end the run, which
 * only that SKU (it stays queued), and which mean it is gone from the server. And the feed
 * between the list walk and the workers (src/sync/sku-feed.ts): a SKU is in hand at most once.
 */
import { describe, expect, it, vi } from "vitest";
import { ApiError, StoreError, type ApiErrorKind } from "../../src/core/errors.js";
import type { EndpointName } from "../../src/core/defaults.js";
import { classifySkuError } from "../../src/sync/sku-work.js";
import { SkuFeed } from "../../src/sync/sku-feed.js";

const api = (kind: ApiErrorKind, endpoint: EndpointName, status: number | null = null) => new ApiError(`${endpoint}: ${kind} ${status ?? ""}`, { kind, endpoint, status });

describe("classifySkuError", () => {
  it.each([
    ["a refused key", api("auth", "detail", 401), "fatal"],
    ["a quota wall", api("quota-wall", "history", 429), "fatal"],
    ["a spent budget", api("budget", "detail"), "fatal"],
    ["an unreachable server", api("unreachable", "history"), "fatal"],
    ["a local error (the database)", new StoreError("disk I/O error"), "fatal"],
    ["something that is not an Error", "boom", "fatal"],
    ["detail 404: the SKU is gone", api("http", "detail", 404), "vanished"],
    ["history 404: not a vanished SKU", api("http", "history", 404), "failed"],
    ["detail 500", api("http", "detail", 500), "failed"],
    ["detail 410", api("http", "detail", 410), "failed"],
    ["a network error", api("network", "detail"), "failed"],
    ["a timeout", api("timeout", "history"), "failed"],
    ["an invalid response (a detail for another SKU)", api("invalid-response", "detail"), "failed"],
  ])("%s -> %s", (_name, err, kind) => {
    const result = classifySkuError(err, false);
    expect(result.kind).toBe(kind);
    if (result.kind === "failed" || result.kind === "fatal") expect(result.error).toBe(err);
  });

  it("anything met after the run was stopped is 'stopped', not a failure or a fatal error", () => {
    for (const err of [api("http", "detail", 404), api("auth", "detail", 401), api("network", "history"), new DOMException("aborted", "AbortError")]) {
      expect(classifySkuError(err, true)).toEqual({ kind: "stopped" });
    }
  });
});

describe("SkuFeed", () => {
  it("queues a SKU once while it is in hand; once settled without being fetched, not again in this run", async () => {
    const feed = new SkuFeed(10, new AbortController().signal);
    expect(await feed.offer("a")).toBe(true);
    expect(await feed.offer("a", true)).toBe(false);
    expect(await feed.offer("b", true, false)).toBe(true);
    expect(feed.enqueued).toBe(2);
    const first = await feed.take();
    expect(first).toEqual({ done: false, value: { id: "a", fullHistory: false, repoll: false } });
    feed.release("a", false);
    expect(await feed.offer("a")).toBe(false);
    const second = await feed.take();
    expect(second.value).toEqual({ id: "b", fullHistory: true, repoll: false });
    feed.release("b", true);
    expect(await feed.offer("b")).toBe(true);
    expect(feed.enqueued).toBe(3);
  });

  it("a SKU listed again with a change while a worker holds it is taken again once released fetched; queued, or released unfetched, it is not", async () => {
    const feed = new SkuFeed(10, new AbortController().signal);
    await feed.offer("a");
    await feed.offer("b");
    expect((await feed.take()).value?.id).toBe("a");
    // "a" in hand, "b" still queued: both listed again, changed.
    expect(await feed.offer("a", false, false, true)).toBe(false);
    expect(await feed.offer("b", false, false, true)).toBe(false);
    feed.release("a", true);
    expect((await feed.take()).value).toEqual({ id: "a", fullHistory: false, repoll: false });
    expect((await feed.take()).value?.id).toBe("b");
    feed.release("a", true);
    feed.release("b", true);
    feed.close();
    expect((await feed.take()).done).toBe(true);
    expect(feed.enqueued).toBe(3);

    const unfetched = new SkuFeed(10, new AbortController().signal);
    await unfetched.offer("c");
    await unfetched.take();
    await unfetched.offer("c", false, false, true);
    unfetched.release("c", false);
    unfetched.close();
    expect((await unfetched.take()).done).toBe(true);
    // Listed again unchanged (not `again`) while in hand: nothing more.
    const same = new SkuFeed(10, new AbortController().signal);
    await same.offer("d");
    await same.take();
    expect(await same.offer("d")).toBe(false);
    same.release("d", true);
    same.close();
    expect((await same.take()).done).toBe(true);
  });

  it("an abort releases a producer blocked on a full queue and drops what was queued", async () => {
    const ac = new AbortController();
    const feed = new SkuFeed(1, ac.signal);
    await feed.offer("a");
    let returned = false;
    const blocked = feed.offer("b").then(() => (returned = true));
    await Promise.resolve();
    expect(returned).toBe(false);
    ac.abort();
    await blocked;
    expect(returned).toBe(true);
    expect(await feed.take()).toEqual({ done: true, value: undefined });
  });

  it("hands out no more SKUs than its in-hand limit at once, the limit read afresh at each release", async () => {
    let limit = 2;
    const feed = new SkuFeed(10, new AbortController().signal, () => limit);
    for (const id of ["a", "b", "c", "d", "e"]) await feed.offer(id);
    const taken: string[] = [];
    const takes = Array.from({ length: 5 }, () => feed.take().then((n) => taken.push(n.value!.id)));
    await new Promise((r) => setImmediate(r));
    expect(taken).toEqual(["a", "b"]);
    // One released under the same limit: one more taken, not two.
    feed.release("a", true);
    await new Promise((r) => setImmediate(r));
    expect(taken).toEqual(["a", "b", "c"]);
    // The limit grew (more requests allowed in flight): at the next release two go through at once, as the new
    // limit allows (within the turn, not at the waiting workers' RECHECK_MS re-read).
    limit = 4;
    feed.release("b", true);
    await new Promise((r) => setImmediate(r));
    expect(taken).toEqual(["a", "b", "c", "d", "e"]);
    await Promise.all(takes);
  });

  it("a worker waiting for the in-hand limit sees it grow with no SKU released (a request starting a backoff of its own)", async () => {
    vi.useFakeTimers();
    try {
      let limit = 1;
      const feed = new SkuFeed(10, new AbortController().signal, () => limit);
      await feed.offer("a");
      await feed.offer("b");
      expect((await feed.take()).value?.id).toBe("a");
      let second: string | undefined;
      const waiting = feed.take().then((n) => (second = n.value?.id));
      await vi.advanceTimersByTimeAsync(500);
      expect(second).toBeUndefined();
      limit = 2;
      await vi.advanceTimersByTimeAsync(500);
      await waiting;
      expect(second).toBe("b");
    } finally {
      vi.useRealTimers();
    }
  });

  it("an abort wakes the workers waiting for the in-hand limit, and they find the feed done", async () => {
    const ac = new AbortController();
    const feed = new SkuFeed(10, ac.signal, () => 1);
    await feed.offer("a");
    await feed.offer("b");
    expect((await feed.take()).value?.id).toBe("a");
    const waiting = feed.take();
    ac.abort();
    expect(await waiting).toEqual({ done: true, value: undefined });
  });
});
