/**
 * Small helpers for the trainer's fast tests on the scripted backend: a fresh model, a rollout of
 * one completion through `model.openai()`, the jobs the scripted engine ran for a model, and an
 * event recorder. Kept small so that renamed events or fields change one line here.
 */
import { type Backend, type RLTrainer, type RolloutFn, TrainableModel } from 'policyloop';
import type { ScriptedBackend, ScriptedSampleRequest, ScriptedTrainingJob } from 'policyloop/testing';
import type { RLTrainerEvents } from 'policyloop/training';

let models = 0;

/** A new model registered on `backend` (a name of its own, so tests do not share steps). */
export async function freshModel(backend: Backend): Promise<TrainableModel> {
  models += 1;
  const model = new TrainableModel({ project: 'loops', name: `model-${models}`, baseModel: 'policyloop/tiny-chat' });
  return model.register(backend);
}

/** What a test's reward sees of a rollout. */
export interface RolloutFacts {
  readonly scenario: string;
  /** The answer the scripted engine gave. */
  readonly text: string;
  /** Which rollout of its group. */
  readonly index: number;
  /** Which attempt (0 first). */
  readonly attempt: number;
}

/**
 * A rollout as a user writes one: one chat completion of the scenario through `model.openai()`.
 * Its reward is `rewardOf(facts)`, by default the rollout's index parity (0, 1, 0, ...), so every
 * group of two or more rollouts has a learning signal whatever the script answers.
 */
export function chatRollout(
  model: TrainableModel,
  rewardOf: (facts: RolloutFacts) => number = ({ index }) => index % 2,
): RolloutFn<string> {
  const client = model.openai();
  return async (scenario, { index, attempt, signal }) => {
    const completion = await client.chat.completions.create(
      { model: model.inferenceName(), messages: [{ role: 'user', content: scenario }] },
      { signal },
    );
    const text = completion.choices[0]?.message.content ?? '';
    return { reward: rewardOf({ scenario, text, index, attempt }) };
  };
}

/**
 * `trainer.run()`, stopped after 30 s at most (and by `signal`): a loop that never ends fails its
 * test with `APIUserAbortError` instead of hanging the suite.
 */
export function run<S>(trainer: RLTrainer<S>, signal?: AbortSignal): ReturnType<RLTrainer<S>['run']> {
  const limit = AbortSignal.timeout(30_000);
  return trainer.run({ signal: signal === undefined ? limit : AbortSignal.any([signal, limit]) });
}

/** The jobs the scripted engine ran for `model`, in order. */
export function jobsOf(backend: ScriptedBackend, model: TrainableModel): ScriptedTrainingJob[] {
  return backend.trainedJobs.filter((job) => job.modelId === model.id);
}

/** The completions the scripted engine answered for `model` (by its inference name, any step), in order. */
export function samplesOf(backend: ScriptedBackend, model: TrainableModel): ScriptedSampleRequest[] {
  const name = model.inferenceName();
  return backend.samples.filter((sample) => sample.body.model === name || sample.body.model.startsWith(`${name}:`));
}

/** The step each group of a job was sampled at (its trajectories' oldest `initial_policy_version`). */
export function sampledSteps(job: ScriptedTrainingJob): number[] {
  return job.groups.map((group) =>
    Math.min(...group.trajectories.map((trajectory) => trajectory.initial_policy_version ?? Number.NaN)),
  );
}

/** Every payload of `name` the trainer emits from now on, in order. */
export function recorded<K extends keyof RLTrainerEvents>(
  trainer: RLTrainer<string>,
  name: K,
): RLTrainerEvents[K][0][] {
  const payloads: RLTrainerEvents[K][0][] = [];
  const listen = trainer.on.bind(trainer) as (event: K, listener: (payload: RLTrainerEvents[K][0]) => void) => void;
  listen(name, (payload) => payloads.push(payload));
  return payloads;
}

/** The `training_step` of each history row that has a metric starting with `prefix`. */
export async function stepsWith(model: TrainableModel, prefix: string): Promise<number[]> {
  const rows = await model.history();
  return rows.filter((row) => Object.keys(row).some((name) => name.startsWith(prefix))).map((row) => row.training_step);
}
