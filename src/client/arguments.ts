/** Checks of caller arguments, made before any request so that bad input has no side effects. */
import { z } from 'zod';
import { InvalidArgumentError } from './errors.js';

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
  throw new InvalidArgumentError(argument, parsed.error.issues, context);
}

const PathParameter = z.string().trim().min(1, 'Expected a non-empty id');

/** A path parameter checked to be a non-empty string, then URL-encoded. */
export function encodePathParameter(value: unknown, argument: string, context: string): string {
  return encodeURIComponent(parseArgument(PathParameter, value, argument, context));
}

/** Query of a list (`after`, `limit`); unknown keys are rejected to catch typos. */
export const ListQuery = z.strictObject({
  after: z.string().optional(),
  limit: z.int().min(1).max(100).optional(),
});

/** Query of the checkpoint list: {@link ListQuery} plus `order`. */
export const CheckpointListQuery = ListQuery.extend({ order: z.enum(['asc', 'desc']).optional() });
