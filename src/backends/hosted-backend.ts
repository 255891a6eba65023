/**
 * The hosted backend: the W&B / CoreWeave Serverless Training service (or any service speaking
 * the contract), reached by base URL and API key.
 */
import { TrainingClient } from '../client/index.js';
import { DEFAULT_DATA_DIR, resolveApiKey, resolveServiceURLs } from '../internal/env.js';
import { PolicyloopError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import path from 'node:path';
import type { Backend, BackendConnection, LossFn, TrainingJobs } from '../training/backend.js';
import { ServiceJobs } from '../training/service-jobs.js';
import { type ServiceClientOptions, serviceClientShape } from './backend-options.js';

/** Options of {@link HostedBackend}; `timeout`, `maxRetries`, `retryDelay` and `fetch` are its client's. */
export interface HostedBackendOptions extends ServiceClientOptions {
  /**
   * A W&B API key.
   * @default process.env.POLICYLOOP_API_KEY, else process.env.WANDB_API_KEY
   */
  apiKey?: string | undefined;
  /**
   * Base URL of the training API.
   * @default process.env.POLICYLOOP_BASE_URL, else 'https://api.training.wandb.ai/v1'
   */
  baseURL?: string | undefined;
  /**
   * Base URL for chat completions of the trained models (`model.openai()`, `model.fetch()`). The
   * hosted service serves them on the training host.
   * @default the training API's base URL
   */
  inferenceBaseURL?: string | undefined;
  /**
   * Base URL of the W&B Inference API, where `client.inference.models.list()` goes
   * (`GET /models`, with the optional `OpenAI-Project` header). The training API has no model list.
   * @default process.env.POLICYLOOP_INFERENCE_BASE_URL, else 'https://api.inference.wandb.ai/v1'
   * for the hosted training URL, else `baseURL` (a service speaking the contract answers both)
   */
  inferenceApiBaseURL?: string | undefined;
  /**
   * Directory for the models' local files (history, spool).
   * @default '.policyloop'
   */
  dataDir?: string | undefined;
}

/** The check of {@link HostedBackendOptions}, made at construction. */
const HostedBackendOptionsSchema = optionsSchema<HostedBackendOptions>()({
  apiKey: option.string().optional(),
  baseURL: option.string().optional(),
  inferenceBaseURL: option.string().optional(),
  inferenceApiBaseURL: option.string().optional(),
  dataDir: option.nonEmptyString().default(DEFAULT_DATA_DIR),
  ...serviceClientShape,
});

/**
 * The hosted training service as a backend. The key is checked at construction, so a missing
 * `WANDB_API_KEY` fails before anything runs.
 * @example
 * const backend = new HostedBackend(); // reads WANDB_API_KEY
 * const model = new TrainableModel({ project: 'demo', name: 'agent', baseModel: 'OpenPipe/Qwen3-14B-Instruct' });
 * await model.register(backend);
 */
export class HostedBackend implements Backend {
  /** Always `'hosted'`. */
  readonly kind = 'hosted' as const;
  /** The hosted service's RL losses (its contract's `loss_fn`): `cispo` (its default) and `ppo`. */
  readonly lossFns: readonly LossFn[] = ['cispo', 'ppo'];
  /** Absolute directory of the models' local files. */
  readonly dataDir: string;
  /** The training work on its service (jobs sent, retried where the service honours keys, followed). */
  readonly jobs: TrainingJobs = new ServiceJobs(this);
  private readonly connection: BackendConnection;

  /**
   * @throws {InvalidArgumentError} for a bad option, or a key that is no option (naming the nearest one).
   * @throws {PolicyloopError} when no API key is given or set in the environment.
   */
  constructor(hostedOptions?: HostedBackendOptions) {
    const options = parseOptions(HostedBackendOptionsSchema, hostedOptions);
    const apiKey = resolveApiKey(options.apiKey);
    if (apiKey === undefined) {
      throw new PolicyloopError(
        'No API key for the hosted service: set the WANDB_API_KEY environment variable (a W&B API key, ' +
          'https://wandb.ai/authorize) or pass `new HostedBackend({ apiKey })`.',
      );
    }
    // Two hosts: the model list is on the inference API, trained models answer on the training host.
    const { baseURL, inferenceBaseURL: inferenceApiBaseURL } = resolveServiceURLs({
      baseURL: options.baseURL,
      inferenceBaseURL: options.inferenceApiBaseURL,
    });
    const client = new TrainingClient({
      apiKey,
      baseURL,
      inferenceBaseURL: inferenceApiBaseURL,
      fetch: options.fetch,
      timeout: options.timeout,
      maxRetries: options.maxRetries,
      retryDelay: options.retryDelay,
    });
    const inferenceBaseURL = options.inferenceBaseURL ?? client.baseURL;
    // Nothing says the hosted service honours Idempotency-Key (docs/hosted.md): no job POST is retried.
    // The hosted service has no `/v1/local/` routes: history stays in `history.jsonl`.
    this.connection = {
      client,
      baseURL: client.baseURL,
      inferenceBaseURL,
      apiKey,
      fetch: options.fetch,
      honoursIdempotencyKeys: false,
      localRoutes: false,
    };
    this.dataDir = path.resolve(options.dataDir);
  }

  /** The connection (nothing to start). */
  connect(): Promise<BackendConnection> {
    return Promise.resolve(this.connection);
  }

  /** Null: the hosted service applies its own default (5e-6, tuned for LoRA on large models). */
  defaultLearningRate(): Promise<number | null> {
    return Promise.resolve(null);
  }

  /** Null: the hosted service cannot read this machine's files; upload SFT data and pass its URL. */
  localFileUrl(): null {
    return null;
  }

  /** Nothing to stop. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
