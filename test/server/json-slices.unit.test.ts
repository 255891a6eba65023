/**
 * `topLevelArrayElements`: the text ranges of a top-level array's elements, which the log route
 * stores as the groups' text. Checked against `JSON.parse` on generated JSON, and on the cases where
 * it must give no answer rather than a wrong one.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { topLevelArrayElements } from '../../src/server/json-slices.js';

const slices = (text: string, key: string): unknown[] | undefined =>
  topLevelArrayElements(text, key)?.map(([start, end]) => JSON.parse(text.slice(start, end)) as unknown);

describe('topLevelArrayElements', () => {
  it('finds exactly the elements JSON.parse finds, whatever the values, key order and spacing', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue()),
        fc.array(fc.jsonValue()),
        fc.integer({ min: 0, max: 10 }),
        fc.constantFrom(0, 1, '\t'),
        (others, elements, position, indent) => {
          const entries = Object.entries(others).filter(([key]) => key !== 'groups');
          entries.splice(Math.min(position, entries.length), 0, ['groups', elements]);
          const text = JSON.stringify(Object.fromEntries(entries), null, indent);
          const found = slices(text, 'groups');
          // A top-level key spelled with an escape gives no answer (the caller then serializes).
          const escaped = entries.some(([key]) => JSON.stringify(key).includes('\\'));
          if (escaped && found === undefined) return;
          expect(found).toEqual((JSON.parse(text) as { groups: unknown[] }).groups);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('takes the last occurrence of a repeated key, as JSON.parse does', () => {
    expect(slices('{"a":[1],"b":{"a":[9]},"a":[2, "]", {"a":[3]}]}', 'a')).toEqual([2, ']', { a: [3] }]);
  });

  it('answers nothing where the value is not an array, or where an escaped key might be the key', () => {
    expect(topLevelArrayElements('{"a":[1],"a":null}', 'a')).toBeUndefined();
    expect(topLevelArrayElements('{"a":[1],"a":"[2]"}', 'a')).toBeUndefined();
    expect(topLevelArrayElements('{"a":[1],"a":{"x":[2]}}', 'a')).toBeUndefined();
    expect(topLevelArrayElements('{"a":[1],"\\u0061":[2]}', 'a')).toBeUndefined();
    expect(topLevelArrayElements('[{"a":[1]}]', 'a')).toBeUndefined();
    expect(topLevelArrayElements('{"b":[1]}', 'a')).toBeUndefined();
    expect(slices('{"a":[]}', 'a')).toEqual([]);
  });
});
