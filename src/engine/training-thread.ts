/**
 * The engine's side of the training worker thread: starts it (from TS sources through tsx, or
 * from compiled JS), hands it jobs and relays their events.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { WorkerOptions } from 'node:worker_threads';
import type { TrainingRequest, TrainingResponse } from './training-protocol.js';
import type { EngineTrainingEvent, EngineTrainingJob, EngineTrainingResult } from './types.js';

interface RunningJob {
  readonly onEvent: (event: EngineTrainingEvent) => void;
  readonly resolve: (result: EngineTrainingResult) => void;
  readonly reject: (error: Error) => void;
}

/**
 * A worker thread running the TypeScript module `entry` from sources (tsx, vitest, benchmarks): a
 * worker does not inherit the parent's loader, so it first registers tsx (a devDependency) and
 * then imports the entry point.
 */
export function typeScriptWorker(entry: URL, options?: WorkerOptions): Worker {
  const tsxApi = createRequire(import.meta.url)
    .resolve('tsx/esm/api')
    .replace(/\.cjs$/, '.mjs');
  const bootstrap = `import { register } from ${JSON.stringify(pathToFileURL(tsxApi).href)};\nregister();\nawait import(${JSON.stringify(entry.href)});\n`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(bootstrap)}`), options);
}

function startWorker(): Worker {
  const fromSources = import.meta.url.endsWith('.ts');
  if (!fromSources) return new Worker(new URL('./training-worker.js', import.meta.url));
  return typeScriptWorker(new URL('./training-worker.ts', import.meta.url));
}

/** A training worker thread that runs jobs one at a time. */
export class TrainingThread {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly running = new Map<number, RunningJob>();
  private closing = false;

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = startWorker();
    worker.on('message', (message: TrainingResponse) => {
      const job = this.running.get(message.id);
      if (!job) return;
      if (message.type === 'event') {
        job.onEvent(message.event);
        return;
      }
      this.running.delete(message.id);
      if (this.running.size === 0) worker.unref();
      if (message.type === 'done') job.resolve(message.result);
      else job.reject(new Error(message.message));
    });
    const failAll = (error: Error): void => {
      if (this.worker === worker) this.worker = null;
      for (const job of this.running.values()) job.reject(error);
      this.running.clear();
    };
    worker.on('error', (error) => failAll(new Error(`The training worker crashed: ${error.message}`)));
    worker.on('exit', (code) =>
      failAll(
        new Error(
          this.closing
            ? 'The engine was closed while the training job ran.'
            : `The training worker exited with code ${code} before the job ended.`,
        ),
      ),
    );
    worker.unref();
    this.worker = worker;
    return worker;
  }

  /**
   * Runs a job in the worker (on the Hugging Face model in `modelDirectory` when given). Aborting
   * `signal` cancels it between gradient passes.
   */
  run(
    job: EngineTrainingJob,
    onEvent: (event: EngineTrainingEvent) => void,
    signal?: AbortSignal,
    modelDirectory: string | null = null,
  ): Promise<EngineTrainingResult> {
    if (this.closing) return Promise.reject(new Error('The training thread is closed.'));
    if (signal?.aborted) return Promise.reject(new Error('The training job was cancelled before it started.'));
    const worker = this.ensureWorker();
    const id = this.nextId;
    this.nextId += 1;
    return new Promise<EngineTrainingResult>((resolve, reject) => {
      const onAbort = (): void => worker.postMessage({ type: 'cancel', id } satisfies TrainingRequest);
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = (): void => signal?.removeEventListener('abort', onAbort);
      this.running.set(id, {
        onEvent,
        resolve: (result) => {
          done();
          resolve(result);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      });
      worker.ref();
      worker.postMessage({ type: 'train', id, job, modelDirectory } satisfies TrainingRequest);
    });
  }

  /** Stops the worker thread; running jobs fail with a message that says the engine was closed. */
  async close(): Promise<void> {
    this.closing = true;
    const worker = this.worker;
    if (worker) await worker.terminate();
    this.worker = null;
  }
}
