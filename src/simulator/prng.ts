/**
 * Deterministic randomness for the simulator.
 *
 * Every piece of generated data comes from a stream derived from (seed, label, ...ints),
 * never from Math.random: the same seed and options must give byte-identical data, and
 * giving each purpose its own stream means adding a field to one generator does not
 * shift every value generated after it.
 */

/** murmur3's 32-bit finaliser: a cheap full-avalanche mix. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** 32-bit hash of a string (FNV-1a, then mixed), used to turn labels into stream ids. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return fmix32(h);
}

/** murmur3_32 over a list of 32-bit words with a seed. */
function hashWords(words: readonly number[], seed: number): number {
  let h = seed >>> 0;
  for (const w of words) {
    let k = Math.imul(w | 0, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, 0x1b873593);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  h ^= words.length * 4;
  return fmix32(h);
}

/** A stream key: the simulator seed, a purpose label and optional integers (e.g. a SKU index). */
export type StreamKey = readonly [seed: number, label: string, ...ints: number[]];

function keyWords(key: StreamKey): number[] {
  const [seed, label, ...ints] = key;
  // Split the seed into two words so seeds above 2^32 still differ.
  return [seed >>> 0, Math.floor(seed / 0x100000000) >>> 0, hashString(label), ...ints];
}

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Uniform 32-bit unsigned integer. */
  u32(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
  /** Uniform integer in [lo, hi] inclusive. */
  range(lo: number, hi: number): number;
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** Weighted choice: weights need not sum to 1; zero weights are never picked. */
  weighted<T>(items: readonly (readonly [T, number])[]): T;
  uuid(): string;
}

/**
 * sfc32 (Chris Doty-Humphrey's Small Fast Counting generator): 128-bit state, passes
 * PractRand, and much faster than anything crypto. Seeded from four independent hashes of
 * the stream key, then warmed up so nearby keys (SKU 7, SKU 8) give unrelated streams.
 */
export function createRng(...key: StreamKey): Rng {
  const words = keyWords(key);
  let a = hashWords(words, 0x243f6a88);
  let b = hashWords(words, 0x85a308d3);
  let c = hashWords(words, 0x13198a2e);
  let d = 1;
  const u32 = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return t >>> 0;
  };
  for (let i = 0; i < 12; i++) u32();
  const next = (): number => u32() / 0x100000000;
  const int = (n: number): number => Math.floor(next() * n);
  return {
    next,
    u32,
    int,
    range: (lo, hi) => lo + int(hi - lo + 1),
    chance: (p) => next() < p,
    pick<T>(items: readonly T[]): T {
      if (items.length === 0) throw new RangeError("pick from an empty list");
      return items[int(items.length)] as T;
    },
    weighted<T>(items: readonly (readonly [T, number])[]): T {
      let total = 0;
      for (const [, w] of items) total += Math.max(0, w);
      if (total <= 0) throw new RangeError("weighted pick with no positive weight");
      let r = next() * total;
      for (const [item, w] of items) {
        if (w <= 0) continue;
        r -= w;
        if (r < 0) return item;
      }
      // Floating-point leftovers land on the last positive weight.
      for (let i = items.length - 1; i >= 0; i--) {
        const entry = items[i]!;
        if (entry[1] > 0) return entry[0];
      }
      throw new RangeError("unreachable");
    },
    uuid: () => formatUuid(u32(), u32(), u32(), u32()),
  };
}

const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

function hex32(w: number): string {
  return HEX[(w >>> 24) & 0xff]! + HEX[(w >>> 16) & 0xff]! + HEX[(w >>> 8) & 0xff]! + HEX[w & 0xff]!;
}

/** Four words as a lowercase RFC 4122 version-4 UUID (version nibble 4, variant 8-b). */
function formatUuid(w0: number, w1: number, w2: number, w3: number): string {
  const v1 = ((w1 & 0xffff0fff) | 0x00004000) >>> 0;
  const v2 = ((w2 & 0x3fffffff) | 0x80000000) >>> 0;
  return (
    hex32(w0 >>> 0) +
    "-" +
    HEX[v1 >>> 24]! +
    HEX[(v1 >>> 16) & 0xff]! +
    "-" +
    HEX[(v1 >>> 8) & 0xff]! +
    HEX[v1 & 0xff]! +
    "-" +
    HEX[v2 >>> 24]! +
    HEX[(v2 >>> 16) & 0xff]! +
    "-" +
    HEX[(v2 >>> 8) & 0xff]! +
    HEX[v2 & 0xff]! +
    hex32(w3 >>> 0)
  );
}

/** One murmur3 round, as in hashWords. */
function mixIn(h: number, w: number): number {
  let k = Math.imul(w | 0, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/**
 * A UUID that is a pure function of its key (seed, label, a, b), derived without allocating.
 * History rows store small integers (SKU index, event ordinal) and format their eventId /
 * setSessionId only when rendered (1.2 M stored UUID strings would cost ~70 MB at 100k SKUs),
 * two per row, hundreds of thousands of times for a ground-truth dump. Four independent
 * 32-bit murmur3 hashes make collisions as unlikely as for random UUIDs at these volumes.
 */
export function uuidDeriver(seed: number, label: string): (a: number, b: number) => string {
  const [s0, s1, l] = keyWords([seed, label]) as [number, number, number];
  const one = (h: number, a: number, b: number): number => {
    h = mixIn(h >>> 0, s0);
    h = mixIn(h, s1);
    h = mixIn(h, l);
    h = mixIn(h, a);
    h = mixIn(h, b);
    return fmix32(h ^ 20);
  };
  return (a, b) => formatUuid(one(0x9e3779b9, a, b), one(0x7f4a7c15, a, b), one(0x94d049bb, a, b), one(0xbf58476d, a, b));
}

/**
 * mulberry32: a tiny seeded generator of floats in [0, 1), for callers outside the
 * simulator's data (tests' kill points, the bench's synthetic rows) that want one
 * reproducible stream and none of the stream-per-purpose machinery above.
 */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
