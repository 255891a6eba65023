/** Which checkpoints to keep: the latest and the best by a metric from the history. */
import { PolicyloopError } from '../internal/errors.js';

/** Options of checkpoint retention. */
export interface RetentionOptions {
  /**
   * Keep the checkpoint with the best value of this history metric (a split-prefixed name), or
   * null to keep only the latest.
   * @default 'val/reward'
   */
  keepBestBy?: string | null | undefined;
  /**
   * Whether a higher value is better.
   * @default 'max'
   */
  direction?: 'max' | 'min' | undefined;
  /**
   * Keep the newest checkpoint (training continues from it).
   * @default true
   */
  keepLatest?: boolean | undefined;
  /**
   * Steps kept whatever their metric (e.g. ones rollouts or a validation still sample from).
   * @default []
   */
  keepSteps?: readonly number[] | undefined;
}

/** What retention decides. */
export interface RetentionPlan {
  /** Steps to keep, ascending. */
  readonly keep: number[];
  /** Steps to delete, ascending. */
  readonly remove: number[];
  /** The step with the best metric value among the checkpoints, or null without `keepBestBy`. */
  readonly bestStep: number | null;
}

/**
 * Splits checkpoint `steps` into kept and removed. Ties go to the later step. Throws when
 * `keepBestBy` is given but no checkpoint step has a value for it (a typo must not delete all
 * but the latest).
 * @example
 * planRetention([1, 2, 3], new Map([[1, 0.4], [2, 0.9], [3, 0.7]]), { keepBestBy: 'val/reward' });
 * // { keep: [2, 3], remove: [1], bestStep: 2 }
 */
export function planRetention(
  steps: readonly number[],
  values: ReadonlyMap<number, number>,
  options: RetentionOptions = {},
): RetentionPlan {
  const keepBestBy = options.keepBestBy === undefined ? 'val/reward' : options.keepBestBy;
  const better = options.direction === 'min' ? (a: number, b: number) => a <= b : (a: number, b: number) => a >= b;
  const sorted = [...new Set(steps)].sort((a, b) => a - b);
  const keep = new Set<number>();
  if (options.keepLatest ?? true) {
    const latest = sorted.at(-1);
    if (latest !== undefined) keep.add(latest);
  }
  for (const step of options.keepSteps ?? []) if (sorted.includes(step)) keep.add(step);
  let bestStep: number | null = null;
  if (keepBestBy !== null && sorted.length > 0) {
    let bestValue = 0;
    for (const step of sorted) {
      const value = values.get(step);
      if (value === undefined) continue;
      if (bestStep === null || better(value, bestValue)) {
        bestStep = step;
        bestValue = value;
      }
    }
    if (bestStep === null) {
      throw new PolicyloopError(
        `Expected the history to record \`${keepBestBy}\` at one of the checkpoint steps ${sorted.join(', ')}, ` +
          'found none; nothing was deleted. Log that metric for each step (model.log({ groups, split })) or pick another.',
      );
    }
    keep.add(bestStep);
  }
  return { keep: sorted.filter((step) => keep.has(step)), remove: sorted.filter((step) => !keep.has(step)), bestStep };
}
