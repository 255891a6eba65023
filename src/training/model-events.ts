/** The typed events of a {@link TrainableModel}. */
import type { BatchRetryEvent, BatchSentEvent, BatchSpooledEvent } from './log-batcher.js';
import type { JobProgress } from './follow-job.js';
import type { HistoryRow } from './history.js';

/** Which kind of training job. */
export type TrainingJobKind = 'rl' | 'sft';

/** A training job was created on the service. */
export interface JobSubmittedEvent {
  readonly jobId: string;
  readonly kind: TrainingJobKind;
  /** Groups (RL) or rows (SFT, when known) in the job. */
  readonly size: number | null;
}

/** A training job ended and its checkpoint exists. */
export interface JobEndEvent {
  readonly jobId: string;
  readonly kind: TrainingJobKind;
  /** The new step (policy version). */
  readonly step: number;
  readonly metrics: Readonly<Record<string, number>>;
}

/** Groups were left out of training before upload. */
export interface GroupsDroppedEvent {
  /** Why: sampled from a policy more than `maxStaleness` steps old. */
  readonly reason: 'stale';
  readonly count: number;
  /** The step at the time of the check. */
  readonly currentStep: number;
  readonly maxStaleness: number;
}

/** A row was appended to `history.jsonl`. */
export interface HistoryRowEvent {
  readonly row: HistoryRow;
  readonly path: string;
}

/** Events of a {@link TrainableModel}: job lifecycle, history rows, and its log batcher's events. */
export interface TrainableModelEvents {
  'job:submitted': [event: JobSubmittedEvent];
  'job:progress': [event: JobProgress];
  'job:end': [event: JobEndEvent];
  'groups:dropped': [event: GroupsDroppedEvent];
  'history:row': [event: HistoryRowEvent];
  'batch:sent': [event: BatchSentEvent];
  'batch:retry': [event: BatchRetryEvent];
  'batch:spooled': [event: BatchSpooledEvent];
}
