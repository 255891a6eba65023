/**
 * Options declared as zod schemas: the messages a bad value gets ("Expected `x` to be ..., got
 * ..."), unknown keys refused with the nearest known name, nested paths, defaults, and the
 * compile-time hold of a shape to its interface.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { closestName } from '../../src/internal/closest-name.js';
import { InvalidArgumentError } from '../../src/internal/errors.js';
import { option, optionsSchema, parseOptions, parseValue } from '../../src/internal/option-schema.js';

/** The error `run` throws (fails the test when it throws nothing). */
function thrown(run: () => unknown): InvalidArgumentError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    return error as InvalidArgumentError;
  }
  throw new Error('expected a throw');
}

interface Keep {
  /** Which metric. */
  metric?: string | undefined;
  /** Which way is better. */
  direction?: 'max' | 'min' | undefined;
}

interface Trainer {
  maxSteps: number;
  groupSize?: number | undefined;
  timeout?: number | undefined;
  maxRetries?: number | undefined;
  retryDelay?: number | undefined;
  progress?: boolean | undefined;
  lossFn?: 'cispo' | 'ppo' | undefined;
  name?: string | undefined;
  onStep?: ((step: number) => void) | undefined;
  signal?: AbortSignal | undefined;
  keep?: Keep | undefined;
  gather?: object | undefined;
  learningRate?: number | readonly number[] | undefined;
}

const KeepSchema = optionsSchema<Keep>()({
  metric: option.nonEmptyString().default('val/reward'),
  direction: z.enum(['max', 'min']).optional(),
});

const TrainerSchema = optionsSchema<Trainer>()({
  maxSteps: option.integer({ min: 0 }),
  groupSize: option.integer({ min: 1 }).default(8),
  timeout: option.timeout({ allowInfinity: true }).default(60_000),
  maxRetries: option.retryCount().default(2),
  retryDelay: option.retryDelay().default(500),
  progress: z.boolean().default(false),
  lossFn: option.oneOf(['cispo', 'ppo']).optional(),
  name: option.nonEmptyString().optional(),
  onStep: option.function<(step: number) => void>().optional(),
  signal: option.signal().optional(),
  keep: KeepSchema.optional(),
  gather: option.options().optional(),
  learningRate: z
    .union([
      option.number({ min: 0, exclusiveMin: true }),
      z.array(option.number({ min: 0, exclusiveMin: true })).readonly(),
    ])
    .optional(),
});

const parse = (value: unknown) => parseOptions(TrainerSchema, value);

describe('parseOptions', () => {
  it('returns the options with their defaults, typed', () => {
    const onStep = () => undefined;
    const parsed = parse({ maxSteps: 3, onStep, keep: {} });
    expect(parsed).toEqual({
      maxSteps: 3,
      groupSize: 8,
      timeout: 60_000,
      maxRetries: 2,
      retryDelay: 500,
      progress: false,
      onStep,
      keep: { metric: 'val/reward' },
    });
    const groupSize: number = parsed.groupSize;
    expect(groupSize).toBe(8);
    expect(parse({ maxSteps: 0, timeout: Number.POSITIVE_INFINITY }).timeout).toBe(Number.POSITIVE_INFINITY);
  });

  it.each([
    [{ maxSteps: -1 }, 'maxSteps', 'Expected `maxSteps` to be a non-negative integer, got -1'],
    [{ maxSteps: 1, groupSize: 0 }, 'groupSize', 'Expected `groupSize` to be an integer >= 1, got 0'],
    [{ maxSteps: 1, groupSize: 2.5 }, 'groupSize', 'Expected `groupSize` to be an integer >= 1, got 2.5'],
    [
      { maxSteps: 1, timeout: -1 },
      'timeout',
      'Expected `timeout` to be a positive number of milliseconds, at most 2147483647 (or Infinity), got -1',
    ],
    [
      { maxSteps: 1, timeout: Number.NaN },
      'timeout',
      'Expected `timeout` to be a positive number of milliseconds, at most 2147483647 (or Infinity), got NaN',
    ],
    [{ maxSteps: 1, maxRetries: 1.5 }, 'maxRetries', 'Expected `maxRetries` to be a non-negative integer, got 1.5'],
    [
      { maxSteps: 1, retryDelay: Number.POSITIVE_INFINITY },
      'retryDelay',
      'Expected `retryDelay` to be a non-negative number of milliseconds, at most 2147483647, got Infinity',
    ],
    [{ maxSteps: 1, progress: 'yes' }, 'progress', 'Expected `progress` to be true or false, got "yes"'],
    [{ maxSteps: 1, lossFn: 'grpo' }, 'lossFn', 'Expected `lossFn` to be one of "cispo", "ppo", got "grpo"'],
    [{ maxSteps: 1, name: '  ' }, 'name', 'Expected `name` to be a non-empty string, got "  "'],
    [{ maxSteps: 1, name: 7 }, 'name', 'Expected `name` to be a non-empty string, got 7'],
    [{ maxSteps: 1, onStep: 'log' }, 'onStep', 'Expected `onStep` to be a function, got "log"'],
    [{ maxSteps: 1, signal: {} }, 'signal', 'Expected `signal` to be an AbortSignal, got {}'],
    [{ maxSteps: 1, keep: { metric: '' } }, 'keep.metric', 'Expected `keep.metric` to be a non-empty string, got ""'],
    [
      { maxSteps: 1, keep: { direction: 'up' } },
      'keep.direction',
      'Expected `keep.direction` to be one of "max", "min", got "up"',
    ],
    [{ maxSteps: 1, keep: [] }, 'keep', 'Expected `keep` to be an options object, got []'],
    [{ maxSteps: 1, gather: 3 }, 'gather', 'Expected `gather` to be an options object, got 3'],
    [
      { maxSteps: 1, learningRate: [1e-4, -1] },
      'learningRate[1]',
      'Expected `learningRate[1]` to be a positive number, got -1',
    ],
    [
      { maxSteps: 1, learningRate: 'fast' },
      'learningRate',
      'Expected `learningRate` to be one of the accepted forms, got "fast"',
    ],
    [{}, 'maxSteps', 'Expected `maxSteps` to be a non-negative integer, got undefined'],
  ])('%o: %s', (value, argument, message) => {
    const error = thrown(() => parse(value));
    expect(error.argument).toBe(argument);
    expect(error.message).toBe(message);
    expect(error.issues.length).toBeGreaterThan(0);
  });

  it('refuses what is not an options object, and a signal where the options go', () => {
    expect(thrown(() => parse(42)).message).toBe('Expected `options` to be an options object, got 42');
    expect(thrown(() => parse([])).message).toBe('Expected `options` to be an options object, got []');
    const signal = thrown(() => parse(new AbortController().signal));
    expect(signal.argument).toBe('options');
    expect(signal.message).toBe('Expected `options` to be an options object (pass `{ signal }`), got an AbortSignal');
    expect(thrown(() => parse({ maxSteps: 1, keep: new AbortController().signal })).message).toBe(
      'Expected `keep` to be an options object (pass `{ signal }`), got an AbortSignal',
    );
    expect(thrown(() => parse({ maxSteps: 1, gather: new AbortController().signal })).message).toBe(
      'Expected `gather` to be an options object (pass `{ signal }`), got an AbortSignal',
    );
  });

  it('takes undefined as no options, so that the defaults apply (and a missing required option is named)', () => {
    const Optional = optionsSchema<{ every?: number | undefined }>()({ every: option.integer().default(10) });
    expect(parseOptions(Optional, undefined)).toEqual({ every: 10 });
    expect(thrown(() => parse(undefined)).argument).toBe('maxSteps');
  });

  it('names options under the argument when asked: `options.timeout`, and the argument for a bad whole', () => {
    const error = thrown(() => parseOptions(TrainerSchema, { maxSteps: 1, timeout: 0 }, { prefixed: true }));
    expect(error.argument).toBe('options.timeout');
    expect(error.message).toMatch(/^Expected `options\.timeout` to be a positive number/);
    const params = thrown(() => parseOptions(TrainerSchema, 'x', { name: 'params', prefixed: true }));
    expect(params.message).toBe('Expected `params` to be an options object, got "x"');
    const unknown = thrown(() => parseOptions(TrainerSchema, { maxSteps: 1, timout: 1 }, { prefixed: true }));
    expect(unknown.message).toBe('Unknown option `options.timout`; did you mean `options.timeout`?');
  });
});

describe('unknown options', () => {
  it.each([
    [{ maxStep: 3 }, 'maxStep', 'Unknown option `maxStep`; did you mean `maxSteps`?'],
    [{ maxSteps: 1, groupsize: 3 }, 'groupsize', 'Unknown option `groupsize`; did you mean `groupSize`?'],
    [{ maxSteps: 1, retries: 3 }, 'retries', 'Unknown option `retries`; did you mean `maxRetries`?'],
    [{ maxSteps: 1, colour: 'red' }, 'colour', 'Unknown option `colour`'],
    [
      { maxSteps: 1, keep: { metrc: 'val/loss' } },
      'keep.metrc',
      'Unknown option `keep.metrc`; did you mean `keep.metric`?',
    ],
    [
      { maxSteps: 1, timout: 5, colour: 'red' },
      'timout',
      'Unknown option `timout`; did you mean `timeout`? Also unknown: `colour`.',
    ],
  ])('%o: %s', (value, argument, message) => {
    const error = thrown(() => parse(value));
    expect(error.argument).toBe(argument);
    expect(error.message).toBe(message);
  });

  it('are named before a bad value elsewhere: the misspelt key is what the user has to fix', () => {
    // `maxStep` for `maxSteps` leaves the required option missing too.
    expect(thrown(() => parse({ maxStep: 3, groupSize: 0 })).message).toBe(
      'Unknown option `maxStep`; did you mean `maxSteps`?',
    );
  });

  it('an options object handed on as it is keeps its keys unchecked here', () => {
    expect(parse({ maxSteps: 1, gather: { anything: 1 } }).gather).toEqual({ anything: 1 });
  });
});

describe('parseValue', () => {
  it('checks one argument and names it', () => {
    expect(parseValue('step', option.integer({ min: 0 }), 3)).toBe(3);
    const error = thrown(() => parseValue('step', option.integer({ min: 0 }), 1.5));
    expect(error.argument).toBe('step');
    expect(error.message).toBe('Expected `step` to be a non-negative integer, got 1.5');
    expect(thrown(() => parseValue('port', option.integer({ min: 0, max: 65_535 }), 70_000)).message).toBe(
      'Expected `port` to be an integer from 0 to 65535, got 70000',
    );
    expect(
      thrown(() => parseValue('maxStepsOffPolicy', option.number({ min: 0, allowInfinity: true, unit: 'steps' }), -1))
        .message,
    ).toBe('Expected `maxStepsOffPolicy` to be a non-negative number of steps (or Infinity), got -1');
    expect(thrown(() => parseValue('weight', option.number(), Number.NaN)).message).toBe(
      'Expected `weight` to be a finite number, got NaN',
    );
    expect(thrown(() => parseValue('rate', option.number({ min: 1, exclusiveMin: true }), 1)).message).toBe(
      'Expected `rate` to be a number > 1, got 1',
    );
    expect(thrown(() => parseValue('ratio', option.number({ min: 0.5 }), 0)).message).toBe(
      'Expected `ratio` to be a number >= 0.5, got 0',
    );
    expect(
      thrown(() =>
        parseValue(
          'client',
          option.like<object>((value) => typeof value?.log === 'function', 'a TrainingClient'),
          {},
        ),
      ).message,
    ).toBe('Expected `client` to be a TrainingClient, got {}');
  });

  it('words the issues of plain zod checks the same way', () => {
    const cases: [z.ZodType, unknown, string][] = [
      [z.string(), 1, 'a string'],
      [z.number().int(), 'x', 'a number'],
      [z.array(z.string()), 'x', 'an array'],
      [z.array(z.string()).min(1), [], 'an array of at least 1 item'],
      [z.string().min(3), 'ab', 'a string of at least 3 characters'],
      [z.number().max(3), 4, 'a number <= 3'],
      [z.literal(7), 8, 'one of 7'],
      [z.string().regex(/^a/), 'b', 'a string matching /^a/'],
    ];
    for (const [schema, value, expected] of cases) {
      expect(thrown(() => parseValue('x', schema, value)).message).toBe(
        `Expected \`x\` to be ${expected}, got ${JSON.stringify(value)}`,
      );
    }
    expect(thrown(() => parseValue('list', z.array(option.integer()), [1, 'two'])).message).toBe(
      'Expected `list[1]` to be an integer, got "two"',
    );
  });
});

describe('optionsSchema holds the shape to its interface (compile time)', () => {
  interface Small {
    every?: number | undefined;
    name: string;
  }

  it('refuses a missing option, an extra one, a required schema for an optional option and another type', () => {
    // Each line below is a type error; `@ts-expect-error` fails the type check if it is not.
    // @ts-expect-error `name` has no schema
    optionsSchema<Small>()({ every: option.integer().optional() });
    // @ts-expect-error `other` is not an option of Small
    optionsSchema<Small>()({ every: option.integer().optional(), name: z.string(), other: z.string() });
    // @ts-expect-error `every` is optional in Small: the schema must take undefined
    optionsSchema<Small>()({ every: option.integer(), name: z.string() });
    // @ts-expect-error `name` is a string, not a number
    optionsSchema<Small>()({ every: option.integer().optional(), name: z.number() });
    expect(optionsSchema<Small>()({ every: option.integer().optional(), name: z.string() })).toBeDefined();
  });
});

describe('closestName', () => {
  it.each([
    ['maxStep', ['maxSteps', 'groupSize'], 'maxSteps'],
    ['maxsteps', ['maxSteps'], 'maxSteps'],
    ['gruopSize', ['groupSize', 'groupsPerStep'], 'groupSize'],
    ['timout', ['timeout', 'maxRetries'], 'timeout'],
    ['retries', ['maxRetries', 'retryDelay'], 'maxRetries'],
    ['colour', ['groupSize', 'timeout'], undefined],
    ['lr', ['learningRate'], undefined],
    ['x', ['y'], undefined],
    ['ab', ['abc'], 'abc'],
  ] as const)('%s among %o: %s', (name, candidates, expected) => {
    expect(closestName(name, candidates)).toBe(expected);
  });
});
