/**
 * The loss a Tinker server trains an RL job with, from the job's `experimental_config`: which of
 * its losses (`forward_backward`'s `loss_fn`) and that loss's clip settings (`loss_fn_config`).
 * Free of the client's wire code, so the backend checks a step's parameters with it before
 * anything is sampled.
 */
import type { ExperimentalTrainingConfig } from '../../schema/index.js';

/** The Tinker losses that clip the importance ratio (`clip_low_threshold`, `clip_high_threshold`). */
export const TINKER_CLIPPED_LOSSES: readonly string[] = ['ppo', 'cispo'];

/**
 * The clip settings of a Tinker server's loss (`forward_backward`'s `loss_fn_config`) from the
 * job's `epsilon` / `epsilon_high`: `ppo` and `cispo` clip the ratio to
 * `[clip_low_threshold, clip_high_threshold]` = `[1 − epsilon, 1 + epsilon_high]` (`epsilon_high`
 * defaults to `epsilon` for `ppo`, as ART's); a bound not given is left to the server's default.
 * `importance_sampling` and `dro` take no clip: either key set with them fails the step, naming it.
 * @example
 * tinkerLossConfig('ppo', { epsilon: 0.1 }); // { clip_low_threshold: 0.9, clip_high_threshold: 1.1 }
 */
export function tinkerLossConfig(
  lossFn: string,
  config: ExperimentalTrainingConfig | null,
): Record<string, number> | undefined {
  const epsilon = config?.epsilon ?? undefined;
  const high = config?.epsilon_high ?? (lossFn === 'ppo' ? epsilon : undefined);
  if (epsilon === undefined && high === undefined) return undefined;
  if (!TINKER_CLIPPED_LOSSES.includes(lossFn))
    throw new Error(
      `experimental_config.${epsilon !== undefined ? 'epsilon' : 'epsilon_high'} is a clip of the ppo and cispo losses; a Tinker server's ${lossFn} loss has none. Leave it out, or train with loss_fn "ppo" or "cispo".`,
    );
  return {
    ...(epsilon === undefined ? {} : { clip_low_threshold: 1 - epsilon }),
    ...(high === undefined ? {} : { clip_high_threshold: 1 + high }),
  };
}

/**
 * The RL loss sent to the server: the job's `loss_fn`, else `ppo` with ART's `ppo: true`, else
 * `importance_sampling` (Tinker's default).
 * @example
 * tinkerLossFunction({ ppo: true }); // 'ppo'
 */
export function tinkerLossFunction(config: Partial<ExperimentalTrainingConfig> | null): string {
  return config?.loss_fn ?? (config?.ppo === true ? 'ppo' : 'importance_sampling');
}
