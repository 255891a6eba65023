/**
 * The KL penalty on a Tinker server, computed on the client: the reference's logprobs of each
 * sampled sequence, the source's (the sampler's, or the training model's from a forward pass
 * before the step), and `kl_penalty_coef · (mean KL − KL_t)` folded into the advantages that
 * forward/backward carries, checked against numbers worked out by hand. The training jobs run on a
 * stub client (no HTTP), so what reaches forward/backward is read directly.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TrajectoryGroup } from 'policyloop/schema';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointRecords, writeTinkerCheckpoint } from '../../src/backends/tinker/checkpoint-record.js';
import { foldKlPenalty, klPenaltySettings, targetLogprobs } from '../../src/backends/tinker/kl-penalty.js';
import type { TinkerClient } from '../../src/backends/tinker/tinker-client.js';
import { TinkerTrainingJobs } from '../../src/backends/tinker/training-jobs.js';
import type { ReferenceLogprobs } from '../../src/backends/tinker/training-jobs.js';
import type { TinkerDatum } from '../../src/backends/tinker/types.js';
import type { EngineTrainingJob, PolicyRef } from '../../src/engine/types.js';
import type { ExperimentalTrainingConfig } from 'policyloop/schema';
import type { TextLayer } from '../../src/text/loader.js';

describe('foldKlPenalty', () => {
  it('adds coef · (mean KL − KL_t) to the learned targets only, the mean over every row', () => {
    // KL of the learned targets: row 0 [0.5, −0.5], row 1 [0.5, 0.5]; mean 0.25.
    const folded = foldKlPenalty(
      [
        { mask: [0, 1, 1], advantages: [0, 0.5, 0.5], source: [-7, -1, -2], reference: [-9, -1.5, -1.5] },
        { mask: [0, 1, 1], advantages: [0, -0.5, -0.5], source: [-7, -0.5, -1.5], reference: [-9, -1, -2] },
      ],
      0.5,
    );
    expect(folded.klReference).toBe(0.25);
    expect(folded.tokens).toBe(4);
    expect(folded.advantages).toEqual([
      [0, 0.375, 0.875],
      [0, -0.625, -0.625],
    ]);
  });

  it('leaves the mean advantage unchanged, and is the identity when source equals reference', () => {
    const rows = [
      { mask: [1, 1, 0, 1], advantages: [1, 1, 0, 1], source: [-0.2, -3, 0, -1.1], reference: [-0.9, -0.4, 0, -2.5] },
    ];
    const folded = foldKlPenalty(rows, 2);
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    expect(mean([folded.advantages[0]![0]!, folded.advantages[0]![1]!, folded.advantages[0]![3]!])).toBeCloseTo(1, 12);
    expect(folded.advantages[0]![2]).toBe(0);
    const same = foldKlPenalty([{ ...rows[0]!, reference: rows[0]!.source }], 2);
    expect(same.advantages).toEqual([[1, 1, 0, 1]]);
    expect(same.klReference).toBe(0);
  });

  it('refuses a non-finite logprob of a learned target, naming it', () => {
    expect(() => foldKlPenalty([{ mask: [1], advantages: [1], source: [Number.NaN], reference: [-1] }], 0.1)).toThrow(
      /Expected finite logprobs for the KL penalty, got log π_src NaN and log π_ref -1 at target 0/,
    );
  });
});

describe('targetLogprobs and klPenaltySettings', () => {
  it('takes the last n − 1 prompt logprobs (SkyRL gives n − 1, hosted Tinker n with a leading null)', () => {
    expect(targetLogprobs([1, 2, 3], [-0.5, -0.25])).toEqual([-0.5, -0.25]);
    expect(targetLogprobs([1, 2, 3], [Number.NaN, -0.5, -0.25])).toEqual([-0.5, -0.25]);
    expect(() => targetLogprobs([1, 2, 3], [-0.5])).toThrow(
      'Expected the reference sampler to give 2 prompt logprobs for a sequence of 3 tokens, got 1.',
    );
    expect(() => targetLogprobs([1, 2, 3], undefined)).toThrow(/got none/);
  });

  it('is off without a positive coefficient; the source defaults to current_learner as in ART', () => {
    expect(klPenaltySettings(null)).toBeUndefined();
    expect(klPenaltySettings({ kl_penalty_coef: 0 })).toBeUndefined();
    expect(klPenaltySettings({ kl_penalty_coef: 0.1 })).toEqual({ coef: 0.1, source: 'current_learner' });
    expect(klPenaltySettings({ kl_penalty_coef: 0.1, kl_penalty_source: 'sample' })).toEqual({
      coef: 0.1,
      source: 'sample',
    });
  });
});

/** One group of two choices: [10, 11] then [12, 13] (reward 1) and [14, 15] (reward 0). */
const GROUPS: TrajectoryGroup[] = [
  {
    trajectories: [
      { completion: [12, 13], logprobs: [-1, -2], reward: 1 },
      { completion: [14, 15], logprobs: [-0.5, -1.5], reward: 0 },
    ].map(({ completion, logprobs, reward }) => ({
      messages_and_choices: [
        { role: 'user', content: 'hi' },
        {
          finish_reason: 'stop',
          index: 0,
          message: { role: 'assistant', content: 'x' },
          logprobs: { content: logprobs.map((logprob) => ({ token: 'x', logprob, bytes: null, top_logprobs: [] })) },
          prompt_token_ids: [10, 11],
          token_ids: completion,
        },
      ],
      reward,
    })),
  } as unknown as TrajectoryGroup,
];

/** The reference's logprobs of [10, 11, c1, c2]: by the first completion token. */
const REFERENCE: Record<number, number[]> = { 12: [-9, -1.5, -1.5], 14: [-9, -1, -2] };
/** The training model's logprobs before the step (a forward pass), by the first completion token. */
const LEARNER: Record<number, number[]> = { 12: [-8, -1.25, -1.75], 14: [-8, -0.75, -1.25] };

/** A stub of the Tinker client's training calls, recording them. */
function stubClient() {
  const calls: { operation: string; datums: TinkerDatum[]; lossFn: string }[] = [];
  const client = {
    createModel: async () => 'model_1',
    unloadModel: async () => undefined,
    loadWeights: async () => undefined,
    forwardBackward: async (
      _model: string,
      datums: TinkerDatum[],
      lossFn: string,
      options: { forwardOnly?: boolean } = {},
    ) => {
      calls.push({ operation: options.forwardOnly ? 'forward' : 'forward_backward', datums, lossFn });
      return {
        outputs: datums.map((datum) => ({
          logprobs: options.forwardOnly
            ? (LEARNER[datum.targetTokens[1] as number] as number[])
            : [...(datum.logprobs ?? [])],
          elementwiseLoss: undefined,
        })),
        metrics: {},
      };
    },
    optimStep: async () => ({}),
    saveWeightsForSampler: async (_model: string, name: string) => `tinker://model_1/${name}`,
    saveWeights: async (_model: string, name: string) => `tinker://model_1/weights/${name}`,
  };
  return { client: client as unknown as TinkerClient, calls };
}

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'tinker-kl-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Runs one RL job on the stub client; resolves with its metrics, the calls and the reference requests. */
async function runJob(
  config: ExperimentalTrainingConfig,
  klReference?: { checkpointPath: string | null },
  failReference?: Error,
) {
  const { client, calls } = stubClient();
  const asked: { policy: PolicyRef; tokens: number[] }[] = [];
  const referenceLogprobs: ReferenceLogprobs = async (policy, tokens) => {
    asked.push({ policy, tokens: [...tokens] });
    if (failReference) throw failReference;
    return REFERENCE[tokens[2] as number] as number[];
  };
  const jobs = new TinkerTrainingJobs({
    client,
    server: 'http://tinker.test',
    lora: { rank: 8 },
    records: new CheckpointRecords(),
    referenceLogprobs,
  });
  const job: EngineTrainingJob = {
    kind: 'rl',
    modelId: 'm',
    policy: { baseModel: 'base', checkpointPath: null, key: 'base' },
    outputPath: path.join(root, `out-${Math.random().toString(36).slice(2)}`, 'step-1'),
    step: 1,
    trajectoryGroups: GROUPS,
    config: { scale_rewards: false, ...config },
    ...(klReference === undefined ? {} : { klReference }),
  };
  const text = { stopTokenIds: [] } as unknown as TextLayer;
  const { metrics } = await jobs.run(job, text, { onEvent: () => undefined });
  return { metrics, calls, asked };
}

describe('an RL job with kl_penalty_coef on a Tinker server', () => {
  it('source "sample": the sampler’s logprobs against the base model’s, folded into the advantages sent', async () => {
    const { metrics, calls, asked } = await runJob(
      { kl_penalty_coef: 0.5, kl_penalty_source: 'sample' },
      {
        checkpointPath: null,
      },
    );
    // The reference pass asks the base model's sampler for each whole sequence.
    expect(asked.map((request) => request.tokens)).toEqual([
      [10, 11, 12, 13],
      [10, 11, 14, 15],
    ]);
    expect(
      asked.every((request) => request.policy.checkpointPath === null && request.policy.baseModel === 'base'),
    ).toBe(true);
    // No forward pass: the source is the sampler's recorded logprobs.
    expect(calls.map((call) => call.operation)).toEqual(['forward_backward']);
    // KL = [0.5, −0.5] and [0.5, 0.5], mean 0.25; advantages ±0.5 (scale_rewards false), β 0.5.
    expect(calls[0]?.datums.map((datum) => datum.advantages)).toEqual([
      [0, 0.375, 0.875],
      [0, -0.625, -0.625],
    ]);
    expect(metrics['kl_ref']).toBe(0.25);
  });

  it('source "current_learner" (the default): a forward pass of the training model first, then the folded step', async () => {
    const { metrics, calls } = await runJob({ kl_penalty_coef: 1 });
    expect(calls.map((call) => [call.operation, call.lossFn])).toEqual([
      ['forward', 'cross_entropy'],
      ['forward_backward', 'importance_sampling'],
    ]);
    // The forward pass learns nothing: its weights are the learned mask.
    expect(calls[0]?.datums.map((datum) => datum.weights)).toEqual([
      [0, 1, 1],
      [0, 1, 1],
    ]);
    // KL = learner − reference = [0.25, −0.25] and [0.25, 0.75], mean 0.25, β 1.
    expect(calls[1]?.datums.map((datum) => datum.advantages)).toEqual([
      [0, 0.5, 1],
      [0, -0.5, -1],
    ]);
    expect(metrics['kl_ref']).toBe(0.25);
  });

  it('without kl_penalty_coef: no reference pass, the advantages as they were, no kl_ref', async () => {
    const { metrics, calls, asked } = await runJob({});
    expect(asked).toEqual([]);
    expect(calls[0]?.datums.map((datum) => datum.advantages)).toEqual([
      [0, 0.5, 0.5],
      [0, -0.5, -0.5],
    ]);
    expect(metrics).not.toHaveProperty('kl_ref');
  });

  it('a saved step as the reference samples its checkpoint’s sampler weights', async () => {
    const reference = path.join(root, 'weights', 'm', 'step-3');
    await writeTinkerCheckpoint(reference, {
      server: 'http://tinker.test',
      baseModel: 'base',
      trainingModelId: 'model_0',
      samplerPath: 'tinker://model_0/step3',
      statePath: null,
      step: 3,
      lora: { rank: 8 },
    });
    const { asked } = await runJob({ kl_penalty_coef: 0.1, kl_penalty_step_lag: 2 }, { checkpointPath: reference });
    expect(asked.map((request) => request.policy.checkpointPath)).toEqual([reference, reference]);
  });

  it('a reference folder that is no Tinker checkpoint (a PEFT adapter) fails the step, saying what to name instead', async () => {
    const adapter = path.join(root, 'peft-adapter');
    await mkdir(adapter, { recursive: true });
    await expect(
      runJob({ kl_penalty_coef: 0.1, kl_ref_adapter_path: adapter }, { checkpointPath: adapter }),
    ).rejects.toThrow(
      /The KL reference .*peft-adapter is not a checkpoint of a Tinker-backed model \(it has no tinker\.json\).*Name a step of this model/,
    );
  });

  it('a reference request the server fails fails the step with its error', async () => {
    const failure = new Error('The Tinker server at http://tinker.test could not sample');
    const error = await runJob(
      { kl_penalty_coef: 0.1, kl_penalty_source: 'sample' },
      { checkpointPath: null },
      failure,
    ).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBe(failure);
  });

  it('a reference checkpoint of another base model fails the step, naming both', async () => {
    const other = path.join(root, 'other-base');
    await writeTinkerCheckpoint(other, {
      server: 'http://tinker.test',
      baseModel: 'another',
      trainingModelId: 'model_9',
      samplerPath: 'tinker://model_9/s',
      statePath: null,
      step: 1,
      lora: { rank: 8 },
    });
    await expect(runJob({ kl_penalty_coef: 0.1 }, { checkpointPath: other })).rejects.toThrow(
      /was trained on "another", not on this model's base model "base"/,
    );
  });
});
