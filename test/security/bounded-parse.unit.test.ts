/**
 * The bounded validator (`boundedSafeParse`, which every request body goes through) against zod
 * itself, with the walk forced on for every value (`smallValueNodes: 0`): over the conformance
 * corpus of every wire schema and fuzzed variants of it, it accepts exactly what zod accepts with
 * zod's value; below the issue bound its issues are zod's; and when it stops at the bound, zod
 * rejects the value too and every plain issue it reports is one zod reports at the same place.
 */
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { jsonPaths, seededRandom } from '../support/json-fuzz.js';
import type { z } from 'zod';
import { boundedSafeParse } from '../../src/schema/bounded-parse.js';
import * as schemas from 'policyloop/schema';
import { corpus as allCases } from '../schema/corpus/index.js';

/**
 * Request bodies are parsed JSON: corpus cases whose value JSON cannot carry (a function, `NaN`,
 * there for the client's own schemas) are no body the validator can see.
 */
const corpus = allCases.filter((entry) => {
  const text = JSON.stringify(entry.value);
  return entry.value === undefined || (text !== undefined && isDeepStrictEqual(JSON.parse(text), entry.value));
});

const copy = <T>(value: T): T => (value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T));

const REPLACEMENTS: unknown[] = [null, 0, -1, 1.5, '', 'x', true, [], {}, [1, 'a', null], { role: 'user' }, 'stop'];

function mutate(value: unknown, next: () => number): unknown {
  const mutated = copy({ root: value }) as Record<string, unknown>;
  const all = jsonPaths(mutated);
  const count = 1 + Math.floor(next() * 4);
  for (let step = 0; step < count; step += 1) {
    const path = all[Math.floor(next() * all.length)] as (string | number)[];
    let holder = mutated as Record<string | number, unknown>;
    for (const key of path.slice(0, -1)) holder = holder?.[key] as Record<string | number, unknown>;
    if (holder === null || typeof holder !== 'object') continue;
    const key = path[path.length - 1] as string | number;
    const choice = next();
    if (choice < 0.25 && !Array.isArray(holder)) delete holder[key];
    else if (choice < 0.35) (holder as Record<string, unknown>)['extra_key'] = copy(REPLACEMENTS[step]);
    else if (choice < 0.5 && Array.isArray(holder[key]))
      // A longer array of the same (or a wrong) element: the case the walk is for.
      holder[key] = Array.from({ length: 50 }, (_, index) => copy((holder[key] as unknown[])[0] ?? index));
    else holder[key] = copy(REPLACEMENTS[Math.floor(next() * REPLACEMENTS.length)]);
  }
  return mutated['root'];
}

type Issue = z.core.$ZodIssue;
const key = (issue: Issue): string => JSON.stringify([issue.path, issue.code, issue.message]);

/** Checks one value against one schema; returns whether the walk stopped at the bound. */
function expectSound(schema: z.ZodType, value: unknown, maxIssues: number): boolean {
  const expected = schema.safeParse(copy(value), { reportInput: true });
  const result = boundedSafeParse(schema, copy(value), { maxIssues, smallValueNodes: 0 });
  expect(result.success).toBe(expected.success);
  if (result.success) {
    expect(result.data).toEqual(expected.data);
    return false;
  }
  if (!result.stopped) {
    expect(result.issues).toEqual(expected.error?.issues);
    return false;
  }
  const zodIssues = new Set((expected.error?.issues ?? []).map(key));
  for (const issue of result.issues) if (issue.code !== 'invalid_union') expect(zodIssues).toContain(key(issue));
  return true;
}

const schemaOf = (name: string): z.ZodType => (schemas as unknown as Record<string, z.ZodType>)[name] as z.ZodType;

describe('the bounded validator', () => {
  it('agrees with zod on every corpus case, walked', () => {
    for (const entry of corpus) expectSound(schemaOf(entry.schema), entry.value, 100);
  });

  it('agrees with zod on 4,000 fuzzed corpus values, stopping at small bounds only where zod rejects', () => {
    const next = seededRandom(15);
    let stopped = 0;
    let accepted = 0;
    for (let index = 0; index < 4_000; index += 1) {
      const entry = corpus[index % corpus.length];
      if (entry === undefined) continue;
      const value = index % 3 === 0 ? entry.value : mutate(entry.value, next);
      if (expectSound(schemaOf(entry.schema), value, 1 + (index % 3))) stopped += 1;
      else if (schemaOf(entry.schema).safeParse(copy(value)).success) accepted += 1;
    }
    // Both sides are exercised: values it stopped on, and values zod accepts.
    expect(stopped).toBeGreaterThan(100);
    expect(accepted).toBeGreaterThan(300);
  });

  it('stops after the bound on a million wrong elements, with at most that many issues', () => {
    const value = { split: 'train', trajectory_groups: new Array<number>(1_000_000).fill(1) };
    const result = boundedSafeParse(schemas.LogRequest, value, { maxIssues: 100 });
    expect(result.success).toBe(false);
    if (result.success) return;
    expect(result.stopped).toBe(true);
    expect(result.issues).toHaveLength(100);
    expect(result.issues[99]?.path).toEqual(['trajectory_groups', 99]);
  });
});
