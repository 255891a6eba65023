/**
 * What an `RLTrainer` run keeps of its checkpoints (`keep`), and the best step it reports: the
 * run's rules over `model.pruneCheckpoints` and the history, apart from its loops.
 */
import { metricByStep } from './history.js';
import type { TrainerConfig } from './rl-types.js';
import type { TrainableModel } from './trainable-model.js';

type Keep = TrainerConfig<unknown>['keep'];

/**
 * Deletes the checkpoints `keep` does not keep, sparing `sampledFrom` (steps still sampled or
 * validated from) and, until the end (`final`), the latest. Nothing is deleted before the metric
 * exists at a checkpoint (step >= 1, up to `latest`).
 */
export async function pruneRun(
  model: TrainableModel,
  keep: Keep,
  latest: number,
  sampledFrom: readonly number[],
  final: boolean,
): Promise<void> {
  if (keep === undefined) return;
  const keepBestBy = keep.best ? keep.metric : null;
  if (keepBestBy !== null) {
    const values = metricByStep(await model.history(), keepBestBy);
    if (![...values.keys()].some((step) => step >= 1 && step <= latest)) return;
  }
  await model.pruneCheckpoints({
    keepBestBy,
    direction: keep.direction,
    keepLatest: final ? keep.latest : true,
    keepSteps: final ? [] : [...sampledFrom],
  });
}

/** The best step by the keep metric (default `val/reward`) in the history; ties go to the later step, as in retention. */
export async function bestStep(
  model: TrainableModel,
  keep: Keep,
): Promise<{ step: number | null; value: number | null }> {
  const metric = keep?.metric ?? 'val/reward';
  const better = keep?.direction === 'min' ? (a: number, b: number) => a <= b : (a: number, b: number) => a >= b;
  let step: number | null = null;
  let value: number | null = null;
  const values = [...metricByStep(await model.history(), metric)].sort(([a], [b]) => a - b);
  for (const [at, metricValue] of values) {
    if (value === null || better(metricValue, value)) {
      step = at;
      value = metricValue;
    }
  }
  return { step, value };
}
