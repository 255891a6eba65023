/**
 * The `jobs` table: training jobs and their states. Each change of state appends its event
 * (`JobEventStore`) in the same transaction; a completed job's checkpoint and its model's step are
 * written with it too.
 */
import { randomUUID } from 'node:crypto';
import type { TrainingJobStatus } from '../../schema/index.js';
import type { CheckpointStore } from './checkpoints.js';
import { now, type StoreConnection, type StorePage } from './connection.js';
import type { JobEventStore } from './job-events.js';
import type { ModelStore } from './models.js';

/** Kind of a training job. */
export type JobKind = 'rl' | 'sft';

/** A training job row. `request` is the validated request body, as JSON. */
export interface JobRecord {
  readonly id: string;
  readonly model_id: string;
  readonly kind: JobKind;
  readonly status: TrainingJobStatus;
  readonly progress: number | null;
  readonly num_sequences: number | null;
  readonly steps_done: number;
  readonly error_message: string | null;
  readonly request: string;
  readonly output_path: string | null;
  readonly training_start: string | null;
  readonly training_end: string | null;
  readonly created_at: string;
  readonly updated_at: string;
}

/** What a job's completion writes besides its state. */
export interface JobStoreParts {
  readonly models: ModelStore;
  readonly checkpoints: CheckpointStore;
  readonly events: JobEventStore;
}

/** The training jobs. */
export class JobStore {
  /**
   * @param connection The store's connection.
   * @param parts The tables a change of a job's state writes too.
   */
  constructor(
    private readonly connection: StoreConnection,
    private readonly parts: JobStoreParts,
  ) {}

  /** Inserts a PENDING job. */
  create(fields: { modelId: string; kind: JobKind; request: unknown }): JobRecord {
    const createdAt = now();
    const record: JobRecord = {
      id: randomUUID(),
      model_id: fields.modelId,
      kind: fields.kind,
      status: 'PENDING',
      progress: null,
      num_sequences: null,
      steps_done: 0,
      error_message: null,
      request: JSON.stringify(fields.request),
      output_path: null,
      training_start: null,
      training_end: null,
      created_at: createdAt,
      updated_at: createdAt,
    };
    this.connection
      .prepare(
        `INSERT INTO jobs (id, model_id, kind, status, progress, num_sequences, steps_done, error_message, request, output_path, training_start, training_end, created_at, updated_at)
         VALUES (@id, @model_id, @kind, @status, @progress, @num_sequences, @steps_done, @error_message, @request, @output_path, @training_start, @training_end, @created_at, @updated_at)`,
      )
      .run(record);
    return record;
  }

  /** A job by id. */
  get(id: string): JobRecord | undefined {
    return this.connection.prepare('SELECT * FROM jobs WHERE id = ?').get(id) as JobRecord | undefined;
  }

  /** Jobs in the given states, oldest first. */
  withStatus(statuses: readonly TrainingJobStatus[]): JobRecord[] {
    const marks = statuses.map(() => '?').join(', ');
    return this.connection
      .prepare(`SELECT * FROM jobs WHERE status IN (${marks}) ORDER BY created_at`)
      .all(...statuses) as JobRecord[];
  }

  /** A page of a model's jobs, newest first; undefined when `after` is not a job of this model. */
  list(modelId: string, query: { after?: string | undefined; limit: number }): StorePage<JobRecord> | undefined {
    let cursor = Number.MAX_SAFE_INTEGER;
    if (query.after !== undefined) {
      const row = this.connection
        .prepare('SELECT rowid FROM jobs WHERE model_id = ? AND id = ?')
        .get(modelId, query.after) as { rowid: number } | undefined;
      if (row === undefined) return undefined;
      cursor = row.rowid;
    }
    const rows = this.connection
      .prepare('SELECT * FROM jobs WHERE model_id = ? AND rowid < ? ORDER BY rowid DESC LIMIT ?')
      .all(modelId, cursor, query.limit + 1) as JobRecord[];
    return { items: rows.slice(0, query.limit), hasMore: rows.length > query.limit };
  }

  /** PENDING -> RUNNING; false when the job is gone or not pending any more. */
  markRunning(id: string, outputPath: string): boolean {
    const time = now();
    const result = this.connection
      .prepare(
        "UPDATE jobs SET status = 'RUNNING', progress = 0, output_path = ?, training_start = ?, updated_at = ? WHERE id = ? AND status = 'PENDING'",
      )
      .run(outputPath, time, time, id);
    return result.changes === 1;
  }

  /**
   * Records a `training_started` or `gradient_step` event of a RUNNING job and updates its
   * progress (gradient steps done / `num_sequences`). Ignored once the job is not RUNNING.
   */
  recordProgress(jobId: string, type: 'training_started' | 'gradient_step', data: Record<string, unknown>): void {
    this.connection.transaction(() => {
      const job = this.get(jobId);
      if (job === undefined || job.status !== 'RUNNING') return;
      const time = now();
      if (type === 'training_started') {
        const numSequences = typeof data['num_sequences'] === 'number' ? data['num_sequences'] : null;
        this.connection
          .prepare('UPDATE jobs SET num_sequences = ?, updated_at = ? WHERE id = ?')
          .run(numSequences, time, jobId);
      } else {
        const stepsDone = job.steps_done + 1;
        const progress =
          job.num_sequences !== null && job.num_sequences > 0
            ? Math.min(1, stepsDone / job.num_sequences)
            : job.progress;
        this.connection
          .prepare('UPDATE jobs SET steps_done = ?, progress = ?, updated_at = ? WHERE id = ?')
          .run(stepsDone, progress, time, jobId);
      }
      this.parts.events.append(jobId, type, data, time);
    });
  }

  /**
   * Finishes a RUNNING job: inserts its checkpoint, advances the model's step, marks the job
   * COMPLETED and appends `training_ended`, in one transaction (the checkpoint is visible before
   * the event). Returns false, changing nothing, when the job or its model is gone or the job is
   * no longer RUNNING.
   */
  complete(jobId: string, checkpoint: { step: number; metrics: Record<string, number>; path: string }): boolean {
    return this.connection.transaction(() => {
      const job = this.get(jobId);
      if (job === undefined || job.status !== 'RUNNING') return false;
      const model = this.parts.models.get(job.model_id);
      if (model === undefined) return false;
      const time = now();
      this.parts.checkpoints.put(model.id, checkpoint, time);
      this.parts.models.advanceLatestStep(model.id, checkpoint.step);
      this.connection
        .prepare("UPDATE jobs SET status = 'COMPLETED', progress = 1, training_end = ?, updated_at = ? WHERE id = ?")
        .run(time, time, jobId);
      this.parts.events.append(jobId, 'training_ended', {}, time);
      return true;
    });
  }

  /**
   * Fails a PENDING or RUNNING job with its terminal `training_failed` event. Returns false,
   * changing nothing, when the job is gone or already ended (so there is exactly one terminal event).
   */
  fail(jobId: string, message: string): boolean {
    return this.connection.transaction(() => {
      const job = this.get(jobId);
      if (job === undefined || (job.status !== 'PENDING' && job.status !== 'RUNNING')) return false;
      const time = now();
      this.connection
        .prepare("UPDATE jobs SET status = 'FAILED', error_message = ?, training_end = ?, updated_at = ? WHERE id = ?")
        .run(message, time, time, jobId);
      this.parts.events.append(jobId, 'training_failed', { error_message: message }, time);
      return true;
    });
  }
}
