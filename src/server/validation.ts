/**
 * zod issues to FastAPI validation details: `{loc: ['body', 'trajectory_groups', 0, ...], msg, type}`.
 * Union failures are resolved to the branch that got furthest, so the `loc` points at the field
 * that is wrong rather than at the whole item.
 */
import type { z } from 'zod';
import type { ValidationError } from '../schema/index.js';
import { RequestValidationError } from './http-error.js';

type Issue = z.core.$ZodIssue;
type PathKey = string | number;

/** Where a value came from, the first element of every `loc`. */
export type ValidationSource = 'body' | 'query' | 'path';

/**
 * Parses `value` with `schema`; throws a {@link RequestValidationError} whose issues are
 * located under `source` when it does not fit.
 */
export function parseOrThrow<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  source: ValidationSource,
): z.output<Schema> {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return result.data;
  throw new RequestValidationError(toValidationErrors(result.error.issues, [source]));
}

/** Converts zod issues into FastAPI validation details, prefixing every `loc` with `prefix`. */
export function toValidationErrors(issues: readonly Issue[], prefix: readonly PathKey[]): ValidationError[] {
  const details: ValidationError[] = [];
  for (const issue of issues) collect(issue, prefix, details);
  return details;
}

function collect(issue: Issue, prefix: readonly PathKey[], into: ValidationError[]): void {
  const path = issue.path.filter((key): key is PathKey => typeof key !== 'symbol');
  const loc = [...prefix, ...path];
  switch (issue.code) {
    case 'invalid_union': {
      if (issue.errors.length === 0) {
        // A discriminated union whose tag matched no option: point at the tag itself.
        const discriminator = (issue as { discriminator?: string }).discriminator;
        const tagLoc =
          discriminator !== undefined && path[path.length - 1] !== discriminator ? [...loc, discriminator] : loc;
        into.push({ loc: tagLoc, msg: issue.message, type: 'union_tag_invalid' });
        return;
      }
      const branch = bestBranch(issue.errors, 'input' in issue ? issue.input : undefined);
      if (branch === undefined) {
        if (issue.errors.flat().every(isMissing)) into.push({ loc, msg: 'Field required', type: 'missing' });
        else into.push({ loc, msg: unionMessage(issue.errors), type: 'union_type' });
        return;
      }
      for (const inner of branch) collect(inner, loc, into);
      return;
    }
    case 'unrecognized_keys':
      for (const key of issue.keys)
        into.push({ loc: [...loc, key], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
      return;
    case 'invalid_type':
      if (isMissing(issue)) into.push({ loc, msg: 'Field required', type: 'missing' });
      else into.push({ loc, msg: issue.message, type: typeName(issue.expected) });
      return;
    case 'too_small':
      into.push({
        loc,
        msg: issue.message,
        type:
          issue.origin === 'array' || issue.origin === 'string'
            ? 'too_short'
            : issue.inclusive
              ? 'greater_than_equal'
              : 'greater_than',
      });
      return;
    case 'too_big':
      into.push({
        loc,
        msg: issue.message,
        type:
          issue.origin === 'array' || issue.origin === 'string'
            ? 'too_long'
            : issue.inclusive
              ? 'less_than_equal'
              : 'less_than',
      });
      return;
    case 'invalid_value':
      into.push({ loc, msg: issue.message, type: issue.values.length === 1 ? 'literal_error' : 'enum' });
      return;
    case 'invalid_format':
      into.push({
        loc,
        msg: issue.message,
        type: issue.format === 'guid' || issue.format === 'uuid' ? 'uuid_parsing' : `${issue.format}_parsing`,
      });
      return;
    default:
      into.push({ loc, msg: issue.message, type: 'value_error' });
  }
}

/**
 * The union branch that explains the failure best: the one whose issues reach deepest into the
 * value (it matched the most structure), then the one with the fewest issues. A branch whose tag
 * (discriminator) the value carries with a wrong value wins outright; one whose tag the value does
 * not carry at all counts for nothing. `undefined` when every branch failed at the top (the
 * value's kind fits no branch).
 */
function bestBranch(branches: readonly (readonly Issue[])[], input: unknown): readonly Issue[] | undefined {
  let best: readonly Issue[] | undefined;
  let bestDepth = 0;
  for (const branch of branches) {
    const depth = Math.max(0, ...branch.map((issue) => issueDepth(issue, input)));
    if (depth > bestDepth || (depth === bestDepth && depth > 0 && best !== undefined && branch.length < best.length)) {
      best = branch;
      bestDepth = depth;
    }
  }
  return bestDepth === 0 ? undefined : best;
}

const TAG_PRESENT_DEPTH = 1_000;

function issueDepth(issue: Issue, input: unknown): number {
  const own = issue.path.length;
  if (issue.code !== 'invalid_union') return own;
  if (issue.errors.length === 0) {
    const discriminator = (issue as { discriminator?: unknown }).discriminator;
    if (typeof discriminator !== 'string') return 0;
    const holder =
      issue.path.length > 0 && issue.path[issue.path.length - 1] === discriminator
        ? issue.path.slice(0, -1)
        : issue.path;
    const value = valueAt(input, holder);
    return value !== null && typeof value === 'object' && Object.hasOwn(value, discriminator) ? TAG_PRESENT_DEPTH : 0;
  }
  return own + Math.max(0, ...issue.errors.flat().map((inner) => issueDepth(inner, valueAt(input, issue.path))));
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current = input;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

function unionMessage(branches: readonly (readonly Issue[])[]): string {
  const expected = new Set<string>();
  for (const branch of branches) {
    for (const issue of branch) if (issue.code === 'invalid_type') expected.add(issue.expected);
  }
  return expected.size > 0
    ? `Input should be one of: ${[...expected].join(', ')}`
    : 'Input matches none of the allowed forms';
}

function typeName(expected: string): string {
  switch (expected) {
    case 'string':
      return 'string_type';
    case 'number':
      return 'float_type';
    case 'int':
      return 'int_type';
    case 'boolean':
      return 'bool_type';
    case 'array':
      return 'list_type';
    case 'object':
      return 'dict_type';
    default:
      return `${expected}_type`;
  }
}

/** True for a required field that is absent (zod reports it as a wrong type `undefined`). */
function isMissing(issue: Issue): boolean {
  if (issue.code !== 'invalid_type') return false;
  if ('input' in issue) return issue.input === undefined;
  return issue.message.endsWith('received undefined');
}
