/**
 * The types of an environment: a task set (train and held-out), how one task is played (a rollout
 * of its own, or the default agent loop over the environment's tools), and how it is scored (a
 * reward, named weighted rubric functions, a group judge). `defineEnvironment` makes one;
 * `loadEnvironment` loads one by name; `RLTrainer` trains on one; `evaluate` and `policyloop eval`
 * measure a model on one.
 */
import type { RewardSpec } from '../rewards/combine-rewards.js';
import type { GroupScorer } from '../rollout/gather-trajectory-groups.js';
import type { RolloutContext } from '../rollout/rollout-function.js';
import type { ChatCompletionMessageParam, TrajectoryInput } from '../schema/index.js';
import type { FunctionTool } from '../tools/function-tool.js';
import type { Toolbox, ToolSource } from '../tools/tool-types.js';
import type { PromptedModel } from '../training/prompted-model.js';
import type { TrainableModel } from '../training/trainable-model.js';

/**
 * Tasks: an array, an iterable, an async iterable, or a function returning one (called when a run
 * needs the tasks, so a large or remote set is read lazily).
 */
export type DatasetSource<T> =
  | readonly T[]
  | Iterable<T>
  | AsyncIterable<T>
  | (() => readonly T[] | Iterable<T> | AsyncIterable<T> | Promise<readonly T[] | Iterable<T> | AsyncIterable<T>>);

/** A task of an environment without a rollout of its own: what the default agent loop plays. */
export interface PromptTask {
  /** The user's message, or the whole conversation to start from (after the system prompt). */
  prompt: string | readonly ChatCompletionMessageParam[];
  /** The expected answer, for the rubric (e.g. `exactMatch((task) => task.answer)`). */
  answer?: unknown;
  /** Anything else the rubric or the tools need. */
  info?: Readonly<Record<string, unknown>> | undefined;
}

/** A tool an environment lists: a function tool, or a source of tools such as `mcpServer(...)`. */
export type EnvironmentTool = FunctionTool | ToolSource;

/** What an environment's rollout, `setup`, `cleanup` and tools are called with, besides the task. */
export interface EnvironmentContext extends RolloutContext {
  /**
   * The model being trained or evaluated (a `TrainableModel` or a `PromptedModel`): one rollout
   * serves training and evaluation. Call it through `model.openai()` (or `model.fetch()`) so that
   * every completion is recorded.
   */
  readonly model: PromptedModel | TrainableModel;
  /**
   * Request parameters the run asks for (an evaluation's `temperature`, `maxTokens` as
   * `max_tokens`, ...): the default loop sends them; a rollout of its own should spread them into
   * its requests.
   */
  readonly sampling: Readonly<Record<string, unknown>>;
  /** Every tool of the environment for this rollout (function tools and MCP servers). */
  readonly tools: Toolbox;
  /** This rollout's own temporary folder, made on first read, removed when the rollout ends. */
  readonly tempDir: string;
}

/**
 * Plays one task: the environment's own rollout, called with the task and an
 * {@link EnvironmentContext}. Returned fields override the recorded ones, as for `RolloutFn`.
 */
export type EnvironmentRolloutFn<T> = (
  task: T,
  context: EnvironmentContext,
  // biome-ignore lint/suspicious/noConfusingVoidType: a rollout may return nothing
) => Promise<TrajectoryInput | void>;

/** How a rollout ended, as `cleanup` sees it. */
export interface RolloutOutcome {
  /** What the rollout (or `setup`) threw, or what aborted it; undefined when it finished. */
  readonly error: unknown;
}

/** What `defineEnvironment` takes; `T` is the task type. */
export interface EnvironmentSpec<T> {
  /** The environment's name: in histories, eval metadata and messages. */
  name: string;
  /** The training tasks. */
  dataset: DatasetSource<T>;
  /**
   * The held-out tasks, for evaluation and for a trainer's validation.
   * @default dataset
   */
  evalDataset?: DatasetSource<T> | undefined;
  /**
   * Plays one task. Without it, tasks are {@link PromptTask}s and the default agent loop plays
   * them: `systemPrompt`, the task's prompt, then up to `maxTurns` model turns, executing the
   * tool calls of each turn and returning the results (errors included) as tool messages.
   */
  rollout?: EnvironmentRolloutFn<T> | undefined;
  /**
   * Request parameters of every model call of the default loop (`max_tokens`, `temperature`, ...),
   * and what `context.sampling` holds for a rollout of its own; a run's own sampling
   * (`start({ sampling })`, an evaluation's flags) wins key by key.
   */
  sampling?: Readonly<Record<string, unknown>> | undefined;
  /** The default loop's system message. */
  systemPrompt?: string | undefined;
  /**
   * The default loop's limit of model turns (a turn is one chat completion).
   * @default 10
   */
  maxTurns?: number | undefined;
  /** Function tools and tool sources (`mcpServer`), offered in every rollout as `context.tools`. */
  tools?: readonly EnvironmentTool[] | undefined;
  /**
   * The reward of each trajectory: a function of `(trajectory, task)`, or named weighted rubric
   * functions (weight 0 = a metric), each function's value recorded in `trajectory.metrics`.
   */
  reward?: RewardSpec<T> | undefined;
  /** Scores each group as a whole after `reward` (e.g. `relativeJudge`). */
  scoreGroup?: GroupScorer<T> | undefined;
  /** Runs before each rollout (after its tools open); a throw fails the rollout. */
  setup?: ((task: T, context: EnvironmentContext) => void | Promise<void>) | undefined;
  /** Runs after each rollout, even when it or `setup` threw or it was aborted. */
  cleanup?: ((task: T, context: EnvironmentContext, outcome: RolloutOutcome) => void | Promise<void>) | undefined;
}
