/**
 * Options declared once, as zod schemas, and checked with one kind of message.
 *
 * A public options type stays an interface with its JSDoc: that is what an editor shows on hover,
 * also from the published `.d.ts` (a `z.infer` type loses the per-field docs there). Beside it,
 * {@link optionsSchema} declares its check: a zod shape the compiler holds to exactly the
 * interface's keys, each field accepting what the interface allows and returning a value of its
 * type (defaults applied). Adding an option is its line in the interface (with its docs) and its
 * line in the shape; forgetting either is a type error. A default is declared once, in the shape
 * (`.default(...)`); test/package/option-defaults.unit.test.ts holds the `@default` tag to it.
 *
 * {@link parseOptions} and {@link parseValue} parse with the schema and throw
 * {@link InvalidArgumentError} naming the option: "Expected `timeout` to be a positive number of
 * milliseconds, got -1", or, for a key no option has, "Unknown option `maxStep`; did you mean
 * `maxSteps`?". Every message a schema gives (the `error` of a zod check, or the fields of
 * {@link option}) is what was expected, worded to follow "to be"; plain zod checks get such a
 * wording here (`z.boolean()`: "true or false", `z.enum([...])`: `one of "a", "b"`).
 * @example
 * interface JudgeOptions {
 *   /** The judge model. *\/
 *   model: string;
 *   /** Retries of a failed call. @default 2 *\/
 *   maxRetries?: number | undefined;
 * }
 * const JudgeOptions = optionsSchema<JudgeOptions>()({
 *   model: option.nonEmptyString(),
 *   maxRetries: option.retryCount().default(2),
 * });
 * const { model, maxRetries } = parseOptions(JudgeOptions, options);
 */
import { z } from 'zod';
import { closestName } from './closest-name.js';
import { MAX_TIMER_MS } from './delay.js';
import { describeValue } from './describe-value.js';
import { InvalidArgumentError } from './errors.js';
import { formatPath, valueAtPath } from './format-issues.js';

/** Bounds of {@link option.integer}. */
export interface IntegerBounds {
  /** The smallest value allowed. */
  min?: number | undefined;
  /** The largest value allowed. */
  max?: number | undefined;
}

/** Bounds of {@link option.number}: finite numbers in range, and maybe `Infinity`. */
export interface NumberBounds {
  /** The smallest value allowed (inclusive). */
  min?: number | undefined;
  /** Whether `min` itself is excluded (`> min` rather than `>= min`). */
  exclusiveMin?: boolean | undefined;
  /** The largest finite value allowed (inclusive). */
  max?: number | undefined;
  /** Whether `Infinity` is allowed (e.g. "no limit"). */
  allowInfinity?: boolean | undefined;
  /** The unit, for the message: `milliseconds`. */
  unit?: string | undefined;
}

/** "an integer >= 1", "an integer from 0 to 65535", ...: what {@link option.integer} expects. */
function integerExpected({ min, max }: IntegerBounds): string {
  if (min !== undefined && max !== undefined) return `an integer from ${min} to ${max}`;
  if (min === 0) return 'a non-negative integer';
  if (min !== undefined) return `an integer >= ${min}`;
  if (max !== undefined) return `an integer <= ${max}`;
  return 'an integer';
}

/** "a positive number of milliseconds, at most 2147483647 (or Infinity)", ...: what {@link option.number} expects. */
function numberExpected({ min, max, exclusiveMin = false, allowInfinity = false, unit }: NumberBounds): string {
  const of = unit === undefined ? 'number' : `number of ${unit}`;
  let expected: string;
  if (min === 0 && exclusiveMin) expected = `a positive ${of}`;
  else if (min === 0) expected = `a non-negative ${of}`;
  else if (min !== undefined) expected = `a ${of} ${exclusiveMin ? '>' : '>='} ${min}`;
  else expected = `a finite ${of}`;
  if (max !== undefined) expected += `, at most ${max}`;
  if (allowInfinity) expected += ' (or Infinity)';
  return expected;
}

/** `one of "cispo", "ppo"`. */
function oneOfExpected(values: readonly unknown[]): string {
  return `one of ${values.map((value) => (typeof value === 'string' ? JSON.stringify(value) : String(value))).join(', ')}`;
}

const OPTIONS_OBJECT = 'an options object';
// `flush(signal)` was an old form: a signal passed where options go must not pass for empty options.
const NOT_A_SIGNAL = 'an options object (pass `{ signal }`)';

/** Whether `value` may be an options object: any object but an array or an `AbortSignal`. */
function isOptionsObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof AbortSignal);
}

/**
 * The field schemas every options object reuses, each with its message. Plain zod says the rest
 * (`z.boolean()`, `z.enum([...])`, `z.array(...)`), worded the same way by {@link parseOptions}.
 */
export const option = {
  /**
   * An integer between `min` and `max` (inclusive).
   * @example
   * groupSize: option.integer({ min: 1 }).default(1)
   */
  integer(bounds: IntegerBounds = {}) {
    const error = integerExpected(bounds);
    let schema = z.number({ error }).int({ error });
    if (bounds.min !== undefined) schema = schema.gte(bounds.min, { error });
    if (bounds.max !== undefined) schema = schema.lte(bounds.max, { error });
    return schema;
  },

  /**
   * A number: finite (or `Infinity` when allowed), not NaN, within the bounds.
   * @example
   * maxExceptions: option.number({ min: 0 }).default(0)
   */
  number(bounds: NumberBounds = {}): z.ZodType<number, number> {
    const error = numberExpected(bounds);
    const { min, max, exclusiveMin = false } = bounds;
    let finite = z.number({ error });
    if (min !== undefined) finite = exclusiveMin ? finite.gt(min, { error }) : finite.gte(min, { error });
    if (max !== undefined) finite = finite.lte(max, { error });
    if (bounds.allowInfinity !== true) return finite;
    return z.union([finite, z.literal(Number.POSITIVE_INFINITY)], { error });
  },

  /**
   * A time limit or wait in milliseconds: positive, at most what a timer holds (about 24.8 days),
   * or `Infinity` for none when `allowInfinity`.
   * @example
   * timeout: option.timeout({ allowInfinity: true }).default(300_000)
   */
  timeout({ allowInfinity = false }: { allowInfinity?: boolean | undefined } = {}): z.ZodType<number, number> {
    return option.number({ min: 0, exclusiveMin: true, max: MAX_TIMER_MS, allowInfinity, unit: 'milliseconds' });
  },

  /** A retry count: an integer >= 0. */
  retryCount() {
    return option.integer({ min: 0 });
  },

  /** A wait before a retry, in milliseconds: >= 0 and at most what a timer holds. */
  retryDelay(): z.ZodType<number, number> {
    return option.number({ min: 0, max: MAX_TIMER_MS, unit: 'milliseconds' });
  },

  /** `true` or `false` (what plain `z.boolean()` also says). */
  boolean() {
    return z.boolean({ error: 'true or false' });
  },

  /** Any string (what plain `z.string()` also says). */
  string() {
    return z.string({ error: 'a string' });
  },

  /** A string that is not empty or only white space (kept as given, not trimmed). */
  nonEmptyString() {
    const error = 'a non-empty string';
    return z.string({ error }).refine((value) => value.trim() !== '', { error });
  },

  /**
   * One of `values` (strings, numbers or booleans).
   * @example
   * lossFn: option.oneOf(['cispo', 'ppo']).optional()
   */
  oneOf<const Value extends string | number | boolean>(values: readonly [Value, ...Value[]]) {
    return z.literal(values, { error: oneOfExpected(values) });
  },

  /**
   * A function, typed as `Fn` (its arguments and result are the caller's to trust).
   * @example
   * scoreGroup: option.function<GroupScorer<unknown>>().optional()
   */
  // biome-ignore lint/complexity/noBannedTypes: any function is accepted; the caller names its type
  function<Fn extends Function>() {
    return z.custom<Fn>((value) => typeof value === 'function', { error: 'a function' });
  },

  /** An `AbortSignal` (from an `AbortController`, `AbortSignal.timeout(...)`...). */
  signal() {
    return z.instanceof(AbortSignal, { error: 'an AbortSignal' });
  },

  /**
   * A value `test` accepts, typed as `T`: for what zod cannot see, like "has `chat.completions.create`".
   * `expected` is the message: 'a TrainingClient'.
   * @example
   * client: option.like<ChatClient>((value) => typeof value?.chat?.completions?.create === 'function', 'a chat client')
   */
  // biome-ignore lint/suspicious/noExplicitAny: the test reads whatever the value has, as optional chaining does
  like<T>(test: (value: any) => boolean, expected: string) {
    return z.custom<T>((value) => test(value), { error: expected });
  },

  /**
   * An options object whose keys are checked where it is used (handed on as it is): any object but
   * an array or an `AbortSignal`.
   */
  options<T extends object>() {
    return z.custom<T>(isOptionsObject, {
      error: (issue) => (issue.input instanceof AbortSignal ? NOT_A_SIGNAL : OPTIONS_OBJECT),
    });
  },
};

/** A compile-time complaint about one field of an options shape: what is wrong and which option. */
interface ShapeError<Key, Why extends string> {
  readonly optionsSchemaError: Why;
  readonly option: Key;
}

/** `S` when it is the right schema for option `K` of `T`, else a {@link ShapeError} saying why. */
type CheckField<T, K extends keyof T, S> = S extends z.ZodType
  ? [z.output<S>] extends [T[K]]
    ? [T[K]] extends [z.input<S>]
      ? S
      : ShapeError<
          K,
          'the schema refuses values the interface allows (missing .optional() or .default()? .readonly() for a readonly array?)'
        >
    : ShapeError<K, 'the schema returns values the interface does not allow'>
  : ShapeError<K, 'not a zod schema'>;

/**
 * What a shape must be to check options interface `T`: one schema per key of `T` (no more, no
 * fewer), each returning a value of the key's type and accepting every value the type allows.
 */
export type OptionsShape<T, Shape> = {
  [K in keyof T]-?: K extends keyof Shape ? CheckField<T, K, Shape[K]> : ShapeError<K, 'no schema for this option'>;
} & { [K in Exclude<keyof Shape, keyof T>]: ShapeError<K, 'not an option of the interface'> };

/** The schema {@link optionsSchema} makes: an options object (not an `AbortSignal`), then the strict object. */
export type OptionsSchema<Shape extends z.ZodRawShape> = z.ZodPipe<
  z.ZodCustom<z.input<z.ZodObject<Shape, z.core.$strict>>, z.input<z.ZodObject<Shape, z.core.$strict>>>,
  z.ZodObject<Shape, z.core.$strict>
>;

/**
 * Declares the check of options interface `T` (generic interfaces with `unknown` for their
 * parameters): `optionsSchema<T>()(shape)`. The compiler holds the shape to exactly `T`'s keys
 * (see {@link OptionsShape}); the schema refuses unknown keys, and an `AbortSignal` passed where
 * the options go. Shapes are plain objects: options shared by two interfaces are one shape spread
 * into both.
 * @example
 * const GatherOptions = optionsSchema<GatherOptions<unknown>>()({
 *   groupSize: option.integer({ min: 1 }).default(1),
 *   signal: option.signal().optional(),
 * });
 */
export function optionsSchema<T extends object>() {
  return <Shape extends z.ZodRawShape>(shape: Shape & OptionsShape<T, Shape>): OptionsSchema<Shape> => {
    const object = z.strictObject(shape as Shape, { error: OPTIONS_OBJECT });
    return z
      .custom<z.input<typeof object>>((value) => !(value instanceof AbortSignal), { error: NOT_A_SIGNAL })
      .pipe(object);
  };
}

/** Where {@link parseOptions} reports a bad value. */
export interface ParseOptionsSettings {
  /**
   * The argument's name, for a value that is not an options object at all.
   * @default 'options'
   */
  name?: string | undefined;
  /**
   * Whether each option is named under `name` (`options.timeout`) rather than alone (`timeout`).
   * @default false
   */
  prefixed?: boolean | undefined;
}

/**
 * Parses an options argument (`undefined` counts as `{}`, so defaults apply) and returns the
 * output, typed and with defaults; throws {@link InvalidArgumentError} naming the option otherwise.
 * @example
 * const { groupSize, timeout } = parseOptions(GatherOptions, options);
 */
export function parseOptions<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  settings: ParseOptionsSettings = {},
): z.output<Schema> {
  const { name = 'options', prefixed = false } = settings;
  const input = value === undefined ? {} : value;
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  throw invalidArgument(schema, input, name, prefixed ? name : undefined);
}

/**
 * Parses one argument or option that is not an options object: `step`, `maxStepsOffPolicy`...
 * @example
 * parseValue('step', option.integer({ min: 0 }), step);
 */
export function parseValue<Schema extends z.ZodType>(name: string, schema: Schema, value: unknown): z.output<Schema> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw invalidArgument(schema, value, name, name);
}

/**
 * The one error of a bad value that no schema states (a rule across options, say):
 * "Expected `name` to be <expected>, got <value>".
 * @example
 * throw invalidOption('params.signal', signal, 'left out when `options.signal` is given');
 */
export function invalidOption(name: string, value: unknown, expected: string): InvalidArgumentError {
  return new InvalidArgumentError(name, `Expected \`${name}\` to be ${expected}, got ${describeValue(value)}`);
}

/** `name` under `prefix` the way code writes it: `options.timeout`, `learningRate[1]`. */
function joinPath(prefix: string | undefined, path: readonly PropertyKey[]): string {
  const rest = formatPath(path);
  if (prefix === undefined) return rest;
  return rest.startsWith('[') ? `${prefix}${rest}` : `${prefix}.${rest}`;
}

/**
 * The error of the first issue (an unknown key before anything else); every issue is kept as data.
 * `input` is parsed again, with the wording of plain zod checks: passing that wording on every
 * parse would take zod off its fast path (five times slower on a valid request's options).
 */
function invalidArgument(
  schema: z.ZodType,
  input: unknown,
  name: string,
  prefix: string | undefined,
): InvalidArgumentError {
  const issues = schema.safeParse(input, { error: expectedText }).error?.issues ?? [];
  const nameOf = (path: readonly PropertyKey[]) => (path.length === 0 ? name : joinPath(prefix, path));
  const unknown = issues.find((issue) => issue.code === 'unrecognized_keys');
  if (unknown !== undefined) {
    const [key = '', ...more] = unknown.keys;
    const argument = nameOf([...unknown.path, key]);
    const suggestion = closestName(key, knownKeys(schema, unknown.path));
    const hint = suggestion === undefined ? '' : `; did you mean \`${nameOf([...unknown.path, suggestion])}\`?`;
    const also = more.length === 0 ? '' : ` Also unknown: ${more.map((other) => `\`${other}\``).join(', ')}.`;
    return new InvalidArgumentError(argument, `Unknown option \`${argument}\`${hint}${also}`, { issues });
  }
  const issue = issues[0];
  const path = issue?.path ?? [];
  const argument = nameOf(path);
  const got = describeValue(valueAtPath(input, path));
  return new InvalidArgumentError(argument, `Expected \`${argument}\` to be ${issue?.message ?? 'valid'}, got ${got}`, {
    issues,
  });
}

/** The keys of the object schema found at `path` inside `schema` (through optionals, defaults, pipes, unions). */
function knownKeys(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  const objects = objectsAt(schema, path);
  return objects.flatMap((object) => Object.keys(object.shape));
}

function objectsAt(schema: z.ZodType, path: readonly PropertyKey[]): z.ZodObject[] {
  if (
    schema instanceof z.ZodOptional ||
    schema instanceof z.ZodNullable ||
    schema instanceof z.ZodDefault ||
    schema instanceof z.ZodPrefault ||
    schema instanceof z.ZodReadonly ||
    schema instanceof z.ZodCatch
  ) {
    return objectsAt(schema.unwrap() as z.ZodType, path);
  }
  if (schema instanceof z.ZodPipe) {
    return [...objectsAt(schema.in as z.ZodType, path), ...objectsAt(schema.out as z.ZodType, path)];
  }
  if (schema instanceof z.ZodUnion) return schema.options.flatMap((item) => objectsAt(item as z.ZodType, path));
  const [key, ...rest] = path;
  if (schema instanceof z.ZodObject) {
    if (key === undefined) return [schema];
    const field = typeof key === 'string' ? (schema.shape as Record<string, z.ZodType>)[key] : undefined;
    return field === undefined ? [] : objectsAt(field, rest);
  }
  if (schema instanceof z.ZodArray && typeof key === 'number') return objectsAt(schema.element as z.ZodType, rest);
  if (schema instanceof z.ZodRecord && key !== undefined) return objectsAt(schema.valueType as z.ZodType, rest);
  return [];
}

const TYPE_EXPECTED: Partial<Record<string, string>> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
  object: 'an object',
  record: 'an object',
  array: 'an array',
  function: 'a function',
  bigint: 'a bigint',
  symbol: 'a symbol',
  date: 'a Date',
  map: 'a Map',
  set: 'a Set',
  undefined: 'left out',
  null: 'null',
};

/**
 * What a plain zod check expected, worded to follow "to be": the wording of the issues of zod's
 * own checks (the schemas of this file word theirs themselves, and those come first).
 */
function expectedText(issue: z.core.$ZodRawIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return TYPE_EXPECTED[issue.expected] ?? `a value of type ${issue.expected}`;
    case 'invalid_value':
      return oneOfExpected(issue.values);
    case 'too_small':
    case 'too_big':
      return sizeExpected(issue);
    case 'not_multiple_of':
      return `a multiple of ${String(issue.divisor)}`;
    case 'invalid_format':
      return issue.format === 'regex' ? `a string matching ${String(issue.pattern)}` : `a valid ${issue.format}`;
    case 'invalid_union':
      return 'one of the accepted forms';
    default:
      return 'a valid value';
  }
}

/** "a number >= 1", "a non-empty string", "an array of at most 3 items"... */
function sizeExpected(issue: z.core.$ZodRawIssue<z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig>): string {
  const small = issue.code === 'too_small';
  const bound = String(small ? issue.minimum : issue.maximum);
  const inclusive = issue.inclusive !== false;
  if (issue.origin === 'number' || issue.origin === 'int' || issue.origin === 'bigint') {
    return `a number ${small ? '>' : '<'}${inclusive ? '=' : ''} ${bound}`;
  }
  const noun =
    issue.origin === 'string' ? 'a string of' : issue.origin === 'array' ? 'an array of' : `a ${issue.origin} of`;
  const unit = issue.origin === 'string' ? 'characters' : 'items';
  if (small && bound === '1' && inclusive)
    return issue.origin === 'string' ? 'a non-empty string' : `${noun} at least 1 item`;
  return `${noun} ${small ? 'at least' : 'at most'} ${bound} ${unit}`;
}
