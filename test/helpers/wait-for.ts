/**
 * Wait for a state, not for a time: poll `probe` every 100 ms until it returns something truthy
 * (returned), or fail after `timeoutMs` saying `what()` was awaited. The timeout only bounds a
 * test that would otherwise hang; no assertion depends on how fast the state came.
 */
export type Maybe<T> = T | undefined | null | false;

export async function waitFor<T>(probe: () => Maybe<T> | Promise<Maybe<T>>, what: () => string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
