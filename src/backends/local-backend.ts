/**
 * The local backend: the embedded training service, started in-process on a random loopback port
 * (or a running one, by URL). The service module is loaded with a dynamic `import()`, so scripts
 * that only use the hosted backend never load its heavy dependencies.
 */
import { TrainingClient } from '../client/index.js';
import { DEFAULT_DATA_DIR, ENV, readEnv } from '../internal/env.js';
import { raceSignal } from '../internal/delay.js';
import { PolicyloopError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import type { Backend, BackendConnection, LossFn, TrainingJobs } from '../training/backend.js';
import { ServiceJobs } from '../training/service-jobs.js';
import {
  type InProcessServiceOptions,
  inProcessServiceShape,
  type ServiceClientOptions,
  serviceClientShape,
} from './backend-options.js';

/** Options of {@link LocalBackend}; `timeout`, `maxRetries`, `retryDelay` and `fetch` are its client's, `port` its service's. */
export interface LocalBackendOptions extends ServiceClientOptions, InProcessServiceOptions {
  /**
   * Directory for the service's store and weights (when started here) and for the models' local
   * files (history, spool, SFT data).
   * @default '.policyloop'
   */
  dataDir?: string | undefined;
  /**
   * URL of a local service that is already running (e.g. `policyloop serve`), instead of starting
   * one in-process. `/v1` is appended when missing.
   */
  url?: string | undefined;
  /**
   * Key of the running service at `url`. A service started here makes its own key.
   * @default process.env.POLICYLOOP_API_KEY, else the local service's development key
   */
  apiKey?: string | undefined;
  /**
   * Hugging Face model folders the in-process service serves besides those of the Hugging Face
   * cache (the same as `policyloop serve --model DIR`). @default []
   */
  models?: readonly string[] | undefined;
  /**
   * Extra options handed to the local service's `serve()` (e.g. an `engine` for tests); `serve()`
   * checks them when the service starts.
   */
  serviceOptions?: Record<string, unknown> | undefined;
}

/** The check of {@link LocalBackendOptions}, made at construction, before anything starts. */
const LocalBackendOptionsSchema = optionsSchema<LocalBackendOptions>()({
  dataDir: option.nonEmptyString().default(DEFAULT_DATA_DIR),
  url: option.string().optional(),
  apiKey: option.string().optional(),
  models: z.array(option.string()).readonly().optional(),
  serviceOptions: option.options<Record<string, unknown>>().optional(),
  ...serviceClientShape,
  ...inProcessServiceShape,
});

/** What the local service's `serve()` returns (the part used here). */
interface ServiceHandle {
  readonly baseURL: string;
  readonly apiKey: string;
  close(): Promise<void>;
}

/**
 * The embedded local service as a backend. The service starts on first use (or with
 * {@link LocalBackend.start}); {@link LocalBackend.close} stops it.
 * @example
 * const backend = await LocalBackend.start({ dataDir: '.policyloop' });
 * const model = new TrainableModel({ project: 'demo', name: 'agent', baseModel: 'policyloop/tiny-chat' });
 * await model.register(backend);
 * // ... gather, train ...
 * await model.close();
 * await backend.close();
 */
export class LocalBackend implements Backend {
  /** Always `'local'`. */
  readonly kind = 'local' as const;
  /** The local engine's RL losses: `cispo` (its default) and `ppo`. */
  readonly lossFns: readonly LossFn[] = ['cispo', 'ppo'];
  /** Absolute directory of the store and of the models' local files. */
  readonly dataDir: string;
  /** The training work on its service (jobs sent, retried where the service honours keys, followed). */
  readonly jobs: TrainingJobs = new ServiceJobs(this);
  private readonly options: z.output<typeof LocalBackendOptionsSchema>;
  private connecting: Promise<BackendConnection> | undefined;
  private service: ServiceHandle | undefined;
  private closed = false;

  /** @throws {InvalidArgumentError} for a bad option, or a key that is no option (naming the nearest one). */
  constructor(options?: LocalBackendOptions) {
    // The client is made when the service starts: its options are checked here, before anything starts.
    this.options = parseOptions(LocalBackendOptionsSchema, options);
    this.dataDir = path.resolve(this.options.dataDir);
  }

  /**
   * Creates a backend and connects at once (starting the in-process service).
   * @example
   * const backend = await LocalBackend.start();
   */
  static async start(options: LocalBackendOptions = {}): Promise<LocalBackend> {
    const backend = new LocalBackend(options);
    await backend.connect();
    return backend;
  }

  /**
   * Starts (or reaches) the service once; later calls return the same connection. `signal` stops
   * the wait only: a start under way goes on, for the next call (and `close()` stops it).
   */
  connect(options: { signal?: AbortSignal | undefined } = {}): Promise<BackendConnection> {
    if (this.closed) return Promise.reject(new PolicyloopError('This LocalBackend is closed; create a new one.'));
    this.connecting ??= this.open();
    return raceSignal(this.connecting, options.signal);
  }

  /** Base URL of the training API (ends in `/v1`); throws before {@link connect}. */
  get baseURL(): string {
    if (this.service !== undefined) return this.service.baseURL;
    if (this.options.url !== undefined) return this.options.url;
    throw new PolicyloopError('The local service is not started yet: `await backend.connect()` first.');
  }

  /**
   * The address of the service's dashboard (reward curves, jobs, trajectories), with the key in
   * the URL fragment (which the browser never sends to the server) so that the page opens signed
   * in. Throws before {@link connect}.
   * @example
   * const backend = await LocalBackend.start();
   * console.log(`watch it train: ${await backend.dashboardURL()}`);
   */
  async dashboardURL(): Promise<string> {
    const { apiKey } = await this.connect();
    return `${new URL(this.baseURL).origin}/#key=${encodeURIComponent(apiKey)}`;
  }

  /**
   * The engine's tuned RL learning rate (`DEFAULT_LEARNING_RATE` of the engine, documented in
   * docs/engine.md), read at run time from the engine the in-process service already loaded.
   * Null for a service reached by URL: it applies its own default (the same number) itself.
   */
  async defaultLearningRate(): Promise<number | null> {
    if (this.options.url !== undefined) return null;
    try {
      const engine: Record<string, unknown> = await import('../engine/index.js');
      const value = engine['DEFAULT_LEARNING_RATE'];
      return typeof value === 'number' && Number.isFinite(value) ? value : null;
    } catch {
      return null;
    }
  }

  /** A `file://` URL: the local service reads SFT data from this machine's disk. */
  localFileUrl(file: string): string {
    return pathToFileURL(path.resolve(file)).href;
  }

  /** Stops the in-process service (a service reached by URL keeps running). */
  async close(): Promise<void> {
    this.closed = true;
    const service = this.service;
    this.service = undefined;
    if (service === undefined && this.connecting !== undefined) {
      // A start in progress: wait for it so that its port is not left open.
      const started = await this.connecting.then(
        () => this.service,
        () => undefined,
      );
      this.service = undefined;
      await started?.close();
      return;
    }
    await service?.close();
  }

  private async open(): Promise<BackendConnection> {
    let baseURL: string;
    let apiKey: string;
    if (this.options.url !== undefined) {
      baseURL = this.options.url;
      apiKey = this.options.apiKey ?? readEnv(ENV.apiKey) ?? (await developmentKey());
    } else {
      // Dynamic: hono, better-sqlite3 and tfjs load only when a local service is started.
      const server = await loadLocalService();
      const service: ServiceHandle = await server.serve({
        ...(this.options.models ? { models: this.options.models } : {}),
        ...this.options.serviceOptions,
        port: this.options.port,
        dataDir: this.dataDir,
      });
      if (this.closed) {
        await service.close();
        throw new PolicyloopError('This LocalBackend was closed while the service was starting.');
      }
      this.service = service;
      baseURL = service.baseURL;
      apiKey = service.apiKey;
    }
    const client = new TrainingClient({
      apiKey,
      baseURL,
      inferenceBaseURL: baseURL,
      fetch: this.options.fetch,
      timeout: this.options.timeout,
      maxRetries: this.options.maxRetries,
      retryDelay: this.options.retryDelay,
    });
    return {
      client,
      baseURL: client.baseURL,
      inferenceBaseURL: client.baseURL,
      apiKey,
      fetch: this.options.fetch,
      // The local service stores the answer to a key with the write it answers (docs/server.md).
      honoursIdempotencyKeys: true,
      localRoutes: true,
    };
  }
}

/** The local service's documented development key, for a service started without `--api-key`. */
async function developmentKey(): Promise<string> {
  const server = await loadLocalService();
  return server.DEV_API_KEY;
}

/** The local service's optional dependencies, as `npm install` names them. */
const LOCAL_SERVICE_PACKAGES = [
  'hono',
  '@hono/node-server',
  'better-sqlite3',
  '@tensorflow/tfjs-core',
  '@tensorflow/tfjs-backend-wasm',
  'p-queue',
];

/**
 * Loads `policyloop/server` on demand (hono, SQLite, the engine and the job queue are optional
 * dependencies, loaded only when a local service starts). When one of them is not installed (for
 * example after `npm install --omit=optional`), fails with a message that names what to install
 * instead of Node's bare "Cannot find package".
 */
export async function loadLocalService(): Promise<typeof import('../server/index.js')> {
  try {
    return await import('../server/index.js');
  } catch (error) {
    const missing = LOCAL_SERVICE_PACKAGES.find((name) => isMissingPackage(error, name));
    if (missing === undefined) throw error;
    throw new PolicyloopError(
      `The local service needs its optional dependencies, and \`${missing}\` is not installed. ` +
        `Install them with \`npm install ${LOCAL_SERVICE_PACKAGES.join(' ')}\` (or reinstall without ` +
        '`--omit=optional`), or use `HostedBackend` to train on the hosted service.',
      { cause: error },
    );
  }
}

function isMissingPackage(error: unknown, name: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : '';
  return code === 'ERR_MODULE_NOT_FOUND' && message.includes(`'${name}'`);
}
