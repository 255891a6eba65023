/** An environment's tasks read in order, whatever form its spec gave them in. */
import { invalidOption } from '../internal/option-schema.js';
import type { DatasetSource } from './environment-types.js';

/** Whether `value` is a form a dataset may take: an array, an (async) iterable (not a string), or a function. */
export function isDatasetSource(value: unknown): boolean {
  if (typeof value === 'function') return true;
  if (typeof value !== 'object' || value === null) return false;
  return Symbol.iterator in value || Symbol.asyncIterator in value;
}

/**
 * The tasks of `source` (the spec's field `name`), read in order: a function is called when the
 * read starts (each read calls it again, so a lazy or remote set is read afresh), then its array
 * or (async) iterable is read.
 */
export async function* readDataset<T>(source: DatasetSource<T>, name: string): AsyncGenerator<T, void, undefined> {
  const tasks: unknown = typeof source === 'function' ? await source() : source;
  if (typeof tasks !== 'object' || tasks === null || !(Symbol.iterator in tasks || Symbol.asyncIterator in tasks)) {
    throw invalidOption(`${name}()`, tasks, 'an array, an iterable or an async iterable of tasks');
  }
  yield* tasks as Iterable<T> | AsyncIterable<T>;
}
