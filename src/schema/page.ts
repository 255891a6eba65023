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

/** Query of a list operation: `after` (the id of the last item seen) and `limit` (1..100, default 20). */
export const PageQuery = z.object({
  after: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});
export type PageQuery = z.output<typeof PageQuery>;

/** Query of the checkpoint list: a page query plus `order` (by step, default `asc`). */
export const CheckpointListQuery = PageQuery.extend({
  order: z.enum(['asc', 'desc']).default('asc'),
});
export type CheckpointListQuery = z.output<typeof CheckpointListQuery>;
