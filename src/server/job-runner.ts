/**
 * Runs training jobs: one p-queue per model (concurrency 1, so a model's jobs run one at a time
 * in order) feeding one global p-queue (`maxConcurrentJobs`, so jobs of different models overlap
 * up to that limit). Each job goes PENDING -> RUNNING -> COMPLETED | FAILED and ends with exactly
 * one terminal event.
 */
import { existsSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import PQueue from 'p-queue';
import { CreateSFTTrainingJob, CreateTrainingJob } from '../schema/index.js';
import type { Engine, EngineTrainingEvent, EngineTrainingJob } from '../engine/types.js';
import { raceSignal } from '../internal/delay.js';
import { klReferenceOf } from './kl-reference.js';
import { policyRef } from './policy-refs.js';
import type { Store } from './store/index.js';
import { loadTrainingData } from './training-data.js';
import { resolveTrainingDataAccess, type TrainingDataAccess } from './training-data-access.js';
import type { ServerLogger } from './options.js';

/** Counts shown by the system check. */
export interface JobRunnerStats {
  readonly running: number;
  readonly queued: number;
  readonly maxConcurrentJobs: number;
}

/** Dependencies of a {@link JobRunner}. */
export interface JobRunnerOptions {
  readonly store: Store;
  readonly engine: Engine;
  readonly dataDir: string;
  readonly maxConcurrentJobs: number;
  readonly logger: ServerLogger;
  /** Longest a job may run before it is stopped and failed. @default 21_600_000 (6 hours) */
  readonly jobTimeoutMs?: number | undefined;
  /** What SFT training data URLs may reach. @default the data directory's SFT files only */
  readonly trainingDataAccess?: TrainingDataAccess | undefined;
  /** Largest SFT training data file read, in bytes. @default 256 MiB */
  readonly maxTrainingDataBytes?: number | undefined;
  /** How long an aborted engine job is given to stop before the job is failed without it. @default 30_000 */
  readonly engineStopGraceMs?: number | undefined;
}

interface RunningJob {
  readonly modelId: string;
  readonly outputPath: string;
  readonly controller: AbortController;
  readonly done: Promise<void>;
}

/** Message of the jobs failed at start-up because the previous process stopped under them. */
export const INTERRUPTED_MESSAGE =
  'Interrupted by a restart of the service: the job had not finished when the previous process stopped. Submit it again.';

/** How long an aborted engine job is given to stop before the job is failed without it. */
const ENGINE_STOP_GRACE_MS = 30_000;

const STOPPED_BEFORE_START = 'The service stopped before the job started. Submit it again.';

/** The job queue of one service instance. */
export class JobRunner {
  private readonly options: JobRunnerOptions;
  private readonly modelQueues = new Map<string, PQueue>();
  private readonly globalQueue: PQueue;
  private readonly running = new Map<string, RunningJob>();
  private closed = false;

  constructor(options: JobRunnerOptions) {
    this.options = options;
    this.globalQueue = new PQueue({ concurrency: options.maxConcurrentJobs });
  }

  /**
   * Fails every job a previous process left PENDING or RUNNING (with its terminal event) and
   * removes their half-written checkpoints. Returns how many it failed.
   */
  async failInterruptedJobs(): Promise<number> {
    const { store, dataDir } = this.options;
    const interrupted = store.jobs.withStatus(['PENDING', 'RUNNING']);
    for (const job of interrupted) {
      store.jobs.fail(job.id, INTERRUPTED_MESSAGE);
      if (job.output_path !== null) await rm(resolve(dataDir, job.output_path), { recursive: true, force: true });
    }
    return interrupted.length;
  }

  /** Queues a PENDING job behind the other jobs of its model (fails it at once once the runner is closed). */
  enqueue(jobId: string, modelId: string): void {
    if (this.closed) {
      // A request that was already past the service's door when it stopped: never leave the job PENDING.
      if (this.options.store.isOpen) this.options.store.jobs.fail(jobId, STOPPED_BEFORE_START);
      return;
    }
    let queue = this.modelQueues.get(modelId);
    if (queue === undefined) {
      queue = new PQueue({ concurrency: 1 });
      this.modelQueues.set(modelId, queue);
      const modelQueue = queue;
      modelQueue.on('idle', () => {
        if (this.modelQueues.get(modelId) === modelQueue && modelQueue.size === 0 && modelQueue.pending === 0)
          this.modelQueues.delete(modelId);
      });
    }
    queue
      .add(() => this.globalQueue.add(() => this.run(jobId)))
      .catch((error: unknown) => this.options.logger.error(`job ${jobId}: ${describe(error)}`));
  }

  /** Counts for the system check. */
  stats(): JobRunnerStats {
    let queued = 0;
    for (const queue of this.modelQueues.values()) queued += queue.size;
    return {
      running: this.running.size,
      queued: queued + this.globalQueue.size,
      maxConcurrentJobs: this.options.maxConcurrentJobs,
    };
  }

  /**
   * Stops the running job of a deleted model and waits (at most `timeoutMs`) for it to let go of
   * its files. Its queued jobs find their rows gone and do nothing.
   */
  async stopModel(modelId: string, timeoutMs = 10_000): Promise<void> {
    const stopping: Promise<void>[] = [];
    for (const job of this.running.values()) {
      if (job.modelId !== modelId) continue;
      job.controller.abort(new Error('The model was deleted while the job was running'));
      stopping.push(job.done);
    }
    await settleWithin(stopping, timeoutMs);
  }

  /**
   * Stops taking jobs: fails queued ones, aborts running ones and waits up to `timeoutMs` for
   * them to end; every job gets its terminal event before the store closes.
   */
  async close(timeoutMs = 10_000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const queue of this.modelQueues.values()) queue.clear();
    this.globalQueue.clear();
    const { store } = this.options;
    for (const job of store.jobs.withStatus(['PENDING'])) store.jobs.fail(job.id, STOPPED_BEFORE_START);
    const running = [...this.running.entries()];
    for (const [, job] of running)
      job.controller.abort(new Error('The service stopped while the job was running. Submit it again.'));
    await settleWithin(
      running.map(([, job]) => job.done),
      timeoutMs,
    );
    for (const [jobId] of running)
      store.jobs.fail(jobId, 'The service stopped while the job was running. Submit it again.');
  }

  private async run(jobId: string): Promise<void> {
    const { store, engine, dataDir, logger } = this.options;
    if (this.closed || !store.isOpen) return;
    const job = store.jobs.get(jobId);
    if (job === undefined || job.status !== 'PENDING') return;
    const model = store.models.get(job.model_id);
    if (model === undefined) return;
    const step = model.latest_step + 1;
    const relativeOutput = join('weights', model.id, `step-${step}`);
    const outputPath = resolve(dataDir, relativeOutput);
    if (!store.jobs.markRunning(jobId, relativeOutput)) return;

    const controller = new AbortController();
    const timeoutMs = this.options.jobTimeoutMs ?? 6 * 60 * 60 * 1000;
    const timer = setTimeout(
      () =>
        controller.abort(
          new Error(`The job did not finish within ${timeoutMs} ms (the service's jobTimeoutMs) and was stopped`),
        ),
      timeoutMs,
    );
    let markDone = (): void => undefined;
    const done = new Promise<void>((resolveDone) => {
      markDone = resolveDone;
    });
    this.running.set(jobId, { modelId: model.id, outputPath, controller, done });
    let finished = false;
    const onEvent = (event: EngineTrainingEvent): void => {
      // Events after the job settled (a misbehaving engine) must not follow the terminal event.
      if (finished || !store.isOpen) return;
      if (event.type === 'training_started') {
        const numSequences = event.data.num_sequences;
        store.jobs.recordProgress(jobId, 'training_started', {
          num_sequences: Number.isInteger(numSequences) ? numSequences : 0,
        });
      } else if (event.type === 'gradient_step') {
        store.jobs.recordProgress(jobId, 'gradient_step', finiteNumbers(event.data));
      }
    };
    logger.info(`job ${jobId} (${job.kind}) of model ${model.id} started: step ${step}`);
    try {
      await rm(outputPath, { recursive: true, force: true });
      await mkdir(dirname(outputPath), { recursive: true });
      const newest = store.checkpoints.newest(model.id);
      const policy = policyRef(dataDir, model, newest);
      const request: unknown = JSON.parse(job.request);
      let engineJob: EngineTrainingJob;
      if (job.kind === 'rl') {
        const body = CreateTrainingJob.parse(request);
        engineJob = {
          kind: 'rl',
          modelId: model.id,
          policy,
          outputPath,
          step,
          trajectoryGroups: body.trajectory_groups,
          config: body.experimental_config ?? null,
          klReference: klReferenceOf(
            body.experimental_config ?? null,
            store.checkpoints.all(model.id),
            newest?.step ?? 0,
            dataDir,
          ),
        };
      } else {
        const body = CreateSFTTrainingJob.parse(request);
        const rows = await loadTrainingData(body.training_data_url, {
          access: this.options.trainingDataAccess ?? resolveTrainingDataAccess({ dataDir }),
          signal: controller.signal,
          maxBytes: this.options.maxTrainingDataBytes,
        });
        engineJob = { kind: 'sft', modelId: model.id, policy, outputPath, step, rows, config: body.config ?? null };
      }
      controller.signal.throwIfAborted();
      // An engine that ignores the abort must not keep the job RUNNING forever: after a grace
      // period for it to let go of its files, stop waiting for it.
      const result = await raceSignal(
        engine.train(engineJob, { onEvent, signal: controller.signal }),
        abortedLater(controller.signal, this.options.engineStopGraceMs ?? ENGINE_STOP_GRACE_MS),
      );
      controller.signal.throwIfAborted();
      // A checkpoint row must never point at nothing: inference would fail on it later.
      if (!existsSync(outputPath))
        throw new Error(`The engine finished without writing the checkpoint directory ${outputPath}`);
      finished = true;
      if (
        !store.isOpen ||
        !store.jobs.complete(jobId, { step, metrics: finiteNumbers(result.metrics), path: relativeOutput })
      ) {
        await rm(outputPath, { recursive: true, force: true });
        return;
      }
      logger.info(`job ${jobId} completed: checkpoint step ${step}`);
    } catch (error) {
      finished = true;
      const message = controller.signal.aborted ? describe(controller.signal.reason) : describe(error);
      if (store.isOpen) store.jobs.fail(jobId, message);
      logger.warn(`job ${jobId} failed: ${message}`);
      await rm(outputPath, { recursive: true, force: true }).catch(() => undefined);
    } finally {
      clearTimeout(timer);
      this.running.delete(jobId);
      markDone();
    }
  }
}

/** Keeps the finite numbers of a metrics map (events and checkpoint metrics carry numbers only). */
function finiteNumbers(data: Readonly<Record<string, unknown>>): Record<string, number> {
  const numbers: Record<string, number> = {};
  for (const [name, value] of Object.entries(data)) {
    if (typeof value === 'number' && Number.isFinite(value)) numbers[name] = value;
    else if (typeof value === 'boolean') numbers[name] = Number(value);
  }
  return numbers;
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/** A signal that aborts `delayMs` after `signal` does, with its reason (unref'd: it never keeps the process alive). */
function abortedLater(signal: AbortSignal, delayMs: number): AbortSignal {
  const later = new AbortController();
  signal.addEventListener(
    'abort',
    () => {
      const timer = setTimeout(() => later.abort(signal.reason), delayMs);
      timer.unref();
    },
    { once: true },
  );
  return later.signal;
}

async function settleWithin(promises: readonly Promise<void>[], timeoutMs: number): Promise<void> {
  if (promises.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolveTimeout) => {
    timer = setTimeout(resolveTimeout, timeoutMs);
  });
  await Promise.race([Promise.allSettled(promises), timeout]);
  clearTimeout(timer);
}
