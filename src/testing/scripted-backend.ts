/**
 * A backend for testing training scripts without an engine: the real local service (routes,
 * SQLite store, job queue, events, checkpoints, history) in this process, over a scripted engine
 * that samples from a script and trains at once. Reached through an in-process `fetch` (no port),
 * or on loopback with `listen: true`.
 */
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { loadLocalService } from '../backends/local-backend.js';
import { TrainingClient } from '../client/index.js';
import { raceSignal } from '../internal/delay.js';
import { PolicyloopError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import type { Backend, BackendConnection, LossFn, TrainingJobs } from '../training/backend.js';
import { ServiceJobs } from '../training/service-jobs.js';
import {
  createScriptedEngine,
  type ScriptedEngine,
  type ScriptedSample,
  type ScriptedSampleRequest,
  type ScriptedTrain,
  type ScriptedTrainingJob,
} from './scripted-engine.js';

export type { ScriptedSample, ScriptedSampleRequest, ScriptedTrain, ScriptedTrainingJob };

/** Options of {@link ScriptedBackend}. */
export interface ScriptedBackendOptions {
  /**
   * What the model answers: a text, a `Choice`, a list of them (the k-th request with the same
   * messages gets entry `k % length`, so the rollouts of a group get different answers), or a
   * function of the request (its body, the step sampled from, which repeat of its messages).
   * @default `'scripted answer <repeat>'`
   */
  sample?: ScriptedSample | undefined;
  /**
   * Scripts each training job: returns metrics (over the defaults `loss` = 1 / (step + 1),
   * `grad_norm`, `num_trajectories`, `learning_rate`; they reach the history as `train/*`), throws
   * to fail the job, or waits to hold it running.
   * @default every job trains at once with the default metrics
   */
  train?: ScriptedTrain | undefined;
  /**
   * Base models a `TrainableModel` may register with.
   * @default the local engine's built-in ids: `policyloop/tiny-chat`, `policyloop/small-chat`, `policyloop/agent-chat`
   */
  baseModels?: readonly string[] | undefined;
  /**
   * Data directory of the service's store and checkpoints and of the models' local files. Give
   * the same one to a second backend to test a rerun (resume) over what the first left.
   * @default a temporary directory, removed by `close()`
   */
  dataDir?: string | undefined;
  /**
   * The RL learning rate of jobs given none (what `model.train` sends when neither it nor the
   * trainer names one); null sends none.
   * @default null
   */
  defaultLearningRate?: number | null | undefined;
  /**
   * Serve on a random loopback port (for code that reaches `model.inferenceBaseURL` with its own
   * HTTP client or from another process) instead of answering through the connection's
   * in-process `fetch`.
   * @default false
   */
  listen?: boolean | undefined;
  /**
   * Sees every request to the service first (to record requests or inject failures): it reaches
   * the service by calling `next(request)`, or answers itself.
   * @example
   * intercept: (request, next) => (request.url.endsWith('/log') ? Promise.resolve(new Response(null, { status: 503 })) : next(request))
   */
  intercept?: ((request: Request, next: (request: Request) => Promise<Response>) => Promise<Response>) | undefined;
}

/** What `createApp` or `serve` gave: how to reach the service, and how to stop it. */
interface Service {
  readonly baseURL: string;
  readonly apiKey: string;
  readonly fetch: typeof globalThis.fetch | undefined;
  close(): Promise<void>;
}

/** Where the in-process service pretends to be (never resolved: its `fetch` answers in-process). */
const IN_PROCESS_URL = 'http://scripted.policyloop.invalid/v1';

/**
 * A backend for fast tests of training scripts, with no engine: `TrainableModel.register`,
 * `model.openai()`/`model.fetch()` rollouts, `gatherTrajectoryGroups`, `model.train`,
 * `model.trainSFT`, `RLTrainer` (its loops, validation, retention, resume) and `model.history()`
 * run their real code against the real local service, whose engine answers from a script (with
 * logprobs) and trains at once. A step costs tens of milliseconds (docs/performance.md, "Scripted
 * backend"), most of it the job follower's wait between event polls. What the engine saw is kept:
 * {@link trainedJobs} (every job: its step, groups, learning rate) and {@link samples} (every
 * completion: the step it sampled from).
 * @example
 * import { ScriptedBackend } from 'policyloop/testing';
 * const backend = await ScriptedBackend.start({ sample: ['Paris', 'Lyon'] });
 * const model = await new TrainableModel({ project: 'test', name: 'capitals', baseModel: 'policyloop/tiny-chat' }).register(backend);
 * const summary = await new RLTrainer({ model, scenarios, rollout, reward, groupSize: 2, groupsPerStep: 2, maxSteps: 3 }).run();
 * expect(summary.step).toBe(3);
 * expect(backend.trainedJobs.map((job) => job.step)).toEqual([0, 1, 2]);
 * await model.close();
 * await backend.close();
 */
export class ScriptedBackend implements Backend {
  /** `'local'`: the service is the local one (it reads SFT data from this machine). */
  readonly kind = 'local' as const;
  /** The local backend's RL losses, as a stand-in for it. */
  readonly lossFns: readonly LossFn[] = ['cispo', 'ppo'];
  /** Absolute directory of the store, the checkpoints and the models' local files. */
  readonly dataDir: string;
  /** The training work on its service, as on the local backend. */
  readonly jobs: TrainingJobs = new ServiceJobs(this);
  private readonly options: ScriptedBackendOptions;
  private readonly engine: ScriptedEngine;
  private readonly ownDir: boolean;
  private connecting: Promise<{ service: Service; connection: BackendConnection }> | undefined;
  private closed = false;

  /**
   * A backend whose service starts on first use (or with {@link ScriptedBackend.start}).
   * @throws {InvalidArgumentError} for a bad option, before anything is made.
   */
  constructor(options: ScriptedBackendOptions = {}) {
    const { sample, baseModels } = parseOptions(ScriptedBackendSchema, options);
    this.options = options;
    this.ownDir = options.dataDir === undefined;
    this.dataDir = path.resolve(options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'policyloop-scripted-')));
    this.engine = createScriptedEngine({
      baseModels: baseModels ?? ['policyloop/tiny-chat', 'policyloop/small-chat', 'policyloop/agent-chat'],
      sample: sample ?? ((request) => `scripted answer ${request.repeat}`),
      train: options.train,
    });
  }

  /**
   * Creates a backend and starts its service.
   * @example
   * const backend = await ScriptedBackend.start({ sample: (request) => (request.step < 2 ? 'no' : 'yes') });
   */
  static async start(options: ScriptedBackendOptions = {}): Promise<ScriptedBackend> {
    const backend = new ScriptedBackend(options);
    try {
      await backend.connect();
    } catch (error) {
      await backend.close();
      throw error;
    }
    return backend;
  }

  /** Every training job the engine ran, in order (RL and SFT, every model's). */
  get trainedJobs(): readonly ScriptedTrainingJob[] {
    return this.engine.trainedJobs;
  }

  /** Every completion the engine answered, in order (one per choice), with the step it sampled from. */
  get samples(): readonly ScriptedSampleRequest[] {
    return this.engine.samples;
  }

  /** Starts the service once; later calls return the same connection. `signal` stops the wait only. */
  async connect(options: { signal?: AbortSignal | undefined } = {}): Promise<BackendConnection> {
    if (this.closed) throw new PolicyloopError('This ScriptedBackend is closed; create a new one.');
    this.connecting ??= this.open();
    return (await raceSignal(this.connecting, options.signal)).connection;
  }

  /** The `defaultLearningRate` option. */
  defaultLearningRate(): Promise<number | null> {
    return Promise.resolve(this.options.defaultLearningRate ?? null);
  }

  /** A `file://` URL: the in-process service reads SFT data from this machine's disk. */
  localFileUrl(file: string): string {
    return pathToFileURL(path.resolve(file)).href;
  }

  /** Stops the service (jobs still running fail) and removes the temporary data directory; safe to call twice. */
  async close(): Promise<void> {
    this.closed = true;
    const connecting = this.connecting;
    this.connecting = undefined;
    const started = await connecting?.catch(() => undefined);
    await started?.service.close();
    if (this.ownDir) await rm(this.dataDir, { recursive: true, force: true });
  }

  private async open(): Promise<{ service: Service; connection: BackendConnection }> {
    const service = await this.startService();
    if (this.closed) {
      await service.close();
      throw new PolicyloopError('This ScriptedBackend was closed while its service was starting.');
    }
    const client = new TrainingClient({
      apiKey: service.apiKey,
      baseURL: service.baseURL,
      inferenceBaseURL: service.baseURL,
      fetch: service.fetch,
    });
    const connection: BackendConnection = {
      client,
      baseURL: client.baseURL,
      inferenceBaseURL: client.baseURL,
      apiKey: service.apiKey,
      fetch: service.fetch,
      honoursIdempotencyKeys: true,
      localRoutes: true,
    };
    return { service, connection };
  }

  private async startService(): Promise<Service> {
    // Loaded on demand, as the local backend does: `policyloop/testing` stays light to import.
    const server = await loadLocalService();
    const given = this.options.intercept;
    if (this.options.listen === true) {
      const handle = await server.serve({ engine: this.engine, dataDir: this.dataDir, port: 0, host: '127.0.0.1' });
      const next = (request: Request): Promise<Response> => globalThis.fetch(request);
      return {
        baseURL: handle.baseURL,
        apiKey: handle.apiKey,
        fetch: given === undefined ? undefined : (input, init) => given(new Request(input, init), next),
        close: () => handle.close(),
      };
    }
    const app = await server.createApp({ engine: this.engine, dataDir: this.dataDir });
    // The service's own handler, without a socket; a caller's abort rejects at once, as a fetch
    // does. Each request first yields to the event loop, as a socket would: with a synchronous
    // store and an engine that does no I/O, a loop of requests would otherwise run on microtasks
    // alone and starve every timer (timeouts, aborts, a test runner's own limit).
    const answer = async (request: Request): Promise<Response> => {
      await new Promise((resolve) => setImmediate(resolve));
      // Aborted while it waited: never sent, as a socket would not have sent it.
      request.signal.throwIfAborted();
      return app.fetch(request);
    };
    const next = (request: Request): Promise<Response> => raceSignal(answer(request), request.signal);
    const direct: typeof globalThis.fetch = (input, init) => {
      const request = new Request(input, init);
      return given === undefined ? next(request) : given(request, next);
    };
    return { baseURL: IN_PROCESS_URL, apiKey: server.DEV_API_KEY, fetch: direct, close: () => app.close() };
  }
}

/** `sample`: a text, a Choice, a non-empty list of them, or a function. */
/** A text, or a Choice-like object with a `message`. */
function isOneSample(value: unknown): boolean {
  return typeof value === 'string' || (typeof value === 'object' && value !== null && 'message' in value);
}

const ScriptedBackendSchema = optionsSchema<ScriptedBackendOptions>()({
  sample: option
    .like<ScriptedSample>(
      (value) =>
        typeof value === 'function' ||
        isOneSample(value) ||
        (Array.isArray(value) && value.length > 0 && value.every(isOneSample)),
      'a text, a Choice, a non-empty array of them, or a function of the request',
    )
    .optional(),
  train: option.function<ScriptedTrain>().optional(),
  baseModels: z
    .array(option.nonEmptyString())
    .nonempty({ error: 'a non-empty array of base model ids' })
    .readonly()
    .optional(),
  dataDir: option.nonEmptyString().optional(),
  defaultLearningRate: z.union([z.null(), option.number({ min: 0, exclusiveMin: true })]).optional(),
  listen: option.boolean().optional(),
  intercept: option.function<NonNullable<ScriptedBackendOptions['intercept']>>().optional(),
});
