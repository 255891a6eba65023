/** Checks of caller arguments, made before any request so that bad input has no side effects. */
import { z } from 'zod';
import { listParams } from '../schema/index.js';
import { InvalidArgumentError } from './errors.js';
import type { RequestOptions } from './options.js';
import { PagePromise } from './pagination.js';
import type { PageBody } from './pagination.js';
import type { Transport } from './transport.js';

/**
 * Parses `value` with `schema` (strictly: it must match) and returns the output, defaults
 * applied; throws {@link InvalidArgumentError} naming `argument` and `context` otherwise.
 */
export function parseArgument<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  argument: string,
  context: string,
): z.output<Schema> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new InvalidArgumentError(argument, parsed.error.issues, { context });
}

const PathParameter = z.string().trim().min(1, 'Expected a non-empty id');

/** A path parameter checked to be a non-empty string, then URL-encoded. */
export function encodePathParameter(value: unknown, argument: string, context: string): string {
  return encodeURIComponent(parseArgument(PathParameter, value, argument, context));
}

/** What a cursor-paged GET of one resource's sub-list needs to know. */
export interface PagedListSpec<Item extends { id: string }, Query extends z.ZodObject<z.ZodRawShape>> {
  /** The path as documented, e.g. `/preview/models/{model_id}/checkpoints`. */
  template: string;
  /** The caller's id for the path parameter, and the argument name to blame when it is bad. */
  id: { value: unknown; argument: string };
  /** The path with the encoded id in place. */
  path: (encodedId: string) => string;
  /**
   * The list's query as the schema declares it (`CheckpointListQuery`, ...): the caller's query
   * is checked strictly against its {@link listParams} form.
   */
  querySchema: Query;
  /** The caller's query, as passed. */
  query: unknown;
  /** Schema of one page of the response. */
  response: z.ZodType<PageBody<Item>>;
  /** The page schema's name, for messages. */
  responseName: string;
}

/**
 * A cursor-paged GET: the id and query are checked before any request (a bad argument rejects
 * the returned promise and sends nothing), then pages are fetched from `after` on, each page's
 * `after` taking the place of the caller's.
 */
export function pagedList<Item extends { id: string }, Query extends z.ZodObject<z.ZodRawShape>>(
  transport: Transport,
  spec: PagedListSpec<Item, Query>,
  options: RequestOptions | undefined,
): PagePromise<Item> {
  const context = `GET ${spec.template}`;
  let path: string;
  let first: string | undefined;
  let rest: Record<string, string | number | undefined>;
  try {
    path = spec.path(encodePathParameter(spec.id.value, spec.id.argument, context));
    const { after, ...others } = parseArgument(listParams(spec.querySchema), spec.query, 'query', context) as Record<
      string,
      string | number | undefined
    >;
    first = typeof after === 'string' ? after : undefined;
    rest = others;
  } catch (error) {
    return PagePromise.reject(error);
  }
  return new PagePromise(
    (after) =>
      transport.request(
        {
          method: 'GET',
          path,
          template: spec.template,
          query: { after, ...rest },
          response: spec.response,
          responseName: spec.responseName,
        },
        options,
      ),
    first,
  );
}
