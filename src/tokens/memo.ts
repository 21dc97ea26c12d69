/** A per-process memo for what is costly to make and the same every time it is asked for. */

/**
 * Calls `make` once per distinct key; later calls get the first call's promise. A promise that
 * rejects is forgotten, so the next call tries again.
 */
export function memoized<K, V>(make: (key: K) => Promise<V>): (key: K) => Promise<V> {
  const made = new Map<K, Promise<V>>();
  return (key) => {
    let value = made.get(key);
    if (value === undefined) {
      value = make(key);
      made.set(key, value);
      value.catch(() => made.delete(key));
    }
    return value;
  };
}
