/**
 * Preloaded (`--expose-gc --import`) into the gatehouse processes of `keys` and `upgrade-churn`
 * only: SIGUSR2 runs a full garbage collection, so that heap figures read from /metrics count what
 * is still held, not garbage that no collection has needed to free yet.
 */
process.on("SIGUSR2", () => {
  globalThis.gc?.();
  globalThis.gc?.();
});
