/** What a user writes: a rollout function, and the context it is called with. */
import type { TrajectoryInput } from '../schema/index.js';
import type { RolloutEndpoint } from './endpoint/rollout-endpoint.js';
import type { TrajectoryRecorder } from './trajectory-recorder.js';

/** What a rollout function is called with, besides its scenario. */
export interface RolloutContext {
  /** Aborts when the gather is aborted, the exception budget is exceeded, or the rollout times out. */
  readonly signal: AbortSignal;
  /** The trajectory being recorded: captured completions land here; add messages, metrics, logs. */
  readonly trajectory: TrajectoryRecorder;
  /** Which rollout of its group this is (0 .. groupSize - 1). */
  readonly index: number;
  /** Which group (= the scenario's position in the scenarios). */
  readonly groupIndex: number;
  /** Which attempt this is (0 for the first; retries count up). */
  readonly attempt: number;
  /**
   * This rollout's own OpenAI- and Anthropic-compatible endpoint, for an agent in another process:
   * base URLs, a key, and `env` (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL`,
   * `ANTHROPIC_API_KEY`) to spread into a child's environment. It answers chat completions, the
   * Responses API and the Messages API (streamed too) and `GET /v1/models`, forwards each call to
   * the gather's `model` and records it into this rollout's trajectory. Served on 127.0.0.1 by this
   * process, made when first read; after the rollout ends its URLs answer 410. Needs the gather's
   * `model` option (an `RLTrainer` passes its model); reading it without one throws.
   * @example
   * const child = spawn('python', ['agent.py', scenario.task], { env: { ...process.env, ...context.endpoint.env } });
   */
  readonly endpoint: RolloutEndpoint;
}

/**
 * One rollout of a scenario: runs the agent (through a captured client, see `captureCompletions`)
 * and optionally returns trajectory fields. Returned fields override the recorded ones
 * (`messages_and_choices` too, when given); `metrics` and `metadata` are merged and `logs` appended.
 * Return nothing to keep what was recorded.
 * @example
 * const rollout: RolloutFn<{ question: string }> = async (scenario, { trajectory }) => {
 *   const completion = await client.chat.completions.create({
 *     model, messages: [{ role: 'user', content: scenario.question }],
 *   });
 *   trajectory.metrics['answered'] = completion.choices[0]?.message.content !== null;
 * };
 */
// biome-ignore lint/suspicious/noConfusingVoidType: a rollout may return nothing (an async function without return)
export type RolloutFn<S> = (scenario: S, context: RolloutContext) => Promise<TrajectoryInput | void>;

/** Short name for {@link RolloutFn}. */
export type Rollout<S> = RolloutFn<S>;

/**
 * The scenario type of a rollout function.
 * @example
 * type Task = ScenarioOf<typeof rollout>; // { question: string }
 */
export type ScenarioOf<R> = R extends RolloutFn<infer S> ? S : never;
