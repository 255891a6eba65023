/** Built-in reward: a penalty for answers longer than a target. */
import { z } from 'zod';
import { PolicyloopError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import type { RunReadOptions } from '../schema/index.js';
import type { RewardFn } from './reward-function.js';
import { assistantTexts, completionTokenCount, finalAssistantText } from './trajectory-text.js';

/** Options of {@link lengthPenalty}. */
export interface LengthPenaltyOptions extends RunReadOptions {
  /** The length allowed without penalty (> 0). */
  target: number;
  /**
   * What is counted: characters of text, or generated tokens (from the Choices' logprobs; a
   * trajectory without logprobs makes the reward fail).
   * @default 'characters'
   */
  unit?: 'characters' | 'tokens' | undefined;
  /**
   * Which text is measured in `characters` mode: the final answer or every assistant turn.
   * `tokens` always counts every Choice.
   * @default 'final'
   */
  scope?: 'final' | 'all' | undefined;
}

/** The check of {@link LengthPenaltyOptions}, with the defaults. */
const LengthPenaltyOptionsSchema = optionsSchema<LengthPenaltyOptions>()({
  target: option.number({ min: 0, exclusiveMin: true }),
  unit: option.oneOf(['characters', 'tokens']).default('characters'),
  scope: option.oneOf(['final', 'all']).default('final'),
  mainOnly: z.boolean().optional(),
});

/**
 * 0 up to `target`, then falling linearly to -1 at twice the target (and staying there):
 * `-min(1, (length - target) / target)`. Give it a small weight in `combineRewards`.
 * @example
 * combineRewards({ correct: exactMatch('4'), brevity: { fn: lengthPenalty({ target: 100 }), weight: 0.2 } })
 */
export function lengthPenalty<S = unknown>(options: LengthPenaltyOptions): RewardFn<S> {
  const checked = parseOptions(LengthPenaltyOptionsSchema, options);
  const { target, unit, scope } = checked;
  const reward: RewardFn<S> = (trajectory) => {
    let length: number;
    if (unit === 'tokens') {
      const count = completionTokenCount(trajectory, checked);
      if (count === undefined) {
        throw new PolicyloopError(
          'lengthPenalty counts tokens from logprobs, but a Choice has none; request `logprobs: true` or use unit "characters"',
        );
      }
      length = count;
    } else {
      length =
        scope === 'all'
          ? assistantTexts(trajectory, checked).join('').length
          : finalAssistantText(trajectory, checked).length;
    }
    // Written so that a short answer scores exactly 0, not -0.
    return length <= target ? 0 : -Math.min(1, (length - target) / target);
  };
  Object.defineProperty(reward, 'name', { value: 'lengthPenalty' });
  return reward;
}
