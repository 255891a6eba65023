/**
 * The one function a step's metrics go through on their way to its one history row: the groups'
 * `train/*` (rewards), the batch's `groups/*` and `rollouts/*`, a trainer's loop metrics, the job's
 * own, and the step's times. That row is what `step:end` carries, what `history.jsonl` and
 * `model.history()` hold, what the local service stores and what the dashboard, `policyloop
 * history` and `policyloop report` show. The metric families are listed in docs/training.md.
 */
import type { TrainingJobKind } from './model-events.js';

/** The parts of a step's row. */
export interface StepRowParts {
  /** The job's kind: its metrics go under `train/` (RL) or `sft/`. */
  readonly kind: TrainingJobKind;
  /** The metrics known before the job (groups, batch, loop), named as in the row. */
  readonly before: Readonly<Record<string, number>>;
  /** The job's metrics as the service reports them (unprefixed: `loss`, `grad_norm`, ...). */
  readonly job: Readonly<Record<string, number>>;
  /** When the job was submitted (`Date.now()`), for `time/train`. */
  readonly submittedAt: number;
  /** When the step began (`Date.now()`), for `time/step`; unknown for a step resumed after a crash. */
  readonly startedAt: number | undefined;
  /** Now (`Date.now()`): the step's end. */
  readonly endedAt: number;
}

/** Metric names of the trajectory data that a job may repeat; the row has them from the groups. */
const TRAJECTORY_METRIC_NAMES = new Set([
  'reward',
  'reward_std_dev',
  'num_trajectories',
  'num_groups_submitted',
  'exception_rate',
]);

/**
 * A step's one row: `before`, the job's metrics under the job's prefix (trajectory metrics the job
 * repeats are left out: the groups' are in `before`), `time/train` (the job, from submission to
 * its end) and `time/step` (from the step's start to its end, when known).
 * @example
 * stepRow({ kind: 'rl', before: { 'train/reward': 0.5 }, job: { loss: 0.1 }, submittedAt, startedAt, endedAt: Date.now() });
 * // { 'train/reward': 0.5, 'train/loss': 0.1, 'time/train': 2.4, 'time/step': 3.1 }
 */
export function stepRow(parts: StepRowParts): Record<string, number> {
  const prefix = parts.kind === 'sft' ? 'sft' : 'train';
  const row: Record<string, number> = { ...parts.before };
  for (const [name, value] of Object.entries(parts.job)) {
    if (!TRAJECTORY_METRIC_NAMES.has(name)) row[`${prefix}/${name}`] = value;
  }
  row['time/train'] = Math.max(0, parts.endedAt - parts.submittedAt) / 1000;
  if (parts.startedAt !== undefined) row['time/step'] = Math.max(0, parts.endedAt - parts.startedAt) / 1000;
  return row;
}
