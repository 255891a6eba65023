/**
 * How a value reads after "got" (or "returned") in an error message: the one rendering the
 * option checks, schema issue messages, response errors and reward checks share.
 */

/**
 * A short, single-line rendering of any value: numbers, booleans, `null` and `undefined` as
 * written; strings and plain JSON (objects, arrays) as JSON, cut to `maxLength` characters with
 * `…`; functions, symbols and class instances by their kind (`a function`, `an AbortSignal`).
 * @example
 * describeValue(-1); // '-1'
 * describeValue('judge'); // '"judge"'
 * describeValue({ trajectories: [] }); // '{"trajectories":[]}'
 * describeValue(new AbortController().signal); // 'an AbortSignal'
 */
export function describeValue(value: unknown, maxLength = 80): string {
  if (value === undefined) return 'undefined';
  if (value === null) return 'null';
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return JSON.stringify(cut(value, maxLength - 2));
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return value.toString();
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  if (!Array.isArray(value) && typeof name === 'string' && name !== 'Object' && name !== '')
    return `${/^[AEIOU]/.test(name) ? 'an' : 'a'} ${name}`;
  try {
    return cut(JSON.stringify(value), maxLength);
  } catch {
    // A cycle or a bigint inside: name the kind instead.
    return Array.isArray(value) ? `an array of ${value.length}` : 'an object';
  }
}

function cut(text: string, maxLength: number): string {
  return text.length > maxLength ? `${text.slice(0, Math.max(1, maxLength - 1))}…` : text;
}
