/**
 * The KL penalty's reference policy of an RL job, resolved from its `experimental_config` against
 * the model's checkpoints: what the engine's `klReference` names.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ExperimentalTrainingConfig } from '../schema/index.js';
import type { CheckpointRecord } from './store/index.js';

/**
 * The reference of the KL penalty (`kl_penalty_coef` > 0; undefined otherwise), as ART's backends
 * resolve it:
 * - `kl_ref_adapter_path`: that checkpoint or PEFT adapter folder (relative to the service's
 *   working directory);
 * - `kl_penalty_reference_step`: the model's checkpoint at that step (0: the base weights);
 * - `kl_penalty_step_lag`: the step `max(0, current - lag)`, where `current` is the step being
 *   trained from (a pruned step falls back to the newest kept checkpoint before it, or the base);
 * - none of them: the base weights (LoRA off).
 * Throws an Error fit for the job's failure message when they conflict or name nothing.
 * @example
 * klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_step_lag: 2 }, checkpoints, 5, dataDir); // step 3's folder
 */
export function klReferenceOf(
  config: ExperimentalTrainingConfig | null,
  checkpoints: readonly CheckpointRecord[],
  currentStep: number,
  dataDir: string,
): { checkpointPath: string | null } | undefined {
  if (!config?.kl_penalty_coef || config.kl_penalty_coef <= 0) return undefined;
  const named = (['kl_ref_adapter_path', 'kl_penalty_reference_step', 'kl_penalty_step_lag'] as const).filter(
    (key) => config[key] !== null && config[key] !== undefined,
  );
  if (named.length > 1)
    throw new Error(
      `experimental_config names the KL reference twice (${named.join(' and ')}): give one of kl_ref_adapter_path, kl_penalty_reference_step or kl_penalty_step_lag.`,
    );
  const path = config.kl_ref_adapter_path;
  if (typeof path === 'string') {
    const folder = resolve(path);
    if (!existsSync(folder))
      throw new Error(`kl_ref_adapter_path ${JSON.stringify(path)} does not exist (resolved to ${folder}).`);
    return { checkpointPath: folder };
  }
  const at = (step: number): string =>
    resolve(dataDir, (checkpoints.find((c) => c.step === step) as CheckpointRecord).path);
  const step = config.kl_penalty_reference_step;
  if (typeof step === 'number') {
    if (step < 0 || step > currentStep)
      throw new Error(
        `kl_penalty_reference_step ${step} is not a step of this model yet (it is at step ${currentStep}).`,
      );
    if (step === 0) return { checkpointPath: null };
    if (!checkpoints.some((c) => c.step === step))
      throw new Error(
        `kl_penalty_reference_step ${step} has no checkpoint (deleted or pruned); the model keeps steps ${checkpoints.map((c) => c.step).join(', ') || 'none'}.`,
      );
    return { checkpointPath: at(step) };
  }
  const lag = config.kl_penalty_step_lag;
  if (typeof lag === 'number') {
    if (lag < 0) throw new Error(`kl_penalty_step_lag must be 0 or more, got ${lag}.`);
    const target = Math.max(0, currentStep - lag);
    const kept = checkpoints.filter((c) => c.step > 0 && c.step <= target).at(-1);
    return { checkpointPath: kept === undefined ? null : at(kept.step) };
  }
  return { checkpointPath: null };
}
