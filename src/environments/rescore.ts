/**
 * `rescore(dir, options)`: the rewards, metrics and pass@k of a saved evaluation computed again
 * from its saved messages with an environment's current rubric (and group judge), without calling
 * the model, into `DIR/rescore-N/` (the next free N) with files of the same shape.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { z } from 'zod';
import { InvalidArgumentError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { evaluateReward } from '../rewards/reward-function.js';
import {
  type ChatCompletionMessageParam,
  type MessageOrChoice,
  Trajectory,
  type TrajectoryGroup,
} from '../schema/index.js';
import { PromptedModel } from '../training/prompted-model.js';
import type { Environment, EnvironmentRun } from './environment.js';
import { loadEnvironment } from './load-environment.js';
import {
  type EvaluationMetadata,
  type EvaluationNumbers,
  type EvaluationRow,
  metadataOf,
  readEvaluation,
  RESULTS_FILE,
  rowLines,
  summarizeRows,
  writeFileAtomically,
  writeMetadata,
} from './eval-files.js';

/** Options of {@link rescore}. */
export interface RescoreOptions<T = unknown> {
  /**
   * The environment whose rubric scores the rows.
   * @default the evaluation's own: `loadEnvironment(metadata.env_id, metadata.env_args)`
   */
  environment?: Environment<T> | undefined;
  /**
   * The environment's name in the new `metadata.json`.
   * @default the evaluation's `env_id` without `environment`, else `environment.name`
   */
  envId?: string | undefined;
  /**
   * A rollout is correct when its reward >= threshold.
   * @default the evaluation's
   */
  threshold?: number | undefined;
  /**
   * Rows scored at once (a judge in the rubric calls a model).
   * @default 8
   */
  concurrency?: number | undefined;
  /** Aborts the rescoring (nothing is written then). */
  signal?: AbortSignal | undefined;
}

/** What {@link rescore} returns: the new numbers and rows, and the folder they were written to. */
export interface RescoreResult extends EvaluationNumbers {
  /** The rescored rows, by task and rollout index. */
  readonly rows: readonly EvaluationRow[];
  /** The folder written: `DIR/rescore-N`. */
  readonly outDir: string;
  /** Its `metadata.json`. */
  readonly metadata: EvaluationMetadata;
}

const RescoreOptionsSchema = optionsSchema<RescoreOptions>()({
  environment: option
    .like<Environment<unknown>>(
      (value) => typeof value?.start === 'function' && typeof value?.evalDataset === 'function',
      'an Environment (defineEnvironment, loadEnvironment)',
    )
    .optional(),
  envId: option.nonEmptyString().optional(),
  threshold: option.number().optional(),
  concurrency: option.integer({ min: 1 }).default(8),
  signal: option.signal().optional(),
});

/** The text of a message's content (parts joined). */
function contentText(content: ChatCompletionMessageParam['content']): string | null {
  if (content === undefined || content === null) return null;
  if (typeof content === 'string') return content;
  return content.map((part) => ('text' in part && typeof part.text === 'string' ? part.text : '')).join('');
}

/**
 * A saved message as a trajectory item: an assistant message becomes a Choice again (without
 * logprobs), so that the readers of model turns (`finalAssistantText`, `toolCallsOf`, the judge)
 * read it as they read the original.
 */
function toItem(message: ChatCompletionMessageParam): MessageOrChoice {
  if (message.role !== 'assistant') return message;
  const toolCalls = message.tool_calls ?? [];
  return {
    index: 0,
    finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
    logprobs: null,
    message: {
      role: 'assistant',
      content: contentText(message.content),
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
      ...(message.function_call ? { function_call: message.function_call } : {}),
      ...(typeof message.refusal === 'string' ? { refusal: message.refusal } : {}),
    },
  } as MessageOrChoice;
}

/** The trajectory a saved row stands for (reward and metrics empty, to be scored again). */
function trajectoryOf(row: EvaluationRow): Trajectory {
  return Trajectory.parse({
    messages_and_choices: row.messages.map(toItem),
    additional_histories: (row.additional_histories ?? []).map((messages) => ({
      messages_and_choices: messages.map(toItem),
    })),
    reward: 0,
    metrics: {},
  });
}

/** The next free `DIR/rescore-N` (N from 1), made here so that two rescorings never share one. */
async function claimFolder(directory: string): Promise<string> {
  for (let number = 1; ; number += 1) {
    const folder = path.join(directory, `rescore-${number}`);
    try {
      await mkdir(folder);
      return folder;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/** Runs `work` on each item, at most `concurrency` at once. */
async function eachLimited<I>(
  items: readonly I[],
  concurrency: number,
  work: (item: I) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next] as I;
      next += 1;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** A fetch that refuses: rescoring never calls the evaluated model. */
const refusingFetch: typeof globalThis.fetch = async () => {
  throw new Error('rescore does not call the evaluated model');
};

/**
 * Scores the rows saved in `directory` (an evaluation's `--out` folder) again with an
 * environment's current rubric and group judge: its own (loaded from `metadata.json`'s `env_id`
 * and `env_args`) or `options.environment`. The model is never called: each row's saved messages
 * are the trajectory (its assistant messages as the model's turns), its saved task the task. A
 * row that was a rollout error (no messages) stays one; a row whose rubric threw before is scored
 * again; a rubric function or judge that throws now makes an error row. Writes `results.jsonl`
 * and `metadata.json` of the same shape to `directory/rescore-N` (the next free N); the original
 * files are not touched.
 * @throws {InvalidArgumentError} for a bad option; a `PolicyloopError` when `directory` holds no
 *   evaluation.
 * @example
 * const { avgReward, passAtK, outDir } = await rescore('evals/mini');
 * const judged = await rescore('evals/mini', { environment: withStricterRubric });
 */
export async function rescore<T = unknown>(directory: string, options: RescoreOptions<T> = {}): Promise<RescoreResult> {
  // The schema checked the environment's kind; its task type is the caller's `T`.
  const parsed = parseOptions(RescoreOptionsSchema, options) as Omit<
    z.output<typeof RescoreOptionsSchema>,
    'environment'
  > & {
    environment?: Environment<unknown> | undefined;
  };
  if (typeof directory !== 'string' || directory === '') {
    throw new InvalidArgumentError(
      'directory',
      `Expected the folder of an evaluation, got ${JSON.stringify(directory)}`,
    );
  }
  const saved = await readEvaluation(directory);
  const { metadata } = saved;
  const environment = parsed.environment ?? (await loadEnvironment(metadata.env_id, metadata.env_args));
  const envId = parsed.envId ?? (parsed.environment === undefined ? metadata.env_id : environment.name);
  const threshold = parsed.threshold ?? metadata.threshold;

  // One row per (task, rollout), the first of each as the evaluation wrote it.
  const seen = new Set<string>();
  const rows = saved.rows
    .filter((row) => {
      const key = `${row.example_id}:${row.rollout_index}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .sort((a, b) => a.example_id - b.example_id || a.rollout_index - b.rollout_index);

  // A model that is never called (its fetch refuses): the environment's rollouts are not run.
  const model = new PromptedModel({
    project: 'rescore',
    name: 'rescore',
    model: metadata.model,
    baseURL: metadata.base_url ?? 'http://127.0.0.1:9/v1',
    apiKey: 'none',
    fetch: refusingFetch,
    maxRetries: 0,
  });
  const run: EnvironmentRun<unknown> = await environment.start({
    model,
    sampling: metadata.sampling,
    signal: parsed.signal,
  });
  const rescored: EvaluationRow[] = [];
  try {
    const trajectories = new Map<EvaluationRow, Trajectory>();
    await eachLimited(rows, parsed.concurrency, async (row) => {
      parsed.signal?.throwIfAborted();
      if (row.error !== null && row.messages.length === 0) return; // a rollout error stays one
      const trajectory = trajectoryOf(row);
      trajectories.set(row, trajectory);
      if (run.reward !== undefined) {
        try {
          trajectory.reward = await evaluateReward(run.reward, trajectory, row.task);
        } catch (error) {
          trajectory.logs.push(`error: ${error instanceof Error ? error.message : String(error)}`);
          trajectories.delete(row);
          rescored.push({
            ...row,
            reward: null,
            metrics: numericMetrics(trajectory),
            error: error instanceof Error ? error.message : String(error),
          });
        }
      } else {
        trajectory.reward = row.reward ?? 0;
      }
    });
    // The group judge, one task at a time, over the rows scored.
    const byExample = new Map<number, EvaluationRow[]>();
    for (const row of rows) {
      if (!trajectories.has(row)) continue;
      const list = byExample.get(row.example_id) ?? [];
      list.push(row);
      byExample.set(row.example_id, list);
    }
    const judgeErrors = new Map<EvaluationRow, string>();
    if (run.scoreGroup !== undefined) {
      for (const [exampleId, list] of byExample) {
        parsed.signal?.throwIfAborted();
        const group: TrajectoryGroup = {
          trajectories: list.map((row) => trajectories.get(row) as Trajectory),
          exceptions: [],
        };
        try {
          const returned = await run.scoreGroup(group, {
            scenario: list[0]?.task,
            groupIndex: exampleId,
            signal: parsed.signal ?? new AbortController().signal,
          });
          if (returned)
            returned.trajectories.forEach((trajectory, index) => {
              const row = list[index];
              if (row !== undefined) trajectories.set(row, trajectory);
            });
        } catch (error) {
          for (const row of list)
            judgeErrors.set(row, `scoreGroup: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    }
    for (const row of rows) {
      const trajectory = trajectories.get(row);
      if (trajectory === undefined) {
        if (row.error !== null && row.messages.length === 0) rescored.push({ ...row });
        continue;
      }
      const error = judgeErrors.get(row) ?? null;
      rescored.push({
        ...row,
        reward: error === null ? trajectory.reward : null,
        metrics: numericMetrics(trajectory),
        error,
      });
    }
  } finally {
    await run.close();
  }
  rescored.sort((a, b) => a.example_id - b.example_id || a.rollout_index - b.rollout_index);
  const numbers = summarizeRows(rescored, { rolloutsPerExample: metadata.rollouts_per_example, threshold });
  const final = metadataOf(
    {
      env_id: envId,
      env_args: { ...environment.args },
      model: metadata.model,
      base_url: metadata.base_url,
      num_examples: metadata.num_examples,
      rollouts_per_example: metadata.rollouts_per_example,
      sampling: metadata.sampling,
      threshold,
    },
    numbers,
  );
  const outDir = await claimFolder(directory);
  await writeFileAtomically(path.join(outDir, RESULTS_FILE), rowLines(rescored));
  await writeMetadata(outDir, final);
  return { ...numbers, rows: rescored, outDir: path.resolve(outDir), metadata: final };
}

/** A trajectory's metrics as numbers. */
function numericMetrics(trajectory: Trajectory): Record<string, number> {
  const metrics: Record<string, number> = {};
  for (const [name, value] of Object.entries(trajectory.metrics)) metrics[name] = Number(value);
  return metrics;
}
