/** Cursor pages: `{object: "list", data, first_id, last_id, has_more}`. */
import { z } from 'zod';

/**
 * Builds the schema of a cursor page of `item`.
 * @example
 * const CheckpointPage = page(CheckpointResponse);
 */
export function page<Item extends z.ZodType>(item: Item) {
  return z.object({
    /** @default "list" */
    object: z.string().default('list'),
    data: z.array(item),
    /** Id of the first item. @default "" */
    first_id: z.string().default(''),
    /** Id of the last item: the `after` cursor of the next page. @default "" */
    last_id: z.string().default(''),
    has_more: z.boolean(),
  });
}

/** A page of items of type `T` as the wire carries it (the client wraps it in its `Page` class). */
export interface CursorPage<T> {
  /** Always `list`. */
  object: string;
  /** The items of the page. */
  data: T[];
  /** The id of the first item ('' when empty). */
  first_id: string;
  /** The id of the last item ('' when empty): the `after` cursor of the next page. */
  last_id: string;
  /** Whether more items follow. */
  has_more: boolean;
}

/**
 * Query of a list operation: `after` (the id of the last item seen) and `limit` (1..100, default
 * 20). Every list query extends it, and each is declared once, here or in `local.ts`: the service
 * parses query strings with it (numbers coerced from text, defaults applied), and the client's
 * argument check ({@link listParams}) and parameter type ({@link ListParams}) are derived from it.
 */
export const PageQuery = z.object({
  /** The id of the last item seen; the page starts after it. */
  after: z.string().optional(),
  /** Items per page, 1..100. @default 20 */
  limit: z.coerce.number().int().min(1).max(100).default(20),
});
export type PageQuery = z.output<typeof PageQuery>;

/** Query of the checkpoint list: a page query plus `order` (by step, default `asc`). */
export const CheckpointListQuery = PageQuery.extend({
  /** Order by step. @default "asc" */
  order: z.enum(['asc', 'desc']).default('asc'),
});
export type CheckpointListQuery = z.output<typeof CheckpointListQuery>;

/** Longest long poll of a job's event list (`wait_ms`), in milliseconds. */
export const MAX_EVENT_WAIT_MS = 30_000;

/**
 * Query of a job's event list: a page query plus the local service's `wait_ms` (a long poll: when
 * no event follows `after` yet, the answer waits up to that long for one; other services ignore it).
 */
export const EventListQuery = PageQuery.extend({
  /** A long poll, 0..30000 ms (the local service only). @default 0 (answer at once) */
  wait_ms: z.coerce.number().int().min(0).max(MAX_EVENT_WAIT_MS).default(0),
});
export type EventListQuery = z.output<typeof EventListQuery>;

/**
 * What a caller passes for a list query `Query`: each field optional (the service applies the
 * defaults), with the type the service parses it to.
 */
export type ListParams<Query extends z.ZodType> = { [Key in keyof z.output<Query>]?: z.output<Query>[Key] | undefined };

// biome-ignore lint/suspicious/noExplicitAny: any object schema
const derivedParams = new WeakMap<z.ZodObject<any>, z.ZodType>();

/**
 * The caller's side of a list query, derived from the service's declaration so that a parameter
 * is declared once: strict (an unknown key is a typo and is refused), every field optional, no
 * default applied (the service applies it), and numbers taken only as numbers (the service coerces
 * them from query-string text; a caller passes numbers).
 * @example
 * listParams(CheckpointListQuery).parse({ limit: 1, order: 'desc' }); // { limit: 1, order: 'desc' }
 * listParams(CheckpointListQuery).parse({ limt: 1 }); // throws: unrecognized key "limt"
 */
export function listParams<Query extends z.ZodObject<z.ZodRawShape>>(query: Query): z.ZodType<ListParams<Query>> {
  let params = derivedParams.get(query);
  if (params === undefined) {
    const shape: Record<string, z.ZodType> = {};
    for (const [key, field] of Object.entries(query.shape)) shape[key] = callerField(field as z.ZodType).optional();
    params = z.strictObject(shape);
    derivedParams.set(query, params);
  }
  return params as z.ZodType<ListParams<Query>>;
}

/** A query field as a caller passes it: without its default or optional wrapper, numbers not coerced. */
function callerField(field: z.ZodType): z.ZodType {
  const definition = field._zod.def as { type: string; innerType?: z.ZodType; coerce?: boolean };
  if ((definition.type === 'default' || definition.type === 'optional') && definition.innerType !== undefined)
    return callerField(definition.innerType);
  if (definition.type === 'number' && definition.coerce === true)
    return field.clone({ ...field._zod.def, coerce: false } as typeof field._zod.def);
  return field;
}
