/**
 * `defineEnvironment` and a run of it, without a model call: the spec checked at definition
 * (each field named), datasets of every form, the per-rollout lifecycle (tools opened, setup,
 * rollout, cleanup always, tools closed, tempDir removed) on success, throw and abort, and tool
 * names offered twice refused before any rollout, naming both sources.
 */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  APIUserAbortError,
  defineEnvironment,
  type EnvironmentContext,
  exactMatch,
  functionTool,
  gatherTrajectoryGroups,
  InvalidArgumentError,
  PromptedModel,
  type PromptTask,
} from 'policyloop';
import type { EnvironmentSpec, RolloutTools, StartedToolSource, ToolSource } from 'policyloop/training';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';

/** A model the rollouts here never call (they have rollouts of their own). */
const model = new PromptedModel({
  name: 'unused',
  project: 'env',
  model: 'none',
  baseURL: 'http://127.0.0.1:9/v1',
  apiKey: 'k',
});

const add = functionTool({
  name: 'add',
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

/** What `defineEnvironment` throws for `spec`. */
function refusal(spec: unknown): InvalidArgumentError {
  try {
    defineEnvironment(spec as EnvironmentSpec<PromptTask>);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    return error as InvalidArgumentError;
  }
  throw new Error('defineEnvironment accepted the spec');
}

async function read<T>(tasks: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const task of tasks) all.push(task);
  return all;
}

/** A tool source offering `names`, recording what happens to it. */
function recordingSource(name: string, names: string[], log: string[]): ToolSource {
  return {
    kind: 'tool-source',
    name,
    start(): Promise<StartedToolSource> {
      log.push(`${name}:start`);
      const definitions = names.map((tool) => ({
        type: 'function' as const,
        function: { name: tool, parameters: {} },
      }));
      return Promise.resolve({
        name,
        definitions,
        open(info): Promise<RolloutTools> {
          log.push(`${name}:open ${JSON.stringify(info.task)}`);
          return Promise.resolve({
            definitions,
            call: (tool, args) =>
              Promise.resolve({ content: `${tool}(${JSON.stringify(args)}) from ${name}`, isError: false }),
            close: () => {
              log.push(`${name}:close-rollout`);
              return Promise.resolve();
            },
          });
        },
        close: () => {
          log.push(`${name}:close`);
          return Promise.resolve();
        },
      });
    },
  };
}

describe('the spec, checked at definition', () => {
  it('names the field that is wrong', () => {
    const base = { name: 'x', dataset: [{ prompt: 'hi' }] };
    expect(refusal({ ...base, systemPromt: 'hi' }).message).toBe(
      'Unknown option `systemPromt`; did you mean `systemPrompt`?',
    );
    expect(refusal({ ...base, maxTurns: 0 }).message).toBe('Expected `maxTurns` to be an integer >= 1, got 0');
    expect(refusal({ ...base, name: ' ' }).argument).toBe('name');
    expect(refusal({ name: 'x', dataset: 'abc' }).message).toBe(
      'Expected `dataset` to be an array, an iterable or an async iterable of tasks, or a function returning one, got "abc"',
    );
    expect(refusal({ name: 'x' }).argument).toBe('dataset');
    expect(refusal({ ...base, evalDataset: 5 }).argument).toBe('evalDataset');
    expect(refusal({ ...base, rollout: 'play' }).message).toBe('Expected `rollout` to be a function, got "play"');
    expect(refusal({ ...base, tools: [{ name: 'x' }] }).message).toMatch(
      /^Expected `tools\[0\]` to be a function tool \(functionTool\(\{ name, parameters, execute \}\)\) or a tool source \(mcpServer\(\.\.\.\)\), got/,
    );
    expect(refusal({ ...base, tools: [{ name: 'has space', parameters: {}, execute: () => 1 }] }).message).toMatch(
      /^Expected `tools\[0\]\.name` to be a tool name \(letters, digits, _ and -, 1 to 64 characters\)/,
    );
    expect(refusal({ ...base, tools: [add, add] }).message).toBe(
      'Expected `tools[1]` to have a name of its own, got `add`, the name of `tools[0]`',
    );
    expect(refusal({ ...base, reward: { correct: { fn: () => 1, weight: Number.NaN } } }).argument).toMatch(/weight/);
    expect(refusal({ ...base, reward: 3 }).argument).toBe('reward');
    // Without a rollout, the default loop plays the tasks: an array is checked now.
    expect(refusal({ name: 'x', dataset: [{ prompt: 'a' }, { question: 'b' }] }).message).toMatch(
      /^Expected `dataset\[1\]` to be a task of the default loop, \{ prompt: string \| messages, answer\?, info\? \} \(or give the environment a `rollout`\), got/,
    );
  });

  it('types tasks: any type with a rollout, a PromptTask without one', () => {
    const withRollout = defineEnvironment({ name: 'n', dataset: [1, 2, 3], rollout: async () => undefined });
    expectTypeOf(withRollout.dataset).returns.toEqualTypeOf<AsyncIterable<number>>();
    const prompted = defineEnvironment({ name: 'p', dataset: [{ prompt: 'hi', answer: 'x' }] });
    expectTypeOf(prompted.dataset).returns.toEqualTypeOf<AsyncIterable<{ prompt: string; answer: string }>>();
    // @ts-expect-error: a number is no PromptTask, and there is no rollout to play it
    expect(() => defineEnvironment({ name: 'bad', dataset: [1, 2] })).toThrow(InvalidArgumentError);
  });
});

describe('datasets', () => {
  it('reads arrays, iterables, async iterables and functions returning one, in order; evalDataset falls back to dataset', async () => {
    let calls = 0;
    const forms: [string, unknown][] = [
      ['array', ['a', 'b']],
      ['set', new Set(['a', 'b'])],
      [
        'async iterable',
        (async function* () {
          yield 'a';
          yield 'b';
        })(),
      ],
      ['function of an array', () => ['a', 'b']],
      [
        'function of a generator',
        () => {
          calls += 1;
          return (function* () {
            yield 'a';
            yield 'b';
          })();
        },
      ],
      ['async function', async () => new Set(['a', 'b'])],
    ];
    for (const [form, dataset] of forms) {
      const environment = defineEnvironment({
        name: form,
        dataset: dataset as string[],
        rollout: async () => undefined,
      });
      expect(await read(environment.dataset()), form).toEqual(['a', 'b']);
      expect(environment.hasEvalDataset).toBe(false);
    }
    // A function is called at each read (each epoch of a trainer reads afresh), never at definition.
    expect(calls).toBe(1);
    const lazy = defineEnvironment({
      name: 'lazy',
      dataset: forms[4]![1] as () => string[],
      rollout: async () => undefined,
    });
    expect(await read(lazy.dataset())).toEqual(['a', 'b']);
    expect(await read(lazy.evalDataset())).toEqual(['a', 'b']); // no evalDataset: the dataset, read again
    expect(calls).toBe(3);
    // A one-shot iterable is read once: pass a function to read a set again.
    const once = defineEnvironment({ name: 'once', dataset: new Set(['a']).values(), rollout: async () => undefined });
    expect([await read(once.dataset()), await read(once.dataset())]).toEqual([['a'], []]);
    const held = defineEnvironment({
      name: 'h',
      dataset: ['a'],
      evalDataset: () => ['z'],
      rollout: async () => undefined,
    });
    expect([await read(held.evalDataset()), held.hasEvalDataset]).toEqual([['z'], true]);
  });

  it('refuses a dataset function that returns no tasks, when it is read', async () => {
    const environment = defineEnvironment({ name: 'x', dataset: (() => 42) as never, rollout: async () => undefined });
    await expect(read(environment.dataset())).rejects.toThrow(
      'Expected `dataset()` to be an array, an iterable or an async iterable of tasks, got 42',
    );
  });
});

describe('a rollout of an environment', () => {
  it('opens the tools, runs setup, the rollout and cleanup, closes the tools and removes the tempDir', async () => {
    const log: string[] = [];
    let tempDir = '';
    const environment = defineEnvironment({
      name: 'lifecycle',
      dataset: ['task-1'],
      tools: [recordingSource('server', ['search'], log), add],
      setup: async (task, context) => {
        log.push(`setup ${task}`);
        tempDir = context.tempDir;
        await writeFile(path.join(context.tempDir, 'state.txt'), 'ready');
      },
      rollout: async (task, context) => {
        log.push(`rollout ${task}`);
        expect(await readFile(path.join(context.tempDir, 'state.txt'), 'utf8')).toBe('ready');
        // In the environment's order: the server's tools, then the function tools.
        expect(context.tools.definitions.map((tool) => tool.function.name)).toEqual(['search', 'add']);
        log.push((await context.tools.call('search', '{"q":"x"}')).content);
        log.push((await context.tools.call('add', { a: 1, b: 2 })).content);
        context.trajectory.metrics['played'] = 1;
      },
      cleanup: (task, _context, outcome) => {
        log.push(`cleanup ${task} error=${String(outcome.error)}`);
      },
    });
    const run = await environment.start({ model });
    expect(log).toEqual(['server:start']);
    const [group] = await gatherTrajectoryGroups(['task-1'], run.rollout);
    expect(group!.trajectories[0]!.metrics['played']).toBe(1);
    expect(log).toEqual([
      'server:start',
      'server:open "task-1"',
      'setup task-1',
      'rollout task-1',
      'search({"q":"x"}) from server',
      '3',
      'cleanup task-1 error=undefined',
      'server:close-rollout',
    ]);
    expect(tempDir).not.toBe('');
    expect(existsSync(tempDir)).toBe(false);
    await run.close();
    await run.close(); // idempotent
    expect(log.filter((line) => line === 'server:close')).toHaveLength(1);
    await expect(run.rollout('again', {} as never)).rejects.toThrow('The run of environment `lifecycle` is closed.');
  });

  it('runs cleanup and removes the tempDir when the rollout or setup throws, with the error', async () => {
    const outcomes: unknown[] = [];
    const dirs: string[] = [];
    const failing = (where: 'setup' | 'rollout') =>
      defineEnvironment({
        name: where,
        dataset: ['t'],
        setup: (_task, context) => {
          dirs.push(context.tempDir);
          if (where === 'setup') throw new Error('setup failed');
        },
        rollout: async () => {
          throw new Error('rollout failed');
        },
        cleanup: (_task, _context, { error }) => {
          outcomes.push((error as Error).message);
        },
      });
    for (const where of ['setup', 'rollout'] as const) {
      const run = await failing(where).start({ model });
      await expect(gatherTrajectoryGroups(['t'], run.rollout)).rejects.toThrow(`${where} failed`);
      await run.close();
    }
    expect(outcomes).toEqual(['setup failed', 'rollout failed']);
    expect(dirs.map((dir) => existsSync(dir))).toEqual([false, false]);
  });

  it('runs cleanup when the gather is aborted, even for a rollout that ignores its signal', async () => {
    const cleaned: unknown[] = [];
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    let tempDir = '';
    const environment = defineEnvironment({
      name: 'abort',
      dataset: ['t'],
      rollout: (_task, context: EnvironmentContext) => {
        tempDir = context.tempDir;
        started();
        return new Promise(() => undefined); // never settles, never looks at its signal
      },
      cleanup: (_task, _context, { error }) => {
        cleaned.push(error);
      },
    });
    const run = await environment.start({ model });
    const controller = new AbortController();
    const gathering = gatherTrajectoryGroups(['t'], run.rollout, { signal: controller.signal });
    await running;
    controller.abort(new Error('stop now'));
    await expect(gathering).rejects.toBeInstanceOf(APIUserAbortError);
    await run.close(); // waits for the rollouts' cleanup
    expect(cleaned).toEqual([new Error('stop now')]);
    expect(existsSync(tempDir)).toBe(false);
  });

  it('closes the tools of a source that opens after the rollout was aborted, and calls no setup', async () => {
    const log: string[] = [];
    let finishOpening!: () => void;
    const opening = new Promise<void>((resolve) => {
      finishOpening = resolve;
    });
    let openCalled!: () => void;
    const called = new Promise<void>((resolve) => {
      openCalled = resolve;
    });
    const slow: ToolSource = {
      kind: 'tool-source',
      name: 'slow',
      start: () =>
        Promise.resolve({
          name: 'slow',
          definitions: [],
          open: async () => {
            openCalled();
            await opening;
            return {
              definitions: [],
              call: () => Promise.reject(new Error('none')),
              close: async () => void log.push('closed'),
            };
          },
          close: () => Promise.resolve(),
        }),
    };
    const environment = defineEnvironment({
      name: 'slow',
      dataset: ['t'],
      tools: [slow],
      setup: () => void log.push('setup'),
      rollout: async () => undefined,
      cleanup: () => void log.push('cleanup'),
    });
    const run = await environment.start({ model });
    const controller = new AbortController();
    const gathering = gatherTrajectoryGroups(['t'], run.rollout, { signal: controller.signal });
    await called;
    controller.abort();
    await expect(gathering).rejects.toBeInstanceOf(APIUserAbortError);
    finishOpening();
    await run.close();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(log).toEqual(['closed']);
  });

  it('makes no tempDir for a rollout that never reads it, and gives a function tool the rollout its context', async () => {
    const seen: { task: unknown; toolCallId: string; tempDirExists: boolean }[] = [];
    const probe = functionTool({
      name: 'probe',
      parameters: { type: 'object', properties: {} },
      execute: (_args, context) => {
        seen.push({ task: context.task, toolCallId: context.toolCallId, tempDirExists: existsSync(context.tempDir) });
        return { ok: true };
      },
    });
    const environment = defineEnvironment({
      name: 'probe',
      dataset: ['t'],
      tools: [probe],
      rollout: async (_task, context) => {
        const result = await context.tools.call('probe', {});
        expect(result).toEqual({ content: '{"ok":true}', isError: false });
      },
    });
    const run = await environment.start({ model });
    await gatherTrajectoryGroups(['t'], run.rollout);
    await run.close();
    expect(seen).toEqual([{ task: 't', toolCallId: '', tempDirExists: true }]);
  });
});

describe('tool sources of a run', () => {
  it('refuses two sources offering one tool name before any rollout, naming both, and closes what started', async () => {
    const log: string[] = [];
    const withFunction = defineEnvironment({
      name: 'clash',
      dataset: [{ prompt: 'x' }],
      tools: [add, recordingSource('mcp-math', ['add', 'sub'], log)],
      reward: exactMatch('x'),
    });
    await expect(withFunction.start({ model })).rejects.toThrow(
      'Tool `add` is offered by both function tool `add` and `mcp-math`; give one of them another name.',
    );
    expect(log).toEqual(['mcp-math:start', 'mcp-math:close']);

    const twoServers = defineEnvironment({
      name: 'clash-2',
      dataset: [{ prompt: 'x' }],
      tools: [recordingSource('one', ['search'], []), recordingSource('two', ['fetch', 'search'], [])],
    });
    const error = await twoServers.start({ model }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as Error).message).toBe(
      'Tool `search` is offered by both `one` and `two`; give one of them another name.',
    );
  });

  it('fails the start with the error of a source that cannot start, closing the others', async () => {
    const log: string[] = [];
    const broken: ToolSource = {
      kind: 'tool-source',
      name: 'broken',
      start: () => Promise.reject(new Error('mcp server `broken` exited with code 1')),
    };
    const environment = defineEnvironment({
      name: 'broken',
      dataset: [{ prompt: 'x' }],
      tools: [recordingSource('fine', ['a'], log), broken],
    });
    await expect(environment.start({ model })).rejects.toThrow('mcp server `broken` exited with code 1');
    expect(log).toEqual(['fine:start', 'fine:close']);
  });

  it('checks its options: a model, an object of sampling, nothing else', async () => {
    const environment = defineEnvironment({ name: 'x', dataset: [{ prompt: 'x' }] });
    await expect(environment.start({ model: {} as never })).rejects.toThrow(
      /^Expected `model` to be a PromptedModel or a TrainableModel/,
    );
    await expect(environment.start({ model, sampling: 'hot' as never })).rejects.toThrow(/`sampling`/);
    await expect(environment.start({ model, smapling: {} } as never)).rejects.toThrow(
      'Unknown option `smapling`; did you mean `sampling`?',
    );
  });
});
