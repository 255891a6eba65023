/**
 * `defineEnvironment`: a spec checked once, at definition, and the {@link Environment} it becomes.
 * A run of it (`start`) starts the tool sources and gives `gatherTrajectoryGroups` a rollout that,
 * per rollout, opens the tools, runs `setup`, the spec's rollout or the default agent loop, then
 * `cleanup` (always), closes the tools and removes the rollout's temporary folder.
 */
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { raceSignal } from '../internal/delay.js';
import { InvalidArgumentError, PolicyloopError } from '../internal/errors.js';
import { invalidOption, option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { toRewardFn } from '../rewards/combine-rewards.js';
import type { RewardFn } from '../rewards/reward-function.js';
import type { RolloutContext, RolloutFn } from '../rollout/rollout-function.js';
import type { ChatCompletionsClient } from '../schema/chat-client.js';
import type { TrajectoryInput } from '../schema/index.js';
import { checkFunctionTool, type FunctionTool, functionToolSource, isFunctionTool } from '../tools/function-tool.js';
import { type NamedSource, RolloutToolbox, toolNameCollision } from '../tools/toolbox.js';
import type { RolloutTools, StartedToolSource, ToolRolloutInfo, ToolSource } from '../tools/tool-types.js';
import type { PromptedModel } from '../training/prompted-model.js';
import type { TrainableModel } from '../training/trainable-model.js';
import { isDatasetSource, readDataset } from './dataset.js';
import { defaultLoop, isPromptTask, PROMPT_TASK_EXPECTED } from './default-loop.js';
import type { Environment, EnvironmentRun, EnvironmentStartOptions } from './environment.js';
import type {
  DatasetSource,
  EnvironmentContext,
  EnvironmentRolloutFn,
  EnvironmentSpec,
  EnvironmentTool,
  PromptTask,
} from './environment-types.js';

const DATASET_EXPECTED = 'an array, an iterable or an async iterable of tasks, or a function returning one';

const datasetOption = () => option.like<DatasetSource<unknown>>(isDatasetSource, DATASET_EXPECTED);

/** Whether `value` is a tool source (`mcpServer(...)` and the like). */
function isToolSource(value: unknown): value is ToolSource {
  if (typeof value !== 'object' || value === null) return false;
  const source = value as Partial<ToolSource>;
  return source.kind === 'tool-source' && typeof source.name === 'string' && typeof source.start === 'function';
}

/** The check of a spec: each field, unknown keys refused naming the nearest. */
const EnvironmentSpecSchema = optionsSchema<EnvironmentSpec<unknown>>()({
  name: option.nonEmptyString(),
  dataset: datasetOption(),
  evalDataset: datasetOption().optional(),
  rollout: option.function<EnvironmentRolloutFn<unknown>>().optional(),
  sampling: option
    .like<Readonly<Record<string, unknown>>>(
      (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
      'an object of request parameters',
    )
    .optional(),
  systemPrompt: option.string().optional(),
  maxTurns: option.integer({ min: 1 }).default(10),
  tools: z
    .array(
      option.like<EnvironmentTool>(
        (value) => isToolSource(value) || isFunctionTool(value),
        'a function tool (functionTool({ name, parameters, execute })) or a tool source (mcpServer(...))',
      ),
      { error: 'an array of function tools and tool sources' },
    )
    .readonly()
    .optional(),
  reward: option
    .like<NonNullable<EnvironmentSpec<unknown>['reward']>>(
      (value) => typeof value === 'function' || (typeof value === 'object' && value !== null && !Array.isArray(value)),
      'a reward function, or an object of named weighted rubric functions',
    )
    .optional(),
  scoreGroup: option.function<NonNullable<EnvironmentSpec<unknown>['scoreGroup']>>().optional(),
  setup: option.function<NonNullable<EnvironmentSpec<unknown>['setup']>>().optional(),
  cleanup: option.function<NonNullable<EnvironmentSpec<unknown>['cleanup']>>().optional(),
});

/** `start(options)`. */
const StartOptionsSchema = optionsSchema<EnvironmentStartOptions>()({
  model: option.like<PromptedModel | TrainableModel>(
    (value) => typeof value?.openai === 'function' && typeof value?.inferenceName === 'function',
    'a PromptedModel or a TrainableModel',
  ),
  sampling: option
    .like<Readonly<Record<string, unknown>>>(
      (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
      'an object of request parameters',
    )
    .optional(),
  signal: option.signal().optional(),
});

/** The spec's fields after the check (defaults applied). */
type CheckedSpec<T> = EnvironmentSpec<T> & { readonly maxTurns: number };

/** Checks what the schema cannot: the tools one by one, their names unique, prompt tasks given as an array. */
function checkSpec<T>(spec: EnvironmentSpec<T>): CheckedSpec<T> {
  const checked = parseOptions(EnvironmentSpecSchema, spec, { name: 'spec' }) as CheckedSpec<T>;
  const names = new Map<string, number>();
  for (const [index, tool] of (checked.tools ?? []).entries()) {
    if (isToolSource(tool)) continue;
    checkFunctionTool(tool, `tools[${index}]`);
    const first = names.get(tool.name);
    if (first !== undefined) {
      throw new InvalidArgumentError(
        `tools[${index}]`,
        `Expected \`tools[${index}]\` to have a name of its own, got \`${tool.name}\`, the name of \`tools[${first}]\``,
      );
    }
    names.set(tool.name, index);
  }
  if (checked.rollout === undefined) {
    for (const field of ['dataset', 'evalDataset'] as const) {
      const tasks = checked[field];
      if (!Array.isArray(tasks)) continue; // a lazy set is checked task by task as it is played
      const bad = tasks.findIndex((task) => !isPromptTask(task));
      if (bad !== -1) throw invalidOption(`${field}[${bad}]`, tasks[bad], PROMPT_TASK_EXPECTED);
    }
  }
  return checked;
}

/** The rubric's names and weights: one entry per named function, none for a single function. */
function rubricOf<T>(reward: EnvironmentSpec<T>['reward']): { name: string; weight: number }[] {
  if (reward === undefined || typeof reward === 'function') return [];
  return Object.entries(reward).map(([name, entry]) => ({
    name,
    weight: typeof entry === 'function' ? 1 : (entry.weight ?? 1),
  }));
}

/** The environment a checked spec defines (see {@link defineEnvironment}). */
class DefinedEnvironment<T> implements Environment<T> {
  readonly kind = 'environment' as const;
  readonly name: string;
  readonly args: Readonly<Record<string, unknown>>;
  readonly spec: EnvironmentSpec<T>;
  readonly hasEvalDataset: boolean;
  private readonly checked: CheckedSpec<T>;
  private readonly reward: RewardFn<T> | undefined;
  private readonly rubric: readonly { readonly name: string; readonly weight: number }[];

  constructor(checked: CheckedSpec<T>, spec: EnvironmentSpec<T>, args: Readonly<Record<string, unknown>>) {
    this.checked = checked;
    this.spec = spec;
    this.name = checked.name;
    this.args = args;
    this.hasEvalDataset = checked.evalDataset !== undefined;
    // Combined now: bad weights fail at definition, before any rollout.
    this.reward = checked.reward === undefined ? undefined : toRewardFn(checked.reward);
    this.rubric = Object.freeze(rubricOf(checked.reward));
  }

  /** The same environment, carrying the arguments it was loaded with. */
  withArgs(args: Readonly<Record<string, unknown>>): DefinedEnvironment<T> {
    return new DefinedEnvironment(this.checked, this.spec, Object.freeze({ ...args }));
  }

  dataset(): AsyncIterable<T> {
    return readDataset(this.checked.dataset, 'dataset');
  }

  evalDataset(): AsyncIterable<T> {
    return readDataset(this.checked.evalDataset ?? this.checked.dataset, 'evalDataset');
  }

  async start(options: EnvironmentStartOptions): Promise<EnvironmentRun<T>> {
    const { model, sampling = {}, signal } = parseOptions(StartOptionsSchema, options);
    const sources = await startSources(this.checked.tools ?? [], signal);
    // The spec's sampling under the run's: an evaluation's flags win key by key.
    const merged = Object.freeze({ ...this.checked.sampling, ...sampling });
    return new Run(this.checked, sources, { model, sampling: merged, reward: this.reward, rubric: this.rubric });
  }
}

/**
 * Starts every tool source (the function tools as one, where the first of them is listed), in the
 * environment's order, refusing two that offer one tool name; on a failure, closes what started.
 */
async function startSources(
  tools: readonly EnvironmentTool[],
  signal: AbortSignal | undefined,
): Promise<StartedToolSource[]> {
  const functionTools = tools.filter((tool): tool is FunctionTool => !isToolSource(tool));
  const functions = functionTools.length > 0 ? functionToolSource(functionTools) : undefined;
  const firstFunction = tools.findIndex((tool) => !isToolSource(tool));
  const starting = tools.map((tool, index) => {
    if (isToolSource(tool)) {
      return tool.start({ signal }).then((source): NamedSource => ({ source, originOf: () => `\`${source.name}\`` }));
    }
    return index === firstFunction && functions !== undefined
      ? Promise.resolve<NamedSource>({ source: functions, originOf: functions.originOf })
      : undefined;
  });
  const settled = await Promise.allSettled(starting.filter((start) => start !== undefined));
  const named = settled.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failed = settled.find((result) => result.status === 'rejected');
  const collision = failed === undefined ? toolNameCollision(named) : undefined;
  if (failed !== undefined || collision !== undefined) {
    await Promise.allSettled(named.map(({ source }) => source.close()));
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
    throw new InvalidArgumentError('tools', `${collision}.`);
  }
  return named.map(({ source }) => source);
}

/** What a run holds besides the spec and its sources. */
interface RunSettings<T> {
  readonly model: PromptedModel | TrainableModel;
  readonly sampling: Readonly<Record<string, unknown>>;
  readonly reward: RewardFn<T> | undefined;
  readonly rubric: readonly { readonly name: string; readonly weight: number }[];
}

/** One run of an environment: its started sources, and the rollout of each task. */
class Run<T> implements EnvironmentRun<T> {
  readonly rollout: RolloutFn<T>;
  readonly reward: RewardFn<T> | undefined;
  readonly rubric: readonly { readonly name: string; readonly weight: number }[];
  readonly scoreGroup: EnvironmentSpec<T>['scoreGroup'];
  private readonly spec: CheckedSpec<T>;
  private readonly sources: readonly StartedToolSource[];
  private readonly settings: RunSettings<T>;
  /** Rollouts not finished yet (cleanup, tools closing): `close` waits for them. */
  private readonly playing = new Set<Promise<unknown>>();
  private client: ChatCompletionsClient | undefined;
  private closing: Promise<void> | undefined;

  constructor(spec: CheckedSpec<T>, sources: readonly StartedToolSource[], settings: RunSettings<T>) {
    this.spec = spec;
    this.sources = sources;
    this.settings = settings;
    this.reward = settings.reward;
    this.rubric = settings.rubric;
    this.scoreGroup = spec.scoreGroup;
    this.rollout = (task, context) => {
      if (this.closing !== undefined) {
        return Promise.reject(new PolicyloopError(`The run of environment \`${spec.name}\` is closed.`));
      }
      const playing = this.play(task, context);
      const settled = playing.then(
        () => undefined,
        () => undefined,
      );
      this.playing.add(settled);
      void settled.finally(() => this.playing.delete(settled));
      return playing;
    };
  }

  /** Closes the sources once every rollout under way has cleaned up. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      while (this.playing.size > 0) await Promise.all([...this.playing]);
      const results = await Promise.allSettled(this.sources.map((source) => source.close()));
      const failed = results.find((result) => result.status === 'rejected');
      if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
    })();
    return this.closing;
  }

  /** The run's captured client, made on first use (`model.openai()`: every completion recorded). */
  private chatClient(): ChatCompletionsClient {
    this.client ??= this.settings.model.openai() as unknown as ChatCompletionsClient;
    return this.client;
  }

  /**
   * One rollout: the tools opened, `setup`, the rollout (the spec's or the default loop), then
   * always `cleanup` (once `setup` ran), the tools closed and the temporary folder removed. An
   * abort of the rollout's signal stops the wait at once and goes to the cleanup.
   */
  private async play(task: T, rolloutContext: RolloutContext): Promise<TrajectoryInput | undefined> {
    const { spec, settings } = this;
    const { signal } = rolloutContext;
    let tempDir: string | undefined;
    const info: ToolRolloutInfo = {
      task,
      get tempDir() {
        tempDir ??= mkdtempSync(path.join(tmpdir(), 'policyloop-rollout-'));
        return tempDir;
      },
      signal,
    };
    const opened: RolloutTools[] = [];
    let context: EnvironmentContext | undefined;
    let outcome: { error: unknown } | undefined;
    try {
      for (const source of this.sources) {
        const opening = source.open(info);
        try {
          opened.push(await raceSignal(opening, signal));
        } catch (error) {
          // Aborted while opening: the tools that still come are closed when they do.
          opening.then((tools) => tools.close()).catch(() => undefined);
          throw error;
        }
      }
      context = environmentContext(rolloutContext, info, settings, new RolloutToolbox(opened));
      if (spec.setup !== undefined) await raceSignal(Promise.resolve(spec.setup(task, context)), signal);
      const played =
        spec.rollout === undefined
          ? defaultLoop(task, context, {
              systemPrompt: spec.systemPrompt,
              maxTurns: spec.maxTurns,
              client: () => this.chatClient(),
            })
          : spec.rollout(task, context);
      return (await raceSignal(Promise.resolve(played), signal)) ?? undefined;
    } catch (error) {
      outcome = { error };
      throw error;
    } finally {
      await this.finishRollout(task, context, opened, () => tempDir, outcome);
    }
  }

  /** `cleanup` (when `setup` ran), the tools closed, the temporary folder removed; a failure fails a rollout that had not. */
  private async finishRollout(
    task: T,
    context: EnvironmentContext | undefined,
    opened: readonly RolloutTools[],
    tempDirOf: () => string | undefined,
    outcome: { error: unknown } | undefined,
  ): Promise<void> {
    const failures: unknown[] = [];
    if (context !== undefined && this.spec.cleanup !== undefined) {
      try {
        await this.spec.cleanup(task, context, { error: outcome?.error });
      } catch (error) {
        failures.push(error);
      }
    }
    const closed = await Promise.allSettled(opened.map((tools) => tools.close()));
    for (const result of closed) if (result.status === 'rejected') failures.push(result.reason);
    const dir = tempDirOf();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    if (outcome === undefined && failures.length > 0) throw failures[0];
  }
}

/**
 * The context of an environment's rollout, `setup` and `cleanup`: the gather's context (read
 * through, so `endpoint` is still made only when read) with the model, sampling, tools and tempDir.
 */
function environmentContext<T>(
  context: RolloutContext,
  info: ToolRolloutInfo,
  settings: RunSettings<T>,
  tools: RolloutToolbox,
): EnvironmentContext {
  return {
    signal: context.signal,
    trajectory: context.trajectory,
    index: context.index,
    groupIndex: context.groupIndex,
    attempt: context.attempt,
    get endpoint() {
      return context.endpoint;
    },
    model: settings.model,
    sampling: settings.sampling,
    tools,
    get tempDir() {
      return info.tempDir;
    },
  };
}

/**
 * An environment: a task set (train and held-out), how a task is played (its own `rollout`, or
 * the default agent loop over its `tools`) and how it is scored (`reward`: a function, or named
 * weighted rubric functions; `scoreGroup`), with optional per-rollout `setup` and `cleanup`. The
 * spec is checked now, each field named in the error. Train on it with
 * `new RLTrainer({ model, environment })`; measure a model on it with `evaluate` or
 * `policyloop eval`. With a `rollout`, a task may be any type; without one, tasks are
 * {@link PromptTask}s.
 * @throws {InvalidArgumentError} for a bad field, an unknown one (naming the nearest), two tools of
 * one name, or (in an array) a task the default loop cannot play.
 * @example
 * export default defineEnvironment({
 *   name: 'arithmetic',
 *   dataset: [{ prompt: 'What is 2+3?', answer: '5' }],
 *   systemPrompt: 'Answer with the number only.',
 *   tools: [functionTool({ name: 'add', parameters: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => a + b })],
 *   reward: { correct: exactMatch((task) => String(task.answer)), turns: { fn: (t) => t.metrics['num_turns'] ?? 0, weight: 0 } },
 * });
 */
export function defineEnvironment<T>(spec: EnvironmentSpec<T> & { rollout: EnvironmentRolloutFn<T> }): Environment<T>;
/**
 * An environment whose tasks the default agent loop can play: each a {@link PromptTask} (a rollout
 * of its own is still allowed).
 * @example
 * const env = defineEnvironment({ name: 'echo', dataset: [{ prompt: 'Say hi', answer: 'hi' }], reward: exactMatch((task) => 'hi') });
 */
export function defineEnvironment<T extends PromptTask>(spec: EnvironmentSpec<T>): Environment<T>;
export function defineEnvironment<T>(spec: EnvironmentSpec<T>): Environment<T> {
  return new DefinedEnvironment(checkSpec(spec), spec, Object.freeze({}));
}

/**
 * `environment` carrying `args` (what `loadEnvironment` gives): a defined one is copied with them;
 * any other object that is an environment is wrapped, reading everything else through.
 */
export function environmentWithArgs<T>(
  environment: Environment<T>,
  args: Readonly<Record<string, unknown>>,
): Environment<T> {
  if (environment instanceof DefinedEnvironment) return environment.withArgs(args);
  return Object.create(environment, {
    args: { value: Object.freeze({ ...args }), enumerable: true },
  }) as Environment<T>;
}
