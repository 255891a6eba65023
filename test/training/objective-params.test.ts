/**
 * The objective's typed parameters (`ObjectiveParams` on `model.train` and `RLTrainer`'s `train`)
 * reach the service as `experimental_config`'s snake-case keys, checked before anything is sent,
 * and a backend that does not honour one refuses it before sampling.
 */
import { InvalidArgumentError, RLTrainer, TinkerBackend } from 'policyloop';
import { ExperimentalTrainingConfig } from 'policyloop/schema';
import { describe, expect, it } from 'vitest';
import { refuseUnhonouredObjective } from '../../src/training/job-options.js';
import { OBJECTIVE_CONFIG_KEYS, objectiveConfig } from '../../src/training/objective-params.js';
import { scriptedModels, yesNoGroups } from '../support/scripted-models.js';

const registered = scriptedModels('objective');
const groups = yesNoGroups;

describe('ObjectiveParams', () => {
  it('names every algorithmic key of ExperimentalTrainingConfig once; the rest have their own parameter or tune ART’s GPU pipeline', () => {
    const mapped = new Set<string>(Object.values(OBJECTIVE_CONFIG_KEYS));
    expect(mapped.size).toBe(Object.keys(OBJECTIVE_CONFIG_KEYS).length);
    const elsewhere = [
      'learning_rate', // learningRate
      'loss_fn', // lossFn
      'ppo', // lossFn: 'ppo'
      'normalize_advantages', // scaleRewards (an alias)
      'allow_training_without_logprobs', // allowTrainingWithoutLogprobs
      'logprob_calculation_chunk_size',
      'packed_sequence_length',
      'plot_tensors',
      'lora_rank',
      'lora_alpha',
      'lora_target_modules',
    ];
    const unmapped = Object.keys(ExperimentalTrainingConfig.shape).filter((key) => !mapped.has(key));
    expect(unmapped.sort()).toEqual(elsewhere.filter((key) => key in ExperimentalTrainingConfig.shape).sort());
  });

  it('model.train sends them as experimental_config, over the same keys of `config`', async () => {
    const { backend, model } = await registered('typed');
    await model.train(groups, {
      lossFn: 'ppo',
      epsilonHigh: 0.3,
      importanceSamplingLevel: 'sequence',
      klPenaltyCoef: 0.1,
      klPenaltySource: 'sample',
      advantageBalance: 0.5,
      config: { kl_penalty_coef: 9, mask_prob_ratio: true },
    });
    const config = backend.trainedJobs[0]?.config;
    expect(config).toMatchObject({
      loss_fn: 'ppo',
      epsilon_high: 0.3,
      importance_sampling_level: 'sequence',
      kl_penalty_coef: 0.1,
      kl_penalty_source: 'sample',
      advantage_balance: 0.5,
      mask_prob_ratio: true,
    });
    expect(config).not.toHaveProperty('epsilon');
  });

  it('RLTrainer’s train option carries them to every step', async () => {
    const { backend, model } = await registered('trainer');
    const trainer = new RLTrainer({
      model,
      scenarios: ['a'],
      rollout: async () => {
        await model.openai().chat.completions.create({
          model: model.inferenceName(),
          messages: [{ role: 'user', content: 'q' }],
          max_tokens: 2,
        });
      },
      reward: (() => {
        let calls = 0;
        return () => (calls++ % 2 === 0 ? 1 : 0);
      })(),
      groupSize: 2,
      groupsPerStep: 1,
      maxSteps: 1,
      train: { importanceSamplingLevel: 'geometric_average', truncatedImportanceSampling: 2 },
      progress: false,
    });
    await trainer.run();
    expect(backend.trainedJobs).toHaveLength(1);
    for (const job of backend.trainedJobs)
      expect(job.config).toMatchObject({
        importance_sampling_level: 'geometric_average',
        truncated_importance_sampling: 2,
      });
  });

  it('refuses a value out of range before sending, naming the parameter', async () => {
    const { backend, model } = await registered('range');
    await expect(model.train(groups, { advantageBalance: 2 })).rejects.toThrow(
      'Expected `advantageBalance` to be a number >= -1, at most 1, got 2',
    );
    await expect(model.train(groups, { importanceSamplingLevel: 'seq' as 'sequence' })).rejects.toThrow(
      /"token", "sequence", "average", "geometric_average"/,
    );
    expect(backend.trainedJobs).toHaveLength(0);
  });

  it('objectiveConfig leaves out what is unset', () => {
    expect(objectiveConfig({ epsilon: undefined, scaleRewards: false })).toEqual({ scale_rewards: false });
  });

  it('a Tinker backend refuses what it does not honour, naming it', () => {
    const tinker = new TinkerBackend({ baseURL: 'http://127.0.0.1:9' });
    const sequence = { importanceSamplingLevel: 'sequence' as const };
    expect(() => refuseUnhonouredObjective(tinker, sequence, 'params')).toThrow(InvalidArgumentError);
    expect(() => refuseUnhonouredObjective(tinker, sequence, 'params')).toThrow(
      /`params\.importanceSamplingLevel` to be left out: a Tinker server does not honour it/,
    );
    expect(() =>
      refuseUnhonouredObjective(
        tinker,
        { scaleRewards: false, advantageBalance: 0.2, klPenaltyCoef: 0.1, klPenaltyStepLag: 2 },
        'params',
      ),
    ).not.toThrow();
  });
});
