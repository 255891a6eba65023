/**
 * Validation whose work and issue list stay bounded, for values from untrusted callers. zod makes
 * one issue per bad element and keeps them all: an array of millions of wrong values costs
 * gigabytes, and an array nested in an array of ~125k issues overflows the stack (zod forwards an
 * inner array's issues with `push(...issues)`). So a large value is first walked here, alongside
 * its schema: arrays, records, objects, unions and pipes are descended into, everything else is a
 * leaf handed to zod, and the walk stops once it has found `maxIssues` issues. Only a value that
 * the walk found (almost) clean goes to zod as a whole, which then gives the usual result and
 * issues. Internal: not part of `policyloop/schema`.
 *
 * The walk is sound in one direction: every issue it reports is an issue zod reports for the same
 * place (leaf issues are zod's own). It may miss whole-value checks (array lengths, refinements),
 * which only zod's run of a clean value finds; those add a handful of issues, never one per element.
 */
import type { z } from 'zod';

type Issue = z.core.$ZodIssue;
type PathKey = PropertyKey;
type Schema = z.core.$ZodType;

/** What {@link boundedSafeParse} found. */
export type BoundedParseResult<Output> =
  | { success: true; data: Output }
  | {
      success: false;
      /** zod issues, at most `maxIssues` of them (a union counts as its branches' issues). */
      issues: Issue[];
      /**
       * True when the value was not checked to its end because `maxIssues` issues were found:
       * there may be more.
       */
      stopped: boolean;
    };

/** Options of {@link boundedSafeParse}. */
export interface BoundedParseOptions {
  /** Issues after which validation stops. @default 100 */
  maxIssues?: number | undefined;
  /**
   * Values with at most this many arrays, objects and primitives go to zod directly: zod's issues
   * for them are few enough to keep. @default 10000
   */
  smallValueNodes?: number | undefined;
}

/** Issues after which validation stops, by default. */
export const DEFAULT_MAX_ISSUES = 100;

const DEFAULT_SMALL_VALUE_NODES = 10_000;

/**
 * `schema.safeParse(value, { reportInput: true })` with bounded work: at most `maxIssues` issues
 * are collected, and a large value that has more is not checked to its end (`stopped`). A value
 * that passes gets zod's own output.
 * @example
 * const result = boundedSafeParse(LogRequest, body, { maxIssues: 100 });
 * if (!result.success && result.stopped) console.log('more than 100 issues');
 */
export function boundedSafeParse<S extends z.ZodType>(
  schema: S,
  value: unknown,
  options: BoundedParseOptions = {},
): BoundedParseResult<z.output<S>> {
  const maxIssues = options.maxIssues ?? DEFAULT_MAX_ISSUES;
  const small = options.smallValueNodes ?? DEFAULT_SMALL_VALUE_NODES;
  if (countNodes(value, small) > small) {
    const found = walk(schema as unknown as Schema, value, maxIssues);
    if (found.count >= maxIssues) return { success: false, issues: found.issues, stopped: true };
    // Fewer issues than the bound: zod's whole run is as cheap, and its report is the usual one.
  }
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return { success: true, data: result.data };
  return { success: false, issues: result.error.issues, stopped: false };
}

/** Number of values (arrays, objects, primitives) in `value`, counted up to `limit + 1`. Iterative. */
export function countNodes(value: unknown, limit: number): number {
  const stack: unknown[] = [value];
  let count = 0;
  while (stack.length > 0) {
    const current = stack.pop();
    count += 1;
    if (count > limit) return count;
    if (current === null || typeof current !== 'object') continue;
    if (Array.isArray(current)) {
      // Primitives are counted without being pushed: a long flat array costs no stack growth.
      for (const item of current) {
        if (item !== null && typeof item === 'object') stack.push(item);
        else count += 1;
      }
    } else {
      for (const key in current) {
        if (!Object.hasOwn(current, key)) continue;
        const item = (current as Record<string, unknown>)[key];
        if (item !== null && typeof item === 'object') stack.push(item);
        else count += 1;
      }
    }
    if (count > limit) return count;
  }
  return count;
}

/** Issues found under one node (paths relative to it), and how many they count for. */
interface Found {
  issues: Issue[];
  count: number;
}

const CLEAN: Found = { issues: [], count: 0 };

type Def = Record<string, unknown> & { type: string };

function defOf(schema: Schema): Def {
  return schema._zod.def as unknown as Def;
}

function isRecordLike(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Prepends `key` to the path of each issue (they were made relative to a child). */
function under(key: PathKey, found: Found, into: Found): void {
  for (const issue of found.issues) {
    (issue as { path: PathKey[] }).path = [key, ...issue.path];
    into.issues.push(issue);
  }
  into.count += found.count;
}

/** The schema's own zod issues for `value` (a leaf, or a value that fails at its top). */
function leaf(schema: Schema, value: unknown): Found {
  const result = (schema as unknown as z.ZodType).safeParse(value, { reportInput: true });
  if (result.success) return CLEAN;
  return { issues: [...result.error.issues], count: result.error.issues.length };
}

/** Walks `value` with `schema`, stopping once `budget` issues are found. */
function walk(schema: Schema, value: unknown, budget: number): Found {
  const def = defOf(schema);
  switch (def.type) {
    case 'unknown':
    case 'any':
      return CLEAN;
    // The common leaves are checked inline (a zod call per element would double the cost of a
    // large valid value); anything with checks, a format or a wrong value asks zod.
    case 'string':
      return typeof value === 'string' && isPlain(def) ? CLEAN : leaf(schema, value);
    case 'boolean':
      return typeof value === 'boolean' && isPlain(def) ? CLEAN : leaf(schema, value);
    case 'number':
      return isPlainNumber(def, value) ? CLEAN : leaf(schema, value);
    case 'literal':
      return (def['values'] as readonly unknown[]).includes(value) && isPlain(def) ? CLEAN : leaf(schema, value);
    case 'enum':
      return Object.values(def['entries'] as object).includes(value) && isPlain(def) ? CLEAN : leaf(schema, value);
    case 'optional':
      return value === undefined ? CLEAN : walk(def['innerType'] as Schema, value, budget);
    case 'nullable':
      return value === null ? CLEAN : walk(def['innerType'] as Schema, value, budget);
    case 'default':
    case 'prefault':
      return value === undefined ? CLEAN : walk(def['innerType'] as Schema, value, budget);
    case 'array':
      return Array.isArray(value) ? walkArray(def, value, budget) : leaf(schema, value);
    case 'object':
      return isRecordLike(value) ? walkObject(def, value, budget) : leaf(schema, value);
    case 'record':
      return isRecordLike(value) ? walkRecord(schema, def, value, budget) : leaf(schema, value);
    case 'union':
      return walkUnion(schema, def, value, budget);
    case 'pipe':
      return walkPipe(def, value, budget);
    default:
      return leaf(schema, value);
  }
}

/** A schema without checks, format or coercion: its type test is the whole check. */
function isPlain(def: Def): boolean {
  const checks = def['checks'] as readonly unknown[] | undefined;
  return (checks === undefined || checks.length === 0) && def['check'] === undefined && def['coerce'] !== true;
}

/** `z.number()` (finite) or `z.int()` (safe integer) without further checks. */
function isPlainNumber(def: Def, value: unknown): boolean {
  if (typeof value !== 'number') return false;
  const checks = def['checks'] as readonly unknown[] | undefined;
  if ((checks !== undefined && checks.length > 0) || def['coerce'] === true) return false;
  if (def['check'] === undefined) return Number.isFinite(value);
  return def['check'] === 'number_format' && def['format'] === 'safeint' && Number.isSafeInteger(value);
}

function walkArray(def: Def, value: readonly unknown[], budget: number): Found {
  const element = def['element'] as Schema;
  const found: Found = { issues: [], count: 0 };
  for (let index = 0; index < value.length && found.count < budget; index += 1) {
    const inner = walk(element, value[index], budget - found.count);
    if (inner.count > 0) under(index, inner, found);
  }
  return found;
}

function walkObject(def: Def, value: Record<string, unknown>, budget: number): Found {
  const shape = def['shape'] as Record<string, Schema>;
  const found: Found = { issues: [], count: 0 };
  for (const key of Object.keys(shape)) {
    if (found.count >= budget) return found;
    const inner = walk(shape[key] as Schema, value[key], budget - found.count);
    if (inner.count > 0) under(key, inner, found);
  }
  const catchall = def['catchall'] as Schema | undefined;
  if (catchall !== undefined && defOf(catchall).type === 'never') {
    const keys = Object.keys(value).filter((key) => !Object.hasOwn(shape, key));
    if (keys.length > 0) {
      found.issues.push({
        code: 'unrecognized_keys',
        keys,
        path: [],
        input: value,
        message: `Unrecognized key${keys.length > 1 ? 's' : ''}: ${keys
          .slice(0, 10)
          .map((key) => JSON.stringify(key))
          .join(', ')}${keys.length > 10 ? ', ...' : ''}`,
      } as Issue);
      found.count += 1;
    }
  }
  return found;
}

function walkRecord(schema: Schema, def: Def, value: Record<string, unknown>, budget: number): Found {
  const keyType = def['keyType'] as z.ZodType;
  const valueType = def['valueType'] as Schema;
  const found: Found = { issues: [], count: 0 };
  for (const key in value) {
    if (found.count >= budget) return found;
    if (!Object.hasOwn(value, key)) continue;
    const item = value[key];
    if (keyType.safeParse(key).success) {
      const inner = walk(valueType, item, budget - found.count);
      if (inner.count > 0) under(key, inner, found);
    } else {
      // A bad key: zod's own issues for this one entry (its values are leaves in our schemas).
      const inner = leaf(schema, { [key]: item });
      found.issues.push(...inner.issues);
      found.count += inner.count;
    }
  }
  return found;
}

function walkUnion(schema: Schema, def: Def, value: unknown, budget: number): Found {
  const options = def['options'] as readonly Schema[];
  const discriminator = def['discriminator'] as string | undefined;
  if (discriminator !== undefined) {
    // zod picks the one option whose tag the value carries; any other case fails at the top.
    if (!isRecordLike(value)) return leaf(schema, value);
    const tag = value[discriminator];
    // The tag values zod's own lookup uses (`propValues`, filled from each option's literal).
    const option = options.find(
      (candidate) =>
        tag !== undefined &&
        (candidate._zod as { propValues?: Record<string, ReadonlySet<unknown>> }).propValues?.[discriminator]?.has(
          tag,
        ) === true,
    );
    return option === undefined ? leaf(schema, value) : walk(option, value, budget);
  }
  const errors: Issue[][] = [];
  let count = 0;
  for (const option of options) {
    // Each branch gets the whole budget: one branch's many issues must not hide that another fits.
    const inner = walk(option, value, budget);
    if (inner.count === 0) return CLEAN;
    errors.push(inner.issues);
    count += inner.count;
  }
  const issue = { code: 'invalid_union', errors, path: [], input: value, message: 'Invalid input' } as unknown as Issue;
  return { issues: [issue], count };
}

function walkPipe(def: Def, value: unknown, budget: number): Found {
  const input = def['in'] as Schema;
  const output = def['out'] as Schema;
  // A transform (`z.preprocess`) has nothing to walk; any other input side is walked first, so
  // that zod's run of it below is of a clean value, and cheap.
  if (defOf(input).type !== 'transform') {
    const first = walk(input, value, budget);
    if (first.count > 0) return first;
  }
  const result = (input as unknown as z.ZodType).safeParse(value);
  if (!result.success) return { issues: [...result.error.issues], count: result.error.issues.length };
  return walk(output, result.data, budget);
}
