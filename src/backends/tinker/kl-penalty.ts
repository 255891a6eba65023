/**
 * The KL penalty to a reference policy on a Tinker server, computed on the client as
 * tinker-cookbook does it (`incorporate_kl_penalty`): the server's losses take no reference, so the
 * penalty is folded into the per-token advantages before forward/backward. The reference's
 * logprobs of the sampled tokens come from a sampler of the reference weights (the base model, or
 * a saved step's sampler weights), asked for the logprob of every prompt token as the SDK's
 * `compute_logprobs` does.
 *
 * The formula is the local engine's (`src/engine/objective.ts`, ART's): per learned token
 * `KL_t = log π_src − log π_ref` and `A_t ← A_t + β·(mean KL − KL_t)`, the mean over the step's
 * learned tokens (ART's is over a packed sequence, tinker-cookbook's over the batch, as here).
 */
import type { ExperimentalTrainingConfig } from '../../schema/index.js';

/** The KL penalty of an RL job on a Tinker server, resolved from its `experimental_config`. */
export interface KlPenaltySettings {
  /** `kl_penalty_coef` β (> 0: the penalty is on). */
  readonly coef: number;
  /**
   * `kl_penalty_source`: the learner's logprobs before the step (`current_learner`, one forward
   * pass of the training model) or the sampler's recorded ones (`sample`, no extra pass).
   */
  readonly source: 'current_learner' | 'sample';
}

/**
 * The job's KL penalty, or undefined when `kl_penalty_coef` is absent or 0 (ART's default source
 * is `current_learner`).
 * @example
 * klPenaltySettings({ kl_penalty_coef: 0.1 }); // { coef: 0.1, source: 'current_learner' }
 * klPenaltySettings({ kl_penalty_coef: 0 }); // undefined
 */
export function klPenaltySettings(config: ExperimentalTrainingConfig | null): KlPenaltySettings | undefined {
  const coef = config?.kl_penalty_coef ?? 0;
  if (!(coef > 0)) return undefined;
  return { coef, source: config?.kl_penalty_source ?? 'current_learner' };
}

/** One datum's per-target inputs of the KL penalty. */
export interface KlPenaltyRow {
  /** Which targets are learned (1) or not (0: prompt, tool output). */
  readonly mask: readonly number[];
  /** The advantage of each target, before the penalty. */
  readonly advantages: readonly number[];
  /** `log π_src` of each target: the learner's, or the sampler's (see {@link KlPenaltySettings.source}). */
  readonly source: readonly number[];
  /** `log π_ref` of each target, from the reference's sampler. */
  readonly reference: readonly number[];
}

/** What {@link foldKlPenalty} gives back. */
export interface FoldedKlPenalty {
  /** Each row's advantages with the penalty folded in (unlearned targets keep theirs). */
  readonly advantages: number[][];
  /** `kl_ref`: the mean of `log π_src − log π_ref` over the learned targets (0 when none). */
  readonly klReference: number;
  /** The learned targets counted. */
  readonly tokens: number;
}

/**
 * Folds the KL penalty into the advantages: with `KL_t = source_t − reference_t` over every
 * learned target of every row, `A_t + coef·(mean KL − KL_t)`. A token the policy made likelier than
 * the reference did gets its advantage lowered, one it made less likely gets it raised, and the
 * batch's mean advantage is unchanged.
 * @example
 * const { advantages, klReference } = foldKlPenalty(
 *   [{ mask: [0, 1, 1], advantages: [0, 1, 1], source: [0, -1, -2], reference: [0, -1.5, -1.5] }],
 *   0.5,
 * );
 * // KL = [0.5, -0.5], mean 0: advantages [0, 0.75, 1.25], klReference 0
 */
export function foldKlPenalty(rows: readonly KlPenaltyRow[], coef: number): FoldedKlPenalty {
  let total = 0;
  let tokens = 0;
  const kl = rows.map((row) =>
    row.mask.map((learned, index) => {
      if (learned !== 1) return 0;
      const value = (row.source[index] as number) - (row.reference[index] as number);
      if (!Number.isFinite(value))
        throw new Error(
          `Expected finite logprobs for the KL penalty, got log π_src ${row.source[index]} and log π_ref ${row.reference[index]} at target ${index}.`,
        );
      total += value;
      tokens += 1;
      return value;
    }),
  );
  const mean = tokens > 0 ? total / tokens : 0;
  const advantages = rows.map((row, rowIndex) =>
    row.advantages.map((advantage, index) =>
      row.mask[index] === 1 ? advantage + coef * (mean - ((kl[rowIndex] as number[])[index] as number)) : advantage,
    ),
  );
  return { advantages, klReference: mean, tokens };
}

/**
 * The reference's logprob of each target of a sequence from a `compute_logprobs`-style answer:
 * the prompt logprobs of the whole sequence, of which the last `tokens.length − 1` are the
 * targets' (SkyRL gives n − 1 values for n tokens, hosted Tinker n with a leading null).
 * @example
 * targetLogprobs([1, 2, 3], [-0.5, -0.25]); // [-0.5, -0.25]
 * targetLogprobs([1, 2, 3], [Number.NaN, -0.5, -0.25]); // [-0.5, -0.25]
 */
export function targetLogprobs(tokens: readonly number[], promptLogprobs: readonly number[] | undefined): number[] {
  const targets = tokens.length - 1;
  if (promptLogprobs === undefined || promptLogprobs.length < targets)
    throw new Error(
      `Expected the reference sampler to give ${targets} prompt logprobs for a sequence of ${tokens.length} tokens, got ${promptLogprobs === undefined ? 'none' : promptLogprobs.length}.`,
    );
  return promptLogprobs.slice(promptLogprobs.length - targets);
}
