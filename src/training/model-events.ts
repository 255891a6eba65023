/** The typed events of a {@link TrainableModel}. */
import type { BatchRetryEvent, BatchSentEvent, BatchSpooledEvent } from './log-batcher.js';
import type { JobProgress } from './follow-job.js';
import type { HistoryRow } from './history.js';

/** Which kind of training job. */
export type TrainingJobKind = 'rl' | 'sft';

/** A training job was created on the service. */
export interface JobSubmittedEvent {
  /** The job's id on the service. */
  readonly jobId: string;
  /** RL or SFT. */
  readonly kind: TrainingJobKind;
  /** Groups (RL) or rows (SFT, when known) in the job. */
  readonly size: number | null;
}

/** A training job ended and its checkpoint exists. */
export interface JobEndEvent {
  /** The job's id on the service. */
  readonly jobId: string;
  /** RL or SFT. */
  readonly kind: TrainingJobKind;
  /** The new step (policy version). */
  readonly step: number;
  /** The job's metrics, named as in the history (`train/loss`, `sft/loss`; see `TrainResult.metrics`). */
  readonly metrics: Readonly<Record<string, number>>;
}

/** Stale groups were left out of training before upload. */
export interface StaleGroupsDroppedEvent {
  /** Why: sampled from a policy more than `maxStaleness` steps old. */
  readonly reason: 'stale';
  /** How many groups were left out. */
  readonly count: number;
  /** The step at the time of the check. */
  readonly currentStep: number;
  /** The bound that was applied, in steps. */
  readonly maxStaleness: number;
}

/**
 * Groups whose rewards are all equal were left out of the upload: every trajectory's advantage is
 * its reward minus its group's mean, so they carry no gradient. They still count in the step's
 * `train/` metrics (`train/frac_reward_zero_std`).
 */
export interface ZeroVarianceGroupsDroppedEvent {
  /** Why: the group's rewards are all equal. */
  readonly reason: 'zero_variance';
  /** How many groups were left out. */
  readonly count: number;
  /** The step at the time of the check. */
  readonly currentStep: number;
  /** Their indexes in the groups given to `train`. */
  readonly groupIndexes: readonly number[];
}

/** Groups were left out of training before upload: stale ones, or ones whose rewards are all equal. */
export type GroupsDroppedEvent = StaleGroupsDroppedEvent | ZeroVarianceGroupsDroppedEvent;

/** A row was appended to `history.jsonl`. */
export interface HistoryRowEvent {
  /** The row as written. */
  readonly row: HistoryRow;
  /** The `history.jsonl` file it went to. */
  readonly path: string;
}

/** Events of a {@link TrainableModel}: job lifecycle, history rows, and its log batcher's events. */
export interface TrainableModelEvents {
  /** A training job was created. */
  'job:submitted': [event: JobSubmittedEvent];
  /** A job event arrived (also passed to `onProgress`). */
  'job:progress': [event: JobProgress];
  /** A job ended and its checkpoint exists. */
  'job:end': [event: JobEndEvent];
  /** Stale groups, or groups whose rewards are all equal, were left out before upload. */
  'groups:dropped': [event: GroupsDroppedEvent];
  /** A row was appended to `history.jsonl`. */
  'history:row': [event: HistoryRowEvent];
  /** The log batcher delivered a batch. */
  'batch:sent': [event: BatchSentEvent];
  /** A log batch failed and will be tried again. */
  'batch:retry': [event: BatchRetryEvent];
  /** A log batch could not be delivered and went to the spool file. */
  'batch:spooled': [event: BatchSpooledEvent];
}
