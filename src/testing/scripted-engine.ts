/**
 * The policy engine of {@link ScriptedBackend}: it answers chat completions from a script (with
 * logprobs, so the answers train) and "trains" at once, writing a one-file checkpoint and reporting
 * metrics. It implements the engine interface the local service drives, so the service around it
 * (routes, store, job queue, events, checkpoints) is the real one.
 */
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type {
  Engine,
  EngineTrainingEvent,
  EngineTrainingJob,
  EngineTrainingResult,
  PolicyRef,
} from '../engine/types.js';
import { completionUsage } from '../engine/types.js';
import { raceSignal } from '../internal/delay.js';
import type {
  ChatCompletionRequestBody,
  ChatCompletionResult,
  Choice,
  SFTRow,
  TrajectoryGroup,
} from '../schema/index.js';
import { makeChoice } from './make-choice.js';

/** One completion the scripted engine is asked for: what a {@link ScriptedSample} function reads. */
export interface ScriptedSampleRequest {
  /** The request as the service validated it (`model`, `messages`, `tools`, `n`, ...). */
  readonly body: ChatCompletionRequestBody;
  /** The step of the checkpoint sampled from (0: the base model). */
  readonly step: number;
  /** The base model of the policy sampled from. */
  readonly baseModel: string;
  /** Which choice of the request (0 .. `n` - 1). */
  readonly index: number;
  /**
   * How many completions were asked for the same `messages` before this one (0 for the first):
   * the rollouts of one group send the same prompt, so a list script gives them different answers.
   */
  readonly repeat: number;
}

/**
 * What the scripted engine answers: a text (made into a Choice with one logprob of -0.1 per word),
 * a `Choice` (e.g. `makeChoice(null, { toolCalls: [...] })`, for tool-calling agents), a list of
 * them (the k-th request with the same messages gets entry `k % length`), or a function of the
 * {@link ScriptedSampleRequest} returning one. A function that throws fails the request (the
 * service answers 500).
 */
export type ScriptedSample =
  | string
  | Choice
  | readonly (string | Choice)[]
  | ((request: ScriptedSampleRequest) => string | Choice | Promise<string | Choice>);

/** One training job the scripted engine ran, as the service handed it over. */
export interface ScriptedTrainingJob {
  /** `'rl'` (`model.train`) or `'sft'` (`model.trainSFT`). */
  readonly kind: 'rl' | 'sft';
  /** The service's id of the model trained (`model.id`). */
  readonly modelId: string;
  /**
   * The step trained: the model's step before the job, as the trainer's `step:start` and
   * `step:end` events and the history number it. Its checkpoint is `step + 1`.
   */
  readonly step: number;
  /** The groups uploaded (RL; empty for SFT), each trajectory with its `initial_policy_version`. */
  readonly groups: readonly TrajectoryGroup[];
  /** The rows (SFT; empty for RL). */
  readonly rows: readonly SFTRow[];
  /** The learning rate the job was sent (`experimental_config.learning_rate`, or SFT's), or null. */
  readonly learningRate: number | null;
  /** The job's `experimental_config` (RL) or `config` (SFT), as sent. */
  readonly config: Readonly<Record<string, unknown>> | null;
}

/**
 * Scripts a training job: returns metrics (merged over the defaults, reported as the job's
 * `gradient_step` and stored with its checkpoint, so they reach `train/*` in the history), or
 * throws to fail the job (`TrainingJobFailedError` with its message). It may wait (to hold a job
 * running); `signal` aborts when the service stops the job.
 */
export type ScriptedTrain = (
  job: ScriptedTrainingJob,
  context: { readonly signal: AbortSignal | undefined },
  // biome-ignore lint/suspicious/noConfusingVoidType: a script may return nothing (keep the default metrics)
) => Readonly<Record<string, number>> | void | Promise<Readonly<Record<string, number>> | void>;

/** What the scripted engine is built from. */
export interface ScriptedEngineOptions {
  readonly baseModels: readonly string[];
  readonly sample: ScriptedSample;
  readonly train: ScriptedTrain | undefined;
}

/** The scripted engine, and what it was asked. */
export interface ScriptedEngine extends Engine {
  readonly trainedJobs: ScriptedTrainingJob[];
  readonly samples: ScriptedSampleRequest[];
}

/** The file a scripted checkpoint holds: its step, so that sampling from it knows where it is. */
const CHECKPOINT_FILE = 'scripted-checkpoint.json';

/** Builds the engine; see {@link ScriptedEngine}. */
export function createScriptedEngine(options: ScriptedEngineOptions): ScriptedEngine {
  const trainedJobs: ScriptedTrainingJob[] = [];
  const samples: ScriptedSampleRequest[] = [];
  const repeats = new Map<string, number>();
  const steps = new Map<string, number>();

  /** The step of the checkpoint at `policy` (read once from its file: a rerun over the same data directory knows it too). */
  const stepOf = (policy: PolicyRef): number => {
    const path = policy.checkpointPath;
    if (path === null) return 0;
    let step = steps.get(path);
    if (step === undefined) {
      const written = JSON.parse(readFileSync(join(path, CHECKPOINT_FILE), 'utf8')) as { step?: unknown };
      step = typeof written.step === 'number' ? written.step : 0;
      steps.set(path, step);
    }
    return step;
  };

  const answer = async (request: ScriptedSampleRequest): Promise<Choice> => {
    const { sample } = options;
    let value: string | Choice;
    if (typeof sample === 'function') value = await sample(request);
    else if (Array.isArray(sample)) {
      const list = sample as readonly (string | Choice)[];
      if (list.length === 0) throw new Error('Expected `sample` to list at least one answer, got an empty list');
      value = list[request.repeat % list.length] as string | Choice;
    } else value = sample as string | Choice;
    if (typeof value === 'string') return makeChoice(value, { index: request.index });
    if (typeof value !== 'object' || value === null || typeof value.message !== 'object') {
      throw new Error(`Expected the scripted sample to be a text or a Choice, got ${JSON.stringify(value)}`);
    }
    return { ...structuredClone(value), index: request.index };
  };

  return {
    trainedJobs,
    samples,
    baseModels: () => options.baseModels,

    async chatCompletion(policy, body): Promise<ChatCompletionResult> {
      const step = stepOf(policy);
      const key = JSON.stringify(body.messages);
      const choices: Choice[] = [];
      for (let index = 0; index < (body.n ?? 1); index += 1) {
        const repeat = repeats.get(key) ?? 0;
        repeats.set(key, repeat + 1);
        const request: ScriptedSampleRequest = { body, step, baseModel: policy.baseModel, index, repeat };
        samples.push(request);
        const choice = await answer(request);
        choices.push(body.logprobs === true ? choice : { ...choice, logprobs: null });
      }
      const promptTokens = wordCount(JSON.stringify(body.messages));
      const completionTokens = choices.reduce(
        (sum, choice) => sum + Math.max(1, choice.logprobs?.content?.length ?? 0),
        0,
      );
      return {
        choices,
        usage: completionUsage(promptTokens, completionTokens),
      };
    },

    async train(
      job: EngineTrainingJob,
      {
        onEvent,
        signal,
      }: { readonly onEvent: (event: EngineTrainingEvent) => void; readonly signal?: AbortSignal | undefined },
    ): Promise<EngineTrainingResult> {
      const config = (job.config ?? null) as Readonly<Record<string, unknown>> | null;
      const rate = config?.['learning_rate'];
      const scripted: ScriptedTrainingJob = {
        kind: job.kind,
        modelId: job.modelId ?? '',
        step: job.step - 1,
        groups: job.kind === 'rl' ? job.trajectoryGroups : [],
        rows: job.kind === 'sft' ? job.rows : [],
        learningRate: typeof rate === 'number' ? rate : null,
        config,
      };
      trainedJobs.push(scripted);
      onEvent({ type: 'training_started', data: { num_sequences: 1 } });
      const trajectories = scripted.groups.reduce((sum, group) => sum + group.trajectories.length, 0);
      const defaults: Record<string, number> = {
        // A loss that falls with every step, so that a plot or a "best" by loss has something to read.
        loss: 1 / (scripted.step + 1),
        grad_norm: 1,
        num_trajectories: job.kind === 'rl' ? trajectories : scripted.rows.length,
        ...(scripted.learningRate === null ? {} : { learning_rate: scripted.learningRate }),
      };
      const own =
        options.train === undefined ? undefined : await raceSignal(run(options.train, scripted, signal), signal);
      const metrics = { ...defaults, ...own };
      onEvent({ type: 'gradient_step', data: metrics });
      await mkdir(job.outputPath, { recursive: true });
      await writeFile(join(job.outputPath, CHECKPOINT_FILE), JSON.stringify({ step: job.step, from: job.policy.key }));
      return { metrics };
    },

    async close(): Promise<void> {},
  };
}

/** The script's metrics (a sync throw becomes a rejection). */
async function run(
  train: ScriptedTrain,
  job: ScriptedTrainingJob,
  signal: AbortSignal | undefined,
): Promise<Readonly<Record<string, number>> | undefined> {
  return (await train(job, { signal })) ?? undefined;
}

function wordCount(text: string): number {
  return Math.max(1, text.split(/\s+/).filter((word) => word !== '').length);
}
