/**
 * The local engine's RL objective: OpenPipe ART's `art/loss.py` (openpipe-art 0.5.23), the loss
 * the hosted service's own client trains with, on the learned tokens of one forward pass. Every
 * algorithmic key of `ExperimentalTrainingConfig` that acts inside the loss is read here
 * ({@link objectiveSettings}); the ones that act on advantages or the learning rate are in
 * `training-data.ts` and `trainer.ts`. `test/engine/art-loss-parity.test.ts` checks the per-token
 * loss and its gradient against ART's own code (fixtures from `scripts/reference/art_loss.py`).
 */
import type { Tensor } from '@tensorflow/tfjs-core';
import type { ExperimentalTrainingConfig } from '../schema/index.js';
import type { TensorFlow } from './tensorflow.js';

/** How the importance ratio is taken: per token, per sequence (GSPO), or their mean. */
export type ImportanceSamplingLevel = 'token' | 'sequence' | 'average' | 'geometric_average';

/**
 * The RL objective's settings, resolved from `experimental_config` with ART's defaults.
 * @example
 * const settings = objectiveSettings({ importance_sampling_level: 'sequence', kl_penalty_coef: 0.1 });
 * settings.level; // 'sequence'
 */
export interface ObjectiveSettings {
  /** `ppo` (clipped surrogate) or `cispo` (clipped, detached importance weight times log π). */
  readonly lossFunction: 'cispo' | 'ppo';
  /** `1 - epsilon`. */
  readonly low: number;
  /** `1 + epsilon_high`. */
  readonly high: number;
  readonly level: ImportanceSamplingLevel;
  /** `max_negative_advantage_importance_sampling_weight`: an upper bound of the ratio (null: none). */
  readonly ratioCap: number | null;
  /** `mask_prob_ratio`: a ratio outside `(low, high)` becomes 0. */
  readonly maskProbRatio: boolean;
  /** `kimi_k2_tau`: advantage − τ · (log π − log π_old) (null: off). */
  readonly kimiK2Tau: number | null;
  /** `kl_penalty_coef` (0: off). */
  readonly klPenaltyCoef: number;
  /** Whose logprobs the KL to the reference is taken of. */
  readonly klPenaltySource: 'current_learner' | 'sample';
  /** `truncated_importance_sampling`: cap of the sampler-to-trainer weight (null: off). */
  readonly truncatedImportanceSampling: number | null;
  /**
   * Whether the old logprobs are the current policy's, taken before the step (`precalculate_logprobs`,
   * or implied by `truncated_importance_sampling`), the sampler's then being the "original" ones.
   */
  readonly precalculateLogprobs: boolean;
}

/**
 * The objective of an RL job's `experimental_config`, with `art/loss.py`'s defaults: CISPO with
 * `epsilon` 1 and `epsilon_high` 4; PPO (`loss_fn: "ppo"` or `ppo: true`) with `epsilon` 0.2 and
 * `epsilon_high` = `epsilon`; token-level ratios; no KL penalty. A zero
 * `max_negative_advantage_importance_sampling_weight`, `kimi_k2_tau` or
 * `truncated_importance_sampling` is off, as in ART (which tests them for truth).
 * @example
 * objectiveSettings({ loss_fn: 'ppo', epsilon: 0.1 }).high; // 1.1
 */
export function objectiveSettings(config: ExperimentalTrainingConfig | null): ObjectiveSettings {
  const lossFunction = config?.loss_fn ?? (config?.ppo ? 'ppo' : 'cispo');
  // The service refuses other losses at the job's creation (they are a Tinker server's).
  if (lossFunction !== 'ppo' && lossFunction !== 'cispo')
    throw new Error(`The local engine trains with loss_fn "cispo" or "ppo", not "${lossFunction}".`);
  const epsilon = config?.epsilon ?? (lossFunction === 'ppo' ? 0.2 : 1);
  const epsilonHigh = config?.epsilon_high ?? (lossFunction === 'ppo' ? epsilon : 4);
  const truthy = (value: number | null | undefined): number | null => (value ? value : null);
  const truncated = truthy(config?.truncated_importance_sampling);
  return {
    lossFunction,
    low: 1 - epsilon,
    high: 1 + epsilonHigh,
    level: config?.importance_sampling_level ?? 'token',
    ratioCap: truthy(config?.max_negative_advantage_importance_sampling_weight),
    maskProbRatio: config?.mask_prob_ratio ?? false,
    kimiK2Tau: truthy(config?.kimi_k2_tau),
    klPenaltyCoef: config?.kl_penalty_coef ?? 0,
    klPenaltySource: config?.kl_penalty_source ?? 'current_learner',
    truncatedImportanceSampling: truncated,
    precalculateLogprobs: (config?.precalculate_logprobs ?? false) || truncated !== null,
  };
}

/**
 * Why an RL job's objective keys cannot be trained with, or null: `advantage_balance` outside
 * [-1, 1], a negative `kl_penalty_coef`, `epsilon`, `epsilon_high` or
 * `num_trajectories_learning_rate_multiplier_power`... (ART does not check; its result would be
 * meaningless).
 * @example
 * objectiveConfigProblem({ advantage_balance: 2 }); // 'experimental_config.advantage_balance must be in [-1, 1], got 2.'
 */
export function objectiveConfigProblem(config: ExperimentalTrainingConfig | null): string | null {
  const balance = config?.advantage_balance;
  if (typeof balance === 'number' && !(balance >= -1 && balance <= 1))
    return `experimental_config.advantage_balance must be in [-1, 1], got ${balance}.`;
  for (const key of [
    'epsilon',
    'epsilon_high',
    'kl_penalty_coef',
    'kimi_k2_tau',
    'max_negative_advantage_importance_sampling_weight',
    'truncated_importance_sampling',
  ] as const) {
    const value = config?.[key];
    if (typeof value === 'number' && !(value >= 0))
      return `experimental_config.${key} must be 0 or more, got ${value}.`;
  }
  return null;
}

/** The learned tokens of a pass, beside their current logprobs. */
export interface ObjectiveInputs {
  /** The sampler's logprob of each token (NaN or ±Infinity: unknown, the current policy's is used). */
  readonly sampled: Float32Array;
  readonly advantages: Float32Array;
  /** Which sequence each token belongs to, `0 .. sequenceCount - 1` (sequence-level ratios). */
  readonly sequenceIds: Int32Array;
  readonly sequenceCount: number;
  /** The reference policy's logprob of each token (the KL penalty); absent: no penalty. */
  readonly reference?: Float32Array | undefined;
}

/** Sums over the tokens (and sequences) of a pass, for the step's metrics. */
export interface ObjectiveSums {
  /** Importance ratios (at `importance_sampling_level`, before the cap and the mask). */
  ratio: number;
  /** Tokens whose ratio lies outside `[low, high]`. */
  clipped: number;
  /** Sampled minus current logprob (the sampler's KL estimate). */
  kl: number;
  /** KL source minus reference logprob (`kl_ref`). */
  klReference: number;
  /** Tokens whose ratio `mask_prob_ratio` set to 0. */
  masked: number;
  /** Tokens whose ratio `max_negative_advantage_importance_sampling_weight` capped. */
  capped: number;
  /** Tokens whose truncated importance weight hit `truncated_importance_sampling`. */
  truncated: number;
  /** Truncated importance weights. */
  truncatedWeight: number;
  /** Advantages after `kimi_k2_tau` and the KL penalty. */
  advantage: number;
  /** Sequence-level ratios, one per sequence (levels other than `token`). */
  sequenceRatio: number;
  /** Sequences counted in `sequenceRatio`. */
  sequences: number;
}

/**
 * A zeroed {@link ObjectiveSums}.
 * @example
 * const sums = emptyObjectiveSums(); // add each pass's with addObjectiveSums
 */
export function emptyObjectiveSums(): ObjectiveSums {
  return {
    ratio: 0,
    clipped: 0,
    kl: 0,
    klReference: 0,
    masked: 0,
    capped: 0,
    truncated: 0,
    truncatedWeight: 0,
    advantage: 0,
    sequenceRatio: 0,
    sequences: 0,
  };
}

/**
 * Adds `part` into `total`.
 * @example
 * addObjectiveSums(stepSums, passSums);
 */
export function addObjectiveSums(total: ObjectiveSums, part: ObjectiveSums): void {
  for (const key of Object.keys(total) as (keyof ObjectiveSums)[]) total[key] += part[key];
}

/**
 * The per-token RL loss of the learned tokens whose current logprobs are `logprobs` (a 1-D tensor
 * inside the gradient tape), computed as `art/loss.py`'s `loss_fn` does with `weights` 1:
 *
 * 1. old logprobs: the sampler's (unknown ones: the current policy's), or with
 *    {@link ObjectiveSettings.precalculateLogprobs} the current policy's, the sampler's becoming
 *    the original ones;
 * 2. ratio `r = exp(clamp(log π − log π_old, ±20))` per token; per sequence (GSPO)
 *    `s = exp(clamp(mean over the sequence of (log π − log π_old), ±20))`; `average` (r + s)/2;
 *    `geometric_average` √r·√s;
 * 3. the ratio capped at `max_negative_advantage_importance_sampling_weight`, then set to 0 outside
 *    `(1 − ε, 1 + ε_high)` with `mask_prob_ratio`;
 * 4. advantage `A − τ·sg(log π − log π_old)` (`kimi_k2_tau`), plus with `kl_penalty_coef` β
 *    `β·(mean KL − KL_t)`, where `KL_t = sg(log π_source − log π_ref)` and the mean is over the
 *    pass's tokens;
 * 5. PPO `−min(r·A, clip(r, 1 − ε, 1 + ε_high)·A)`, CISPO `−sg(clip(r, 1 − ε, 1 + ε_high))·A·log π`;
 * 6. times `min(exp(log π_old − log π_original), truncated_importance_sampling)` (detached).
 *
 * Returns the per-token losses (the caller sums and divides by the step's trained tokens) and the
 * pass's sums for the metrics. ART's sequence mean is over a sequence's assistant tokens (its
 * `group_ids`); here a sequence is one row of the pass.
 * @example
 * const { losses, sums } = objectiveTokenLosses(tf, objectiveSettings(null), logprobs, inputs);
 * const loss = tf.div(tf.sum(losses), trainedTokens);
 */
export function objectiveTokenLosses(
  tf: TensorFlow,
  settings: ObjectiveSettings,
  logprobs: Tensor,
  inputs: ObjectiveInputs,
): { losses: Tensor; sums: ObjectiveSums } {
  const sums = emptyObjectiveSums();
  const current = logprobs.dataSync() as Float32Array;
  const count = current.length;
  const sampled = new Float32Array(count);
  const old = new Float32Array(count);
  const original = new Float32Array(count);
  for (let index = 0; index < count; index += 1) {
    const given = inputs.sampled[index] as number;
    // ART: "Assume missing or non-finite old logprobs were sampled under the current policy".
    sampled[index] = Number.isFinite(given) ? given : (current[index] as number);
    if (settings.precalculateLogprobs) {
      original[index] = Number.isNaN(given) ? (current[index] as number) : given;
      old[index] = current[index] as number;
    } else {
      old[index] = sampled[index] as number;
    }
    sums.kl += (sampled[index] as number) - (current[index] as number);
  }
  const diff = tf.sub(logprobs, tf.tensor1d(old));
  const diffValues = diff.dataSync() as Float32Array;
  const bound = 20;
  const tokenRatio = tf.exp(tf.clipByValue(diff, -bound, bound));
  let ratio = tokenRatio;
  if (settings.level !== 'token') {
    const lengths = new Float32Array(inputs.sequenceCount);
    for (const id of inputs.sequenceIds) lengths[id] = (lengths[id] as number) + 1;
    // Which sequence each token is in, as a [sequences, tokens] 0/1 matrix: the sums per sequence
    // and their spreading back over the tokens are two products (the wasm backend has no
    // segment sum).
    const membership = new Float32Array(inputs.sequenceCount * count);
    inputs.sequenceIds.forEach((id, index) => {
      membership[id * count + index] = 1;
    });
    const members = tf.tensor2d(membership, [inputs.sequenceCount, count]);
    // ART's group_aggregate mean: sum / (count + 1e-8).
    const means = tf.div(
      tf.reshape(tf.matMul(members, tf.reshape(diff, [count, 1])), [inputs.sequenceCount]),
      tf.add(tf.tensor1d(lengths), 1e-8),
    );
    const sequenceRatios = tf.exp(tf.clipByValue(means, -bound, bound));
    const perSequence = sequenceRatios.dataSync();
    for (let id = 0; id < inputs.sequenceCount; id += 1) {
      if ((lengths[id] as number) === 0) continue;
      sums.sequenceRatio += perSequence[id] as number;
      sums.sequences += 1;
    }
    const sequenceRatio = tf.reshape(
      tf.matMul(members, tf.reshape(sequenceRatios, [inputs.sequenceCount, 1]), true, false),
      [count],
    );
    if (settings.level === 'sequence') ratio = sequenceRatio;
    else if (settings.level === 'average') ratio = tf.div(tf.add(tokenRatio, sequenceRatio), 2);
    else ratio = tf.mul(tf.sqrt(tokenRatio), tf.sqrt(sequenceRatio));
  }
  const rawValues = ratio.dataSync() as Float32Array;
  const low = Math.fround(settings.low);
  const high = Math.fround(settings.high);
  for (const value of rawValues) {
    sums.ratio += value;
    if (value < low || value > high) sums.clipped += 1;
  }
  if (settings.ratioCap !== null) {
    const cap = Math.fround(settings.ratioCap);
    for (const value of rawValues) if (value > cap) sums.capped += 1;
    ratio = tf.minimum(ratio, settings.ratioCap);
  }
  if (settings.maskProbRatio) {
    const values = ratio.dataSync();
    const keep = new Float32Array(count);
    for (let index = 0; index < count; index += 1) {
      const value = values[index] as number;
      if (value > low && value < high) keep[index] = 1;
      else sums.masked += 1;
    }
    ratio = tf.mul(ratio, tf.tensor1d(keep));
  }
  const advantages = new Float32Array(inputs.advantages);
  if (settings.kimiK2Tau !== null) {
    for (let index = 0; index < count; index += 1)
      advantages[index] = (advantages[index] as number) - settings.kimiK2Tau * (diffValues[index] as number);
  }
  if (settings.klPenaltyCoef > 0 && inputs.reference !== undefined) {
    const source = settings.klPenaltySource === 'sample' ? old : current;
    const perToken = new Float32Array(count);
    let total = 0;
    for (let index = 0; index < count; index += 1) {
      perToken[index] = (source[index] as number) - (inputs.reference[index] as number);
      total += perToken[index] as number;
    }
    sums.klReference = total;
    const mean = Math.fround(total / count);
    for (let index = 0; index < count; index += 1)
      advantages[index] = (advantages[index] as number) + settings.klPenaltyCoef * (mean - (perToken[index] as number));
  }
  for (const value of advantages) sums.advantage += value;
  const advantageTensor = tf.tensor1d(advantages);
  let losses: Tensor;
  if (settings.lossFunction === 'ppo') {
    const unclipped = tf.mul(ratio, advantageTensor);
    const clipped = tf.mul(tf.clipByValue(ratio, settings.low, settings.high), advantageTensor);
    losses = tf.neg(tf.minimum(unclipped, clipped));
  } else {
    // CISPO: the clipped importance weight is a constant (no gradient through it).
    const values = ratio.dataSync();
    const weights = Float32Array.from(values, (value) => Math.min(Math.max(value, low), high));
    losses = tf.neg(tf.mul(tf.mul(tf.tensor1d(weights), advantageTensor), logprobs));
  }
  if (settings.truncatedImportanceSampling !== null) {
    const cap = settings.truncatedImportanceSampling;
    const weights = new Float32Array(count);
    for (let index = 0; index < count; index += 1) {
      const weight = Math.exp(Math.fround((old[index] as number) - (original[index] as number)));
      if (weight > cap) sums.truncated += 1;
      weights[index] = Math.min(weight, cap);
      sums.truncatedWeight += weights[index] as number;
    }
    losses = tf.mul(losses, tf.tensor1d(weights));
  }
  return { losses, sums };
}
