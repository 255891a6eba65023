/**
 * The RL objective's knobs as typed, camelCase training parameters (`TrainParams`, `RLTrainer`'s
 * `train`), each declared once here with its schema and its `experimental_config` key, so a script
 * never writes the snake-case object. docs/training.md ("The objective") gives each one's formula.
 */
import { option } from '../internal/option-schema.js';
import type { ExperimentalTrainingConfig } from '../schema/index.js';

/**
 * The RL objective's parameters: ART's `art/loss.py` semantics, honoured by the local engine and
 * sent to the hosted service as `experimental_config`.
 * @example
 * await model.train(groups, { importanceSamplingLevel: 'sequence', klPenaltyCoef: 0.05 });
 */
export interface ObjectiveParams {
  /**
   * Lower clip: the importance ratio is clipped below at `1 - epsilon` (`experimental_config.epsilon`).
   * @default 1 for CISPO (no lower clip), 0.2 for PPO
   */
  epsilon?: number | undefined;
  /**
   * Upper clip: the ratio is clipped above at `1 + epsilonHigh`.
   * @default 4 for CISPO, `epsilon` for PPO
   */
  epsilonHigh?: number | undefined;
  /**
   * Where the importance ratio is taken: per `token`; per `sequence` (GSPO: the exponent of the
   * mean log-ratio over the sequence, for long sequences and MoE models); or the `average` /
   * `geometric_average` of the two.
   * @default 'token'
   */
  importanceSamplingLevel?: 'token' | 'sequence' | 'average' | 'geometric_average' | undefined;
  /**
   * Weight of the KL penalty to a reference policy, folded into the advantages:
   * `A + β·(mean KL − KL_token)` with `KL_token = log π − log π_ref`. Use it against drift. On a
   * `TinkerBackend` it is computed on the client from the reference sampler's logprobs.
   * @default 0 (off)
   */
  klPenaltyCoef?: number | undefined;
  /**
   * Whose logprobs the KL is taken of: the learner's now (`current_learner`) or the sampler's (`sample`).
   * @default 'current_learner'
   */
  klPenaltySource?: 'current_learner' | 'sample' | undefined;
  /**
   * The KL reference: this model's checkpoint at that step (0: the base model).
   * @default the base model (unless `klPenaltyStepLag` or `klRefAdapterPath`)
   */
  klPenaltyReferenceStep?: number | undefined;
  /**
   * The KL reference trails the policy by this many steps (`max(0, step − lag)`): a moving anchor.
   * @default none (the base model)
   */
  klPenaltyStepLag?: number | undefined;
  /**
   * The KL reference is this adapter or checkpoint folder, on the service's machine. On a
   * `TinkerBackend` it must be a checkpoint folder of a Tinker-backed model (its sampler weights
   * are the reference); a PEFT adapter folder is refused before sampling.
   * @default none (the base model)
   */
  klRefAdapterPath?: string | undefined;
  /**
   * Truncated importance sampling: each token's loss times `min(π_old / π_sampler, cap)`, the old
   * logprobs taken by the trainer before the step (it implies `precalculateLogprobs`).
   * @default none (off)
   */
  truncatedImportanceSampling?: number | undefined;
  /**
   * Caps the importance ratio at this value (every token's, as ART does, despite the name).
   * @default none (off)
   */
  maxNegativeAdvantageImportanceSamplingWeight?: number | undefined;
  /**
   * Sets a ratio outside `(1 − epsilon, 1 + epsilonHigh)` to 0: those tokens stop training.
   * @default false
   */
  maskProbRatio?: boolean | undefined;
  /**
   * Weighs negative against positive advantages, in [-1, 1]: 1 trains only on positive advantages,
   * -1 only on negative ones (the other sign is scaled by `1 − |b|`).
   * @default 0 (balanced)
   */
  advantageBalance?: number | undefined;
  /**
   * Kimi K2's τ: the advantage minus `τ·(log π − log π_old)`.
   * @default none (off)
   */
  kimiK2Tau?: number | undefined;
  /**
   * Divide each group's advantages by its reward std (GRPO); false only centres them (Dr. GRPO).
   * @default true
   */
  scaleRewards?: boolean | undefined;
  /**
   * Multiply the learning rate by the step's reward std (mean over groups).
   * @default false
   */
  scaleLearningRateByRewardStdDev?: boolean | undefined;
  /**
   * Multiply the learning rate by the number of trained trajectories to this power.
   * @default 0 (no scaling)
   */
  numTrajectoriesLearningRateMultiplierPower?: number | undefined;
  /**
   * Take the old logprobs from the trainer's policy before the step rather than from the sampler
   * (the ratio is then 1 on the local engine, which takes one step per job).
   * @default false
   */
  precalculateLogprobs?: boolean | undefined;
}

/** Each parameter's `experimental_config` key: the one place the two spellings meet. */
export const OBJECTIVE_CONFIG_KEYS = {
  epsilon: 'epsilon',
  epsilonHigh: 'epsilon_high',
  importanceSamplingLevel: 'importance_sampling_level',
  klPenaltyCoef: 'kl_penalty_coef',
  klPenaltySource: 'kl_penalty_source',
  klPenaltyReferenceStep: 'kl_penalty_reference_step',
  klPenaltyStepLag: 'kl_penalty_step_lag',
  klRefAdapterPath: 'kl_ref_adapter_path',
  truncatedImportanceSampling: 'truncated_importance_sampling',
  maxNegativeAdvantageImportanceSamplingWeight: 'max_negative_advantage_importance_sampling_weight',
  maskProbRatio: 'mask_prob_ratio',
  advantageBalance: 'advantage_balance',
  kimiK2Tau: 'kimi_k2_tau',
  scaleRewards: 'scale_rewards',
  scaleLearningRateByRewardStdDev: 'scale_learning_rate_by_reward_std_dev',
  numTrajectoriesLearningRateMultiplierPower: 'num_trajectories_learning_rate_multiplier_power',
  precalculateLogprobs: 'precalculate_logprobs',
} as const satisfies { readonly [Key in keyof Required<ObjectiveParams>]: keyof ExperimentalTrainingConfig };

const nonNegative = () => option.number({ min: 0 });

/** The parameters' schemas (spread into `train`'s and `RLTrainer`'s `train` shapes). */
export const ObjectiveParamsShape = {
  epsilon: nonNegative().optional(),
  epsilonHigh: nonNegative().optional(),
  importanceSamplingLevel: option.oneOf(['token', 'sequence', 'average', 'geometric_average']).optional(),
  klPenaltyCoef: nonNegative().optional(),
  klPenaltySource: option.oneOf(['current_learner', 'sample']).optional(),
  klPenaltyReferenceStep: option.integer({ min: 0 }).optional(),
  klPenaltyStepLag: option.integer({ min: 0 }).optional(),
  klRefAdapterPath: option.nonEmptyString().optional(),
  truncatedImportanceSampling: option.number({ min: 0, exclusiveMin: true }).optional(),
  maxNegativeAdvantageImportanceSamplingWeight: option.number({ min: 0, exclusiveMin: true }).optional(),
  maskProbRatio: option.boolean().optional(),
  advantageBalance: option.number({ min: -1, max: 1 }).optional(),
  kimiK2Tau: nonNegative().optional(),
  scaleRewards: option.boolean().optional(),
  scaleLearningRateByRewardStdDev: option.boolean().optional(),
  numTrajectoriesLearningRateMultiplierPower: option.number().optional(),
  precalculateLogprobs: option.boolean().optional(),
};

/**
 * The `experimental_config` keys of the objective parameters that are set (undefined ones are left
 * out, so the service's defaults apply).
 * @example
 * objectiveConfig({ importanceSamplingLevel: 'sequence', klPenaltyCoef: 0.1 });
 * // { importance_sampling_level: 'sequence', kl_penalty_coef: 0.1 }
 */
export function objectiveConfig(params: ObjectiveParams): Partial<ExperimentalTrainingConfig> {
  const config: Record<string, unknown> = {};
  for (const [name, key] of Object.entries(OBJECTIVE_CONFIG_KEYS)) {
    const value = params[name as keyof ObjectiveParams];
    if (value !== undefined) config[key] = value;
  }
  return config as Partial<ExperimentalTrainingConfig>;
}

/**
 * The objective parameters that are set, by name (for refusals naming what a backend cannot honour).
 * @example
 * setObjectiveParams({ klPenaltyCoef: 0.1, epsilon: undefined }); // ['klPenaltyCoef']
 */
export function setObjectiveParams(params: ObjectiveParams): (keyof ObjectiveParams)[] {
  return (Object.keys(OBJECTIVE_CONFIG_KEYS) as (keyof ObjectiveParams)[]).filter((name) => params[name] !== undefined);
}
