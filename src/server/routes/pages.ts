/** Cursor pages on the wire: `{object: "list", data, first_id, last_id, has_more}`. */
import type { CursorPage as Page } from '../../schema/index.js';

/** Wraps items with an `id` into a cursor page. */
export function toPage<T extends { readonly id: string }>(items: T[], hasMore: boolean): Page<T> {
  return {
    object: 'list',
    data: items,
    first_id: items[0]?.id ?? '',
    last_id: items[items.length - 1]?.id ?? '',
    has_more: hasMore,
  };
}
