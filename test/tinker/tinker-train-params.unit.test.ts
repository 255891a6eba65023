/**
 * What a Tinker server cannot honour in a step's training parameters is refused before anything
 * is sampled or sent (`TinkerBackend.trainParamsProblem`, called by `train` and `RLTrainer.run`
 * through `refuseUnhonouredObjective`), naming the parameter and the backend: a clip with a loss
 * that has none, an objective key it does not honour given raw in `config`, and a KL reference
 * folder a Tinker sampler cannot load. No request reaches the server: the backend is never
 * connected.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { InvalidArgumentError, TinkerBackend } from 'policyloop';
import type { TrainParams } from 'policyloop/training';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { writeTinkerCheckpoint } from '../../src/backends/tinker/checkpoint-record.js';
import { refuseUnhonouredObjective } from '../../src/training/job-options.js';

const fetch = vi.fn(async () => new Response('{}')) as unknown as typeof globalThis.fetch;
const backend = new TinkerBackend({ baseURL: 'http://127.0.0.1:9', fetch });
let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'tinker-params-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  expect(fetch).not.toHaveBeenCalled();
});

/** The refusal of `params` as `model.train` makes it, or undefined. */
function refusal(params: TrainParams, argument = 'params'): InvalidArgumentError | undefined {
  try {
    refuseUnhonouredObjective(backend, params, argument);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    return error as InvalidArgumentError;
  }
}

describe('TinkerBackend refuses before sampling what its server cannot honour', () => {
  it('epsilon with importance_sampling, the default loss, which has no clip', () => {
    const error = refusal({ epsilon: 0.2 });
    expect(error?.argument).toBe('params.epsilon');
    expect(error?.message).toBe(
      "Expected `params.epsilon` to be left out with the importance_sampling loss (the tinker backend's default): it is a clip of the ppo and cispo losses, and a Tinker server's importance_sampling loss has none. Train with `lossFn: 'ppo'` or `'cispo'`, or leave it out.",
    );
  });

  it('epsilonHigh with dro, and either bound given raw in config, named where it was given', () => {
    expect(refusal({ lossFn: 'dro', epsilonHigh: 0.28 }, 'train')?.message).toMatch(
      /^Expected `train\.epsilonHigh` to be left out with the dro loss: .* a Tinker server's dro loss has none/,
    );
    expect(refusal({ config: { epsilon_high: 0.28 } })?.argument).toBe('params.config.epsilon_high');
    expect(refusal({ lossFn: 'importance_sampling', config: { epsilon: 0.1 } })?.argument).toBe(
      'params.config.epsilon',
    );
  });

  it('accepts the clips with ppo and cispo, whether named by lossFn, config.loss_fn or ART’s config.ppo', () => {
    expect(refusal({ lossFn: 'ppo', epsilon: 0.2, epsilonHigh: 0.28 })).toBeUndefined();
    expect(refusal({ lossFn: 'cispo', epsilonHigh: 4 })).toBeUndefined();
    expect(refusal({ config: { loss_fn: 'cispo', epsilon: 1 } })).toBeUndefined();
    expect(refusal({ config: { ppo: true }, epsilon: 0.2 })).toBeUndefined();
  });

  it('an objective key it does not honour, given raw in config, is refused by its config path', () => {
    const error = refusal({ config: { importance_sampling_level: 'sequence' } }, 'train');
    expect(error?.argument).toBe('train.config.importance_sampling_level');
    expect(error?.message).toMatch(
      /^Expected `train\.config\.importance_sampling_level` to be left out: a Tinker server does not honour it \(the tinker backend honours `scaleRewards`, .*`klPenaltyCoef`.*\)/,
    );
    expect(refusal({ config: { truncated_importance_sampling: 2 } })?.argument).toBe(
      'params.config.truncated_importance_sampling',
    );
    // A typed parameter it does not honour is refused by its own name first.
    expect(refusal({ maskProbRatio: true })?.argument).toBe('params.maskProbRatio');
    // Unset (null) keys and the keys it honours pass.
    expect(refusal({ config: { importance_sampling_level: null, scale_rewards: false, kl_penalty_coef: 0.1 } })).toBe(
      undefined,
    );
  });

  it('the KL penalty is honoured: its coefficient, source and reference step or lag', () => {
    expect(
      refusal({ klPenaltyCoef: 0.1, klPenaltySource: 'sample', klPenaltyReferenceStep: 0, scaleRewards: false }),
    ).toBeUndefined();
    expect(refusal({ klPenaltyCoef: 0.1, klPenaltyStepLag: 5 })).toBeUndefined();
  });

  it('klRefAdapterPath must be a checkpoint folder of a Tinker-backed model, not a PEFT adapter', async () => {
    const adapter = path.join(root, 'peft');
    await mkdir(adapter, { recursive: true });
    const error = refusal({ klPenaltyCoef: 0.1, klRefAdapterPath: adapter });
    expect(error?.argument).toBe('params.klRefAdapterPath');
    expect(error?.message).toContain(
      `Expected \`params.klRefAdapterPath\` to be a checkpoint folder of a Tinker-backed model (one with tinker.json), got ${JSON.stringify(adapter)}`,
    );
    expect(error?.message).toContain('cannot load a PEFT adapter folder as the KL reference');
    expect(refusal({ config: { kl_penalty_coef: 0.1, kl_ref_adapter_path: adapter } })?.argument).toBe(
      'params.config.kl_ref_adapter_path',
    );
    const checkpoint = path.join(root, 'step-2');
    await writeTinkerCheckpoint(checkpoint, {
      server: 'http://127.0.0.1:9',
      baseModel: 'base',
      trainingModelId: 'model_1',
      samplerPath: 'tinker://model_1/step2',
      statePath: null,
      step: 2,
      lora: { rank: 8 },
    });
    expect(refusal({ klPenaltyCoef: 0.1, klRefAdapterPath: checkpoint })).toBeUndefined();
  });
});
