/** Helpers for tests that mutate JSON values at random: a seeded generator and every path. */

/** A seeded generator of numbers in [0, 1), so a failing case can be replayed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

/** Every path to an object key or array index in a JSON value. */
export function jsonPaths(
  value: unknown,
  prefix: (string | number)[] = [],
  into: (string | number)[][] = [],
): (string | number)[][] {
  if (value !== null && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      const path = [...prefix, Array.isArray(value) ? Number(key) : key];
      into.push(path);
      jsonPaths(child, path, into);
    }
  }
  return into;
}
