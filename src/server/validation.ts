/**
 * zod issues to FastAPI validation details: `{loc: ['body', 'trajectory_groups', 0, ...], msg, type}`.
 * Union failures are resolved to the branch that got furthest, so the `loc` points at the field
 * that is wrong rather than at the whole item.
 */
import type { z } from 'zod';
import { boundedSafeParse } from '../schema/bounded-parse.js';
import type { ValidationError } from '../schema/index.js';
import { RequestValidationError } from './http-error.js';

type Issue = z.core.$ZodIssue;
type PathKey = string | number;

/** Where a value came from, the first element of every `loc`. */
export type ValidationSource = 'body' | 'query' | 'path';

/**
 * Issues a 422 lists at most; past them one last entry (type `too_many_errors`) says how many
 * more there were, or that validation stopped there.
 */
export const MAX_REPORTED_ISSUES = 100;

/**
 * Parses `value` with `schema`; throws a {@link RequestValidationError} whose issues are
 * located under `source` when it does not fit. The work is bounded: a value with more than
 * {@link MAX_REPORTED_ISSUES} issues is not checked to its end (see `boundedSafeParse`).
 */
export function parseOrThrow<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  source: ValidationSource,
): z.output<Schema> {
  const result = boundedSafeParse(schema, value, { maxIssues: MAX_REPORTED_ISSUES });
  if (result.success) return result.data;
  throw new RequestValidationError(toValidationErrors(result.issues, [source], { stopped: result.stopped }));
}

/** Options of {@link toValidationErrors}. */
export interface ValidationErrorsOptions {
  /** Details listed at most; the rest are counted in one last entry. @default MAX_REPORTED_ISSUES */
  limit?: number | undefined;
  /** The issues are a prefix: validation stopped before the end of the value. @default false */
  stopped?: boolean | undefined;
}

/**
 * Converts zod issues into FastAPI validation details, prefixing every `loc` with `prefix`: at
 * most `limit` of them, then one `too_many_errors` entry with the number left out (or saying
 * that validation stopped when `stopped`).
 */
export function toValidationErrors(
  issues: readonly Issue[],
  prefix: readonly PathKey[],
  options: ValidationErrorsOptions = {},
): ValidationError[] {
  const sink: Sink = { details: [], limit: options.limit ?? MAX_REPORTED_ISSUES, unlisted: 0 };
  for (const issue of issues) collect(issue, prefix, sink);
  const { details, limit, unlisted } = sink;
  const where = String(prefix[0] ?? 'value');
  if (options.stopped === true) {
    details.push({
      loc: [...prefix],
      msg: `Validation stopped after ${limit} issues; the rest of the ${where} was not checked`,
      type: 'too_many_errors',
      ctx: { limit },
    });
  } else if (unlisted > 0) {
    details.push({
      loc: [...prefix],
      msg: `${unlisted} more issue${unlisted === 1 ? '' : 's'} not listed (at most ${limit} are)`,
      type: 'too_many_errors',
      ctx: { limit, unlisted },
    });
  }
  return details;
}

/** Details collected so far; past `limit` they are only counted. */
interface Sink {
  details: ValidationError[];
  limit: number;
  unlisted: number;
}

function add(sink: Sink, detail: ValidationError): void {
  if (sink.details.length < sink.limit) sink.details.push(detail);
  else sink.unlisted += 1;
}

function collect(issue: Issue, prefix: readonly PathKey[], into: Sink): void {
  const path = issue.path.filter((key): key is PathKey => typeof key !== 'symbol');
  const loc = [...prefix, ...path];
  switch (issue.code) {
    case 'invalid_union': {
      if (issue.errors.length === 0) {
        // A discriminated union whose tag matched no option: point at the tag itself.
        const discriminator = (issue as { discriminator?: string }).discriminator;
        const tagLoc =
          discriminator !== undefined && path[path.length - 1] !== discriminator ? [...loc, discriminator] : loc;
        add(into, { loc: tagLoc, msg: issue.message, type: 'union_tag_invalid' });
        return;
      }
      const branch = bestBranch(issue.errors, 'input' in issue ? issue.input : undefined);
      if (branch === undefined) {
        if (issue.errors.flat().every(isMissing)) add(into, { loc, msg: 'Field required', type: 'missing' });
        else add(into, { loc, msg: unionMessage(issue.errors), type: 'union_type' });
        return;
      }
      for (const inner of branch) collect(inner, loc, into);
      return;
    }
    case 'unrecognized_keys':
      for (let index = 0; index < issue.keys.length; index += 1) {
        if (into.details.length >= into.limit) {
          // Counted without building a detail each: a strict object may carry a million extra keys.
          into.unlisted += issue.keys.length - index;
          return;
        }
        add(into, {
          loc: [...loc, issue.keys[index] as string],
          msg: 'Extra inputs are not permitted',
          type: 'extra_forbidden',
        });
      }
      return;
    case 'invalid_type':
      if (isMissing(issue)) add(into, { loc, msg: 'Field required', type: 'missing' });
      else add(into, { loc, msg: issue.message, type: typeName(issue.expected) });
      return;
    case 'too_small':
      add(into, {
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
      add(into, {
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
      add(into, { loc, msg: issue.message, type: issue.values.length === 1 ? 'literal_error' : 'enum' });
      return;
    case 'invalid_format':
      add(into, {
        loc,
        msg: issue.message,
        type:
          issue.format === 'guid' || issue.format === 'uuid'
            ? 'uuid_parsing'
            : issue.format === 'regex'
              ? 'string_pattern_mismatch'
              : `${issue.format}_parsing`,
      });
      return;
    default:
      add(into, { loc, msg: issue.message, type: 'value_error' });
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
    let depth = 0;
    for (const issue of branch) depth = Math.max(depth, issueDepth(issue, input));
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
  // A loop, not `Math.max(...spread)`: a branch may hold more issues than a call has room for arguments.
  const at = valueAt(input, issue.path);
  let deepest = 0;
  for (const branch of issue.errors) for (const inner of branch) deepest = Math.max(deepest, issueDepth(inner, at));
  return own + deepest;
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
