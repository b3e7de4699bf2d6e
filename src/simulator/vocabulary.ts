/**
 * Fixed word lists and code tables the generator draws from. Kept apart from the
 * generator so the data's "look" can change without touching its logic. Changing any
 * list changes the generated data for every seed (that is expected; seeds are only
 * stable within one version).
 */

export const BRANDS = ["Northwind", "Acme", "Lumen", "Kestrel", "Bluefin", "Oakline", "Vireo", "Halcyon"] as const;

/** A product family decides which options its SKUs vary by. */
export interface ProductFamily {
  nouns: readonly string[];
  options: Readonly<Record<string, readonly string[]>>;
  units: readonly string[];
}

export const FAMILIES: readonly ProductFamily[] = [
  {
    nouns: ["T-Shirt", "Hoodie", "Rain Jacket", "Polo Shirt", "Fleece Vest"],
    options: { size: ["XS", "S", "M", "L", "XL"], color: ["Black", "White", "Navy", "Olive", "Red"] },
    units: ["ea"],
  },
  {
    nouns: ["Running Shoe", "Trail Boot", "Sandal"],
    options: { size: ["240", "250", "260", "270", "280"] },
    units: ["pair"],
  },
  {
    nouns: ["Water Bottle", "Travel Mug", "Lunch Box"],
    options: { color: ["Steel", "Sage", "Coral", "Sand"], capacity: ["350ml", "500ml", "750ml"] },
    units: ["ea"],
  },
  {
    nouns: ["Coffee Beans", "Green Tea", "Granola"],
    options: { weight: ["250g", "500g", "1kg"] },
    units: ["pack", "bag"],
  },
  {
    nouns: ["Desk Lamp", "USB-C Cable", "Wireless Mouse", "Notebook"],
    options: {},
    units: ["ea", "box"],
  },
];

export const ADJECTIVES = ["Classic", "Organic", "Everyday", "Premium", "Compact", "Lightweight", "Heritage", "Urban"] as const;

/** Movement event types. `adjustment` can go either way; the others have a fixed direction. */
export interface EventType {
  code: string;
  name: string;
  direction: "in" | "out" | "either";
}

export const EVENT_TYPES = {
  receipt: { code: "receipt", name: "Receipt", direction: "in" },
  shipment: { code: "shipment", name: "Shipment", direction: "out" },
  transferIn: { code: "transfer_in", name: "Transfer in", direction: "in" },
  transferOut: { code: "transfer_out", name: "Transfer out", direction: "out" },
  adjustment: { code: "adjustment", name: "Adjustment", direction: "either" },
  return: { code: "return", name: "Customer return", direction: "in" },
} as const satisfies Record<string, EventType>;

export type EventTypeKey = keyof typeof EVENT_TYPES;

export const SET_TYPE_CODE = "regular";

/** Notes are shared string instances (no per-row allocation), except PO / RMA numbers. */
export const NOTES = {
  receipt: ["Inbound from supplier", "Restock", null, null],
  shipment: ["Online order", "Wholesale order", null, null, null],
  transfer: ["Rebalancing", "Replenish pick face", null],
  adjustment: ["Damaged in transit", "Found during cycle count", "Write-off: expired", null],
  return: ["Customer return", null],
  set: ["Cycle count", "Annual stock-take", null, null],
} as const;

export const FRESHNESS_NOT_CLEAN = ["dirty", "rebuilding", "failed"] as const;
export type FreshnessStatus = "clean" | (typeof FRESHNESS_NOT_CLEAN)[number];

/** Node kinds: the document only fixes `location` for roots. */
export const NODE_KIND = { root: "location", section: "section", leaf: "leaf" } as const;

/** A, B, ..., Z, AA, AB, ... for root names and codes. */
export function letters(n: number): string {
  let s = "";
  let i = n;
  do {
    s = String.fromCharCode(65 + (i % 26)) + s;
    i = Math.floor(i / 26) - 1;
  } while (i >= 0);
  return s;
}
