/** The typed events of a {@link TrainableModel}. */
import type { BatchRetryEvent, BatchSentEvent, BatchSpooledEvent } from './log-batcher.js';
import type { JobProgress } from './follow-job.js';
import type { HistoryDifference, HistoryRow } from './history.js';

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

/**
 * Groups were left out of training, by a model's `train` or an `RLTrainer` step (one payload for
 * both, built in one place): stale ones (sampled more than `maxStepsOffPolicy` steps before the
 * step), ones whose rewards are all equal (every advantage is zero: no gradient; they still count
 * in the step's `train/frac_reward_zero_std`), or, in a trainer, ones with fewer than
 * `minGroupSize` finished rollouts.
 */
export interface GroupsDroppedEvent {
  /** Why they were left out. */
  readonly reason: 'stale' | 'zero_variance' | 'failed_rollouts';
  /** How many groups were left out. */
  readonly count: number;
  /** The step they were to train at. */
  readonly step: number;
  /** Their indexes in the groups given to `train` (in a trainer: in the step's batch). */
  readonly groupIndexes: readonly number[];
  /** The staleness bound that was applied, in steps (`reason: 'stale'` only). */
  readonly maxStepsOffPolicy?: number | undefined;
  /** The fewest finished rollouts a group trains with (`reason: 'failed_rollouts'` only). */
  readonly minGroupSize?: number | undefined;
}

/** A row was appended to `history.jsonl`. */
export interface HistoryRowEvent {
  /** The row as written. */
  readonly row: HistoryRow;
  /** The `history.jsonl` file it went to. */
  readonly path: string;
}

/**
 * A history row's metrics could not be sent to the local service's metrics route (after the
 * client's retries). The row is in `history.jsonl`. A transient failure (network, 5xx, 408, 409,
 * 429) keeps the send queued: it is tried again before the next row, by `model.history()` and by
 * `model.close()`, with the same idempotency key. A refusal (another 4xx) drops it (`dropped`).
 */
export interface HistoryErrorEvent {
  /** What failed. */
  readonly error: unknown;
  /** The step of the metrics that could not be sent. */
  readonly step: number;
  /** Their split. */
  readonly split: string;
  /** True when the service refused the metrics (they stay in `history.jsonl` only). */
  readonly dropped: boolean;
  /** Sends still waiting to be tried again (this one included unless dropped). */
  readonly pending: number;
}

/**
 * `model.history()` found that the service's history and `history.jsonl` disagree; it returned
 * the service's. Steps only in the service are expected when another client (another data
 * directory) trained the same model; steps only in the file, or different values, mean the
 * service lost or never received what this client wrote (or the file belongs to another model
 * of the same name).
 */
export interface HistoryMismatchEvent extends HistoryDifference {
  /** The `history.jsonl` file compared. */
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
  /** Groups were left out before upload: stale ones, or ones whose rewards are all equal. */
  'groups:dropped': [event: GroupsDroppedEvent];
  /** A row was appended to `history.jsonl`. */
  'history:row': [event: HistoryRowEvent];
  /** A history row could not be sent to the local service yet (it will be tried again). */
  'history:error': [event: HistoryErrorEvent];
  /** `model.history()` found the service's history and `history.jsonl` disagreeing. */
  'history:mismatch': [event: HistoryMismatchEvent];
  /** The log batcher delivered a batch. */
  'batch:sent': [event: BatchSentEvent];
  /** A log batch failed and will be tried again. */
  'batch:retry': [event: BatchRetryEvent];
  /** A log batch could not be delivered and went to the spool file. */
  'batch:spooled': [event: BatchSpooledEvent];
}
