/**
 * The training work a backend does on a service speaking the training API: one place that decides
 * how a job is sent (retried or not), journaled, followed to its end and recorded, how SFT data
 * reaches the service, and how checkpoints are deleted.
 */
import { objectiveConfig } from './objective-params.js';
import { randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { APIConnectionError, APIError } from '../client/errors.js';
import { InvalidArgumentError, PolicyloopError } from '../internal/errors.js';
import type { ExperimentalTrainingConfig, SFTTrainingConfigInput } from '../schema/index.js';
import type {
  Backend,
  BackendConnection,
  JobModel,
  JobOptions,
  JobReporter,
  PruneResult,
  RLJobRequest,
  SFTParams,
  SFTSource,
  TrainingJobs,
  TrainParams,
  TrainResult,
  WaitOptions,
} from './backend.js';
import { planRetention } from './checkpoint-retention.js';
import type { RetentionOptions } from './checkpoint-retention.js';
import { TrainingJobFailedError, TrainingJobUncertainError } from './errors.js';
import { followTrainingJob } from './follow-job.js';
import { readHistory } from './history.js';
import type { TrainingJobKind } from './model-events.js';
import { clearPendingJob, pendingJobPath, readPendingJob, writePendingJob } from './pending-job.js';
import type { PendingJob } from './pending-job.js';
import { stageSFTFile, toSFTRows, writeSFTFile } from './sft-data.js';
import { stepRow } from './step-row.js';

/** What {@link ServiceJobs} uses of its backend. */
export type JobsBackend = Pick<Backend, 'kind' | 'connect' | 'defaultLearningRate' | 'localFileUrl'>;

/** The jobs of a backend that has none of its own (a plain object implementing {@link Backend}). */
const defaultJobs = new WeakMap<Backend, TrainingJobs>();

/** The backend's {@link TrainingJobs}: its own, or a {@link ServiceJobs} over its connection. */
export function jobsOf(backend: Backend): TrainingJobs {
  if (backend.jobs !== undefined) return backend.jobs;
  let jobs = defaultJobs.get(backend);
  if (jobs === undefined) {
    jobs = new ServiceJobs(backend);
    defaultJobs.set(backend, jobs);
  }
  return jobs;
}

/**
 * {@link TrainingJobs} over the training API of a backend's connection (the local service and the
 * hosted one speak the same API). A job POST carries one `Idempotency-Key`; it is retried only
 * where the connection says the service honours the key. An RL job is journaled before its POST
 * and the journal cleared after its history row, so a killed process leaves enough behind for the
 * next call to finish the step exactly once.
 */
export class ServiceJobs implements TrainingJobs {
  private readonly backend: JobsBackend;

  /** Jobs on `backend`'s service. */
  constructor(backend: JobsBackend) {
    this.backend = backend;
  }

  /** Journals, submits and follows one RL job to its end; records the step's history row. */
  async trainRL(
    model: JobModel,
    request: RLJobRequest,
    params: TrainParams,
    options: JobOptions,
    reporter: JobReporter,
  ): Promise<TrainResult> {
    const connection = await this.backend.connect({ signal: options.signal });
    const learningRate =
      params.learningRate ?? params.config?.learning_rate ?? (await this.backend.defaultLearningRate());
    const config: Partial<ExperimentalTrainingConfig> = { ...params.config, ...objectiveConfig(params) };
    if (learningRate !== null && learningRate !== undefined) config.learning_rate = learningRate;
    if (params.lossFn !== undefined) config.loss_fn = params.lossFn;
    if (params.allowTrainingWithoutLogprobs === true) config.allow_training_without_logprobs = true;

    // Journaled before the POST and cleared after the history row: a process killed anywhere in
    // between leaves the next train() (or finishPendingJob) enough to finish the step exactly once.
    const body = { model_id: model.id, trajectory_groups: [...request.groups], experimental_config: config };
    const journal = pendingJobPath(model.files.history);
    const { step, metrics, startedAt } = request;
    const pending: PendingJob = { step, idempotencyKey: randomUUID(), jobId: null, metrics, startedAt, body };
    await writePendingJob(journal, pending);
    const submittedAt = Date.now();
    const job = await submitJob(connection, 'rl', pending.idempotencyKey, (requestOptions) =>
      connection.client.jobs.createRL(body, { signal: options.signal, ...requestOptions }),
    );
    await writePendingJob(journal, { ...pending, jobId: job.id });
    const size = request.groups.length;
    return this.finishJob(
      connection,
      model,
      { jobId: job.id, kind: 'rl', size, step, metrics, startedAt, submittedAt },
      options,
      reporter,
      request.droppedGroups,
    );
  }

  /**
   * Finishes the RL step an earlier call (or a killed process) left under way: follows its job
   * (submitting it again under the same key when the service's answer was never seen, where the
   * key is honoured), then writes the step's history row. Null when nothing was pending or the
   * row was already written.
   */
  async finishPendingRL(model: JobModel, options: JobOptions, reporter: JobReporter): Promise<TrainResult | null> {
    const journal = pendingJobPath(model.files.history);
    const pending = await readPendingJob(journal);
    if (pending === null) return null;
    const rows = await readHistory(model.files.history);
    const written = rows.some(
      (row) => row.training_step === pending.step && Object.keys(row).some((name) => name.startsWith('train/')),
    );
    if (written) {
      await clearPendingJob(journal);
      return null;
    }
    const connection = await this.backend.connect({ signal: options.signal });
    const submittedAt = Date.now();
    let jobId = pending.jobId;
    if (jobId === null) {
      // The service's answer was never seen. Sending again under the same key returns the job the
      // service made (or makes it once), but only where the key is honoured; elsewhere a second
      // POST could start a second job, so the caller decides (see discardPendingJob).
      if (connection.honoursIdempotencyKeys !== true) {
        throw new TrainingJobUncertainError(
          'rl',
          pending.idempotencyKey,
          new PolicyloopError(
            `an earlier run submitted the job of step ${pending.step} and stopped before the service answered; ` +
              "check the model's jobs, then call `model.discardPendingJob()` to train on",
          ),
        );
      }
      const job = await submitJob(connection, 'rl', pending.idempotencyKey, (requestOptions) =>
        connection.client.jobs.createRL(pending.body, { signal: options.signal, ...requestOptions }),
      );
      jobId = job.id;
      await writePendingJob(journal, { ...pending, jobId });
    }
    const size = pending.body.trajectory_groups.length;
    const { step, startedAt } = pending;
    const metrics = { ...pending.metrics };
    const finished = { jobId, kind: 'rl' as const, size, step, metrics, startedAt, submittedAt };
    return this.finishJob(connection, model, finished, options, reporter, 0);
  }

  /** Forgets the RL step left under way; resolves with whether there was one. */
  async discardPendingRL(model: JobModel): Promise<boolean> {
    const journal = pendingJobPath(model.files.history);
    const pending = await readPendingJob(journal);
    if (pending === null) return false;
    await clearPendingJob(journal);
    return true;
  }

  /** Resolves the SFT source to a URL the service reads, submits and follows the SFT job. */
  async trainSFT(
    model: JobModel,
    source: SFTSource | undefined,
    params: SFTParams,
    options: JobOptions,
    reporter: JobReporter,
  ): Promise<TrainResult> {
    const startedAt = Date.now();
    const { url, rows } = await this.resolveSFTSource(model, source, params.trainingDataUrl);
    const config: SFTTrainingConfigInput = { ...params.config };
    if (params.learningRate !== undefined) config.learning_rate = params.learningRate;
    if (params.batchSize !== undefined) config.batch_size = params.batchSize;
    if (params.assistantTurns !== undefined) config.assistant_turns = params.assistantTurns;
    const connection = await this.backend.connect({ signal: options.signal });
    const step = await latestStep(connection, model, options);
    await reporter.flushLogs(options.signal);
    const submittedAt = Date.now();
    const job = await submitJob(connection, 'sft', randomUUID(), (requestOptions) =>
      connection.client.jobs.createSFT(
        { model_id: model.id, training_data_url: url, config },
        { signal: options.signal, ...requestOptions },
      ),
    );
    const finished = { jobId: job.id, kind: 'sft' as const, size: rows, step, metrics: {}, startedAt, submittedAt };
    return this.finishJob(connection, model, finished, options, reporter, 0);
  }

  /** Deletes the checkpoints `options` does not keep, judged by `values` (a history metric by step). */
  async pruneCheckpoints(
    model: JobModel,
    values: ReadonlyMap<number, number>,
    options: RetentionOptions & WaitOptions,
  ): Promise<PruneResult> {
    const connection = await this.backend.connect({ signal: options.signal });
    const steps: number[] = [];
    const checkpoints = connection.client.checkpoints.list(
      model.id,
      { limit: 100, order: 'asc' },
      { signal: options.signal },
    );
    for await (const checkpoint of checkpoints) steps.push(checkpoint.step);
    const plan = planRetention(steps, values, options);
    if (plan.remove.length === 0) return { kept: plan.keep, deleted: [], bestStep: plan.bestStep, notFoundSteps: [] };
    const result = await connection.client.checkpoints.delete(
      model.id,
      { steps: plan.remove },
      { signal: options.signal },
    );
    const notFound = new Set(result.not_found_steps);
    return {
      kept: plan.keep,
      deleted: plan.remove.filter((step) => !notFound.has(step)),
      bestStep: plan.bestStep,
      notFoundSteps: result.not_found_steps,
    };
  }

  /** Follows a submitted job to its end, writes the step's one history row and reports the result. */
  private async finishJob(
    connection: BackendConnection,
    model: JobModel,
    job: SubmittedJob,
    options: JobOptions,
    reporter: JobReporter,
    droppedGroups: number,
  ): Promise<TrainResult> {
    const { jobId, kind } = job;
    reporter.submitted({ jobId, kind, size: job.size });
    const journal = pendingJobPath(model.files.history);
    let followed: Awaited<ReturnType<typeof followTrainingJob>>;
    try {
      followed = await followTrainingJob(connection.client, jobId, {
        signal: options.signal,
        timeout: options.timeout,
        pollInterval: options.pollInterval,
        onProgress: (progress) => {
          reporter.progress(progress);
          options.onProgress?.(progress);
        },
      });
    } catch (error) {
      // A failed job trained nothing: nothing is left pending. (An abort or a timeout leaves the
      // journal, so that the next call finishes the step.)
      if (kind === 'rl' && error instanceof TrainingJobFailedError) await clearPendingJob(journal);
      throw error;
    }
    const page = await connection.client.checkpoints.list(
      model.id,
      { limit: 1, order: 'desc' },
      { signal: options.signal },
    );
    const checkpoint = page.data[0];
    const step = checkpoint?.step ?? 0;
    // One row per step, written once the job is done: what was known before it, the job's
    // metrics (describing training on the data of `job.step`) and the step's times.
    const metrics = stepRow({
      kind,
      before: job.metrics,
      job: { ...followed.metrics, ...checkpoint?.metrics },
      submittedAt: job.submittedAt,
      startedAt: job.startedAt,
      endedAt: Date.now(),
    });
    await reporter.recordRow(metrics, job.step);
    if (kind === 'rl') await clearPendingJob(journal);
    reporter.ended({ jobId, kind, step, metrics });
    return { step, metrics, jobId, droppedGroups };
  }

  private async resolveSFTSource(
    model: JobModel,
    source: SFTSource | undefined,
    trainingDataUrl: string | undefined,
  ): Promise<{ url: string; rows: number | null }> {
    const backend = this.backend;
    if (trainingDataUrl !== undefined) return { url: trainingDataUrl, rows: null };
    if (source instanceof URL) return { url: source.href, rows: null };
    if (typeof source === 'string') {
      if (/^[a-z][a-z0-9+.-]+:/i.test(source)) return { url: source, rows: null };
      const file = path.resolve(source);
      const url = backend.localFileUrl(file);
      if (url === null) throw hostedNeedsUrl(backend);
      try {
        await stat(file);
      } catch (error) {
        throw new InvalidArgumentError('source', `Expected an SFT JSONL file at ${file}, but it cannot be read`, {
          cause: error,
        });
      }
      // The local service reads file:// data only from the models' sft-data folders (and the
      // roots it is given): the file goes there, linked when it can be (docs/training.md).
      const staged = backend.localFileUrl(await stageSFTFile(model.files.sftData, file));
      return { url: staged ?? url, rows: null };
    }
    if (source === undefined) {
      throw new InvalidArgumentError(
        'source',
        'Expected `source` to be trajectories, `{messages}` rows, a JSONL path or a URL (or pass `trainingDataUrl`), ' +
          'got undefined',
      );
    }
    if (backend.localFileUrl(model.files.sftData) === null) throw hostedNeedsUrl(backend);
    const rows = toSFTRows(source);
    const file = await writeSFTFile(model.files.sftData, rows);
    const url = backend.localFileUrl(file);
    if (url === null) throw hostedNeedsUrl(backend);
    return { url, rows: rows.length };
  }
}

/** A job the service created, with what its step's row needs. */
interface SubmittedJob {
  readonly jobId: string;
  readonly kind: TrainingJobKind;
  /** Groups (RL) or rows (SFT, when known). */
  readonly size: number | null;
  /** The step the job trains at (its row's step). */
  readonly step: number;
  /** The step's metrics known before the job. */
  readonly metrics: Readonly<Record<string, number>>;
  /** When the step began and when its job was submitted (`Date.now()`). */
  readonly startedAt: number | undefined;
  readonly submittedAt: number;
}

/** The newest checkpoint's step, 0 for the base model. */
export async function latestStep(
  connection: BackendConnection,
  model: Pick<JobModel, 'id'>,
  options: WaitOptions,
): Promise<number> {
  const page = await connection.client.checkpoints.list(
    model.id,
    { limit: 1, order: 'desc' },
    { signal: options.signal },
  );
  return page.data[0]?.step ?? 0;
}

function hostedNeedsUrl(backend: JobsBackend): InvalidArgumentError {
  return new InvalidArgumentError(
    'source',
    `The ${backend.kind} service cannot read SFT data from this machine: write the rows as JSONL, upload the ` +
      'file (a W&B artifact) and pass its URL as `trainingDataUrl` (see docs/hosted.md).',
  );
}

/**
 * Sends a training-job POST with one `Idempotency-Key` for the job. A service known to honour the
 * key gets the client's usual retries (each one is recognised: one job). Any other service gets a
 * single attempt: a failure that leaves open whether the job was created becomes a
 * {@link TrainingJobUncertainError} instead of a blind retry.
 */
async function submitJob<T>(
  connection: BackendConnection,
  kind: TrainingJobKind,
  idempotencyKey: string,
  send: (options: { idempotencyKey: string; maxRetries?: number | undefined }) => Promise<T>,
): Promise<T> {
  if (connection.honoursIdempotencyKeys === true) return send({ idempotencyKey });
  try {
    return await send({ idempotencyKey, maxRetries: 0 });
  } catch (error) {
    const uncertain = error instanceof APIConnectionError || (error instanceof APIError && error.status >= 500);
    throw uncertain ? new TrainingJobUncertainError(kind, idempotencyKey, error) : error;
  }
}
