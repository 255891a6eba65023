/** Errors of reward functions and of the relative judge. */
import { PolicyloopError } from '../internal/errors.js';

/**
 * A reward function threw or returned something that is not a finite number. The rollout it was
 * scoring counts as failed (against the gather's exception budget). `rewardName` names the
 * function; `cause` is what it threw.
 */
export class RewardFunctionError extends PolicyloopError {
  /** The name of the reward function (its key in `combineRewards`, or the function's own name). */
  readonly rewardName: string;
  /** What the function returned, when it returned instead of throwing. */
  readonly value: unknown;

  constructor(rewardName: string, message: string, options: { cause?: unknown; value?: unknown } = {}) {
    super(`Reward function \`${rewardName}\` ${message}`, 'cause' in options ? { cause: options.cause } : {});
    this.rewardName = rewardName;
    this.value = options.value;
  }
}

/** Why a judge failed: the request failed or outlived its `timeout`, or its answer could not be used. */
export type JudgeFailure = 'request' | 'timeout' | 'parse' | 'count' | 'range';

/**
 * The relative judge could not score a group: its request failed (`reason: 'request'`, the HTTP
 * error is the `cause`) or outlived the judge's `timeout` (`'timeout'`, retryable), its answer was not the JSON asked for (`'parse'`), had the wrong number of
 * scores (`'count'`), or scores outside 0..1 (`'range'`). `raw` keeps the judge's answer text.
 */
export class JudgeError extends PolicyloopError {
  /** What went wrong. */
  readonly reason: JudgeFailure;
  /** The judge's raw answer, when one came. */
  readonly raw: string | undefined;
  /** How many trajectories the judge was asked to score. */
  readonly expectedScores: number;

  constructor(
    message: string,
    options: {
      reason: JudgeFailure;
      raw?: string | undefined;
      expectedScores: number;
      cause?: unknown;
      retryable?: boolean | undefined;
    },
  ) {
    super(message, { cause: options.cause, retryable: options.retryable ?? false });
    this.reason = options.reason;
    this.raw = options.raw;
    this.expectedScores = options.expectedScores;
  }
}
