/** A deep copy for plain data (what messages, choices and metadata are), faster than `structuredClone`. */

const NOT_PLAIN = Symbol('not plain');
const MAX_DEPTH = 64;

/** A string, number, boolean, null or undefined: copied as it is. */
function isLeaf(value: unknown): boolean {
  const type = typeof value;
  return type === 'string' || type === 'number' || type === 'boolean' || value === null || value === undefined;
}

function copyPlain(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'function' || typeof value === 'symbol') throw NOT_PLAIN;
    return value;
  }
  if (depth > MAX_DEPTH) throw NOT_PLAIN;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) throw NOT_PLAIN;
    const copy: unknown[] = new Array(value.length);
    for (let index = 0; index < value.length; index += 1) {
      const item: unknown = value[index];
      // Leaves (a logprob's `bytes` are all numbers) without a call each.
      copy[index] = isLeaf(item) ? item : copyPlain(item, depth + 1);
    }
    return copy;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) throw NOT_PLAIN;
  // A spread copies the own keys in one step (V8 keeps the source's shape); then the values that
  // are objects are replaced by their copies. `for...in` with an own-key check visits what
  // `Object.keys` lists without allocating the key array: this runs for every object of every
  // recorded message and Choice.
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const key in copy) {
    if (!Object.hasOwn(copy, key)) continue;
    const own = copy[key];
    if (isLeaf(own)) continue;
    const child = copyPlain(own, depth + 1);
    // A plain assignment to `__proto__` would set the prototype instead of replacing the key.
    if (key === '__proto__')
      Object.defineProperty(copy, key, { value: child, enumerable: true, writable: true, configurable: true });
    else copy[key] = child;
  }
  return copy;
}

/**
 * A deep copy of `value`: plain objects, arrays and primitives are copied directly (about ten
 * times as fast as `structuredClone` on small values); anything else (a `Date`, a `Map`, a cycle,
 * very deep nesting) is left to `structuredClone`, with its semantics.
 */
export function clonePlain<T>(value: T): T {
  try {
    return copyPlain(value, 0) as T;
  } catch (error) {
    if (error !== NOT_PLAIN) throw error;
    return structuredClone(value);
  }
}
