/**
 * A list query is declared once (the service's schema); the client's strict check is derived from
 * it: a parameter added to the declaration reaches both sides.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CheckpointListQuery, EventListQuery, listParams, PageQuery } from 'policyloop/schema';

describe('listParams', () => {
  it('takes what a caller passes: numbers as numbers, no defaults applied, unknown keys refused', () => {
    const params = listParams(CheckpointListQuery);
    expect(params.parse({})).toEqual({});
    expect(params.parse({ limit: 1, order: 'desc', after: 'c1' })).toEqual({ limit: 1, order: 'desc', after: 'c1' });
    expect(params.safeParse({ limit: '1' }).error?.issues[0]?.message).toBe(
      'Invalid input: expected number, received string',
    );
    expect(params.safeParse({ limit: 0 }).success).toBe(false);
    expect(params.safeParse({ limit: 1.5 }).success).toBe(false);
    expect(params.safeParse({ order: 'random' }).success).toBe(false);
    expect(params.safeParse({ limt: 1 }).error?.issues[0]?.code).toBe('unrecognized_keys');
    expect(listParams(EventListQuery).safeParse({ wait_ms: 30_001 }).success).toBe(false);
  });

  it('leaves the service side as declared: text coerced to numbers, defaults applied, unknown keys ignored', () => {
    expect(CheckpointListQuery.parse({ limit: '5', other: 'x' })).toEqual({ limit: 5, order: 'asc' });
    expect(EventListQuery.parse({})).toEqual({ limit: 20, wait_ms: 0 });
  });

  it('derives a new parameter from the one declaration', () => {
    const TaggedListQuery = PageQuery.extend({
      tag: z.string().min(1).optional(),
      depth: z.coerce.number().int().default(3),
    });
    const params = listParams(TaggedListQuery);
    expect(params.parse({ tag: 'a', depth: 2 })).toEqual({ tag: 'a', depth: 2 });
    expect(params.safeParse({ depth: '2' }).success).toBe(false);
    expect(params.safeParse({ tag: '' }).success).toBe(false);
    expect(TaggedListQuery.parse({ depth: '2' })).toEqual({ limit: 20, depth: 2 });
    // One derived schema per declaration.
    expect(listParams(TaggedListQuery)).toBe(params);
  });
});
