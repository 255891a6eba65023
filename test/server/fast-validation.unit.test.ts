/**
 * The log route's fast validator (`fastParseLogRequest`) against the zod schema it stands in for:
 * over the conformance corpus and fuzzed variants of real log requests, the route accepts exactly
 * what `LogRequest` accepts, with the same parsed value, and answers every reject with the same
 * 422 details (the fast path never builds a 422 itself: it defers to zod, also after it filled
 * trajectory defaults in place).
 */
import { describe, expect, it } from 'vitest';
import { jsonPaths, seededRandom } from '../support/json-fuzz.js';
import { fastParseLogRequest, fastParseTrajectory } from '../../src/schema/fast-parse.js';
import { LogRequest, Trajectory } from 'policyloop/schema';
import { RequestValidationError } from '../../src/server/http-error.js';
import { parseOrThrow } from '../../src/server/validation.js';
import { corpus } from '../schema/corpus/index.js';
import { artTrajectory } from '../schema/corpus/fixtures.js';

type Verdict = { ok: true; value: unknown } | { ok: false; issues: unknown };

function verdict(parse: () => unknown): Verdict {
  try {
    return { ok: true, value: parse() };
  } catch (error) {
    if (error instanceof RequestValidationError) return { ok: false, issues: error.issues };
    throw error;
  }
}

/** What the route does: the fast path, else zod (which builds the 422). */
function routeParse(body: unknown): Verdict {
  return verdict(() => fastParseLogRequest(body) ?? parseOrThrow(LogRequest, body, 'body'));
}

/** What zod alone says of an untouched copy. */
function zodParse(body: unknown): Verdict {
  return verdict(() => parseOrThrow(LogRequest, body, 'body'));
}

const copy = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** Checks one body both ways; returns whether the fast path took it. */
function expectSame(body: unknown): boolean {
  const expected = zodParse(copy(body));
  const input = copy(body);
  const took = fastParseLogRequest(copy(body)) !== undefined;
  expect(routeParse(input)).toEqual(expected);
  return took;
}

/** A log request wrapping `item` where the corpus schema names it. */
function wrap(schema: string, value: unknown): unknown {
  const request = (trajectory: unknown): unknown => ({
    split: 'train',
    trajectory_groups: [{ trajectories: [trajectory] }],
  });
  switch (schema) {
    case 'LogRequest':
      return value;
    case 'TrajectoryGroup':
      return { split: 'train', trajectory_groups: [value] };
    case 'Trajectory':
      return request(value);
    case 'AdditionalHistory':
      return request({ additional_histories: [value] });
    case 'Metrics':
      return request({ metrics: value });
    default:
      // Messages, Choices and their parts go where a trajectory holds them.
      return request({ messages_and_choices: [value] });
  }
}

const REPLACEMENTS: unknown[] = [null, 0, -1, 1.5, 2 ** 60, '', 'x', true, [], {}, [1], { role: 'user' }, 'stop'];

const replacement = (next: () => number): unknown => copy(REPLACEMENTS[Math.floor(next() * REPLACEMENTS.length)]);

function mutate(body: unknown, next: () => number): unknown {
  const mutated = copy(body);
  const all = jsonPaths(mutated);
  const count = 1 + Math.floor(next() * 3);
  for (let step = 0; step < count && all.length > 0; step += 1) {
    const path = all[Math.floor(next() * all.length)] as (string | number)[];
    let holder = mutated as Record<string | number, unknown>;
    for (const key of path.slice(0, -1)) holder = holder?.[key] as Record<string | number, unknown>;
    if (holder === null || typeof holder !== 'object') continue;
    const key = path[path.length - 1] as string | number;
    const choice = next();
    if (choice < 0.3 && !Array.isArray(holder)) delete holder[key];
    else if (choice < 0.4) (holder as Record<string, unknown>)['extra_key'] = replacement(next);
    else holder[key] = replacement(next);
  }
  return mutated;
}

const baseRequests: unknown[] = [
  {
    split: 'train',
    model_id: 'm',
    trajectory_groups: [
      { trajectories: [artTrajectory, { reward: 1, metrics: { ok: true } }], metrics: { n: 2 }, logs: ['a'] },
      {
        trajectories: [{ messages_and_choices: [{ role: 'user', content: 'hi' }], start_time: '2026-01-01T00:00:00Z' }],
        exceptions: [{ type: 'E', message: 'm', traceback: 't', extra: 1 }],
      },
    ],
  },
];

describe('the fast log-request validator', () => {
  it('gives the same verdict, value and 422 as zod on every corpus case', () => {
    let taken = 0;
    for (const entry of corpus) {
      if (expectSame(wrap(entry.schema, entry.value))) taken += 1;
    }
    // The corpus has plenty the fast path takes itself (not only deferrals to zod).
    expect(taken).toBeGreaterThan(20);
  });

  it('gives the same verdict, value and 422 as zod on 3,000 fuzzed log requests', () => {
    const next = seededRandom(12);
    const valid = corpus.filter((entry) => entry.valid).map((entry) => wrap(entry.schema, entry.value));
    const bases = [...baseRequests, ...valid];
    let accepted = 0;
    let rejected = 0;
    for (let index = 0; index < 3_000; index += 1) {
      const body = mutate(bases[index % bases.length], next);
      expectSame(body);
      if (zodParse(copy(body)).ok) accepted += 1;
      else rejected += 1;
    }
    expect(accepted).toBeGreaterThan(100);
    expect(rejected).toBeGreaterThan(100);
  });

  it('fills a trajectory’s defaults like zod and takes what zod takes', () => {
    const value = { messages_and_choices: [{ role: 'user', content: 'hi' }] };
    expect(fastParseTrajectory(copy(value))).toEqual(Trajectory.parse(copy(value)));
    expect(fastParseTrajectory({ reward: Number.NaN })).toBeUndefined();
    expect(Trajectory.safeParse({ reward: Number.NaN }).success).toBe(false);
  });
});
