/** The client of the training API. */
import { z } from 'zod';
import { SystemCheckReport } from '../schema/index.js';
import { DEFAULT_BASE_URL, DEFAULT_INFERENCE_BASE_URL, ENV, readEnv, resolveApiKey } from '../internal/env.js';
import { MissingApiKeyError } from './errors.js';
import type { ClientOptions, RequestOptions } from './options.js';
import { BaseModels } from './resources/base-models.js';
import { Checkpoints } from './resources/checkpoints.js';
import { Inference } from './resources/inference.js';
import { Jobs } from './resources/jobs.js';
import { Local } from './resources/local.js';
import { Models } from './resources/models.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { INITIAL_RETRY_DELAY_MS } from './retry-delay.js';
import { Transport } from './transport.js';
import { normalizeBaseURL } from './url.js';

export { DEFAULT_BASE_URL, DEFAULT_INFERENCE_BASE_URL } from '../internal/env.js';
/** Time allowed per attempt, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** Retries after the first attempt. */
export const DEFAULT_MAX_RETRIES = 2;

const AnyJSON = z.unknown();

/**
 * The checks of the client's `timeout`, `maxRetries` and `retryDelay`, with their defaults: one
 * declaration for the client and for the backends that make one (their options pick these three
 * from {@link ClientOptions}, docs included).
 */
export const clientRetryShape = {
  timeout: option.timeout().default(DEFAULT_TIMEOUT_MS),
  maxRetries: option.retryCount().default(DEFAULT_MAX_RETRIES),
  retryDelay: option.retryDelay().default(INITIAL_RETRY_DELAY_MS),
};

/**
 * The check of {@link ClientOptions}, with the defaults that need no environment (the key and
 * the URLs resolve option > environment variable > default, in the constructor).
 */
const ClientOptionsSchema = optionsSchema<ClientOptions>()({
  apiKey: option.string().optional(),
  baseURL: option.string().optional(),
  inferenceBaseURL: option.string().optional(),
  ...clientRetryShape,
  fetch: option.function<typeof fetch>().optional(),
  defaultHeaders: z.record(z.string(), z.string()).default({}),
});

/**
 * A typed client for any service that implements the training API contract: the hosted
 * W&B / CoreWeave Serverless Training API or the local service of `policyloop/server`.
 * Settings resolve explicit option > environment variable > default.
 * @example
 * const client = new TrainingClient({ baseURL: 'http://127.0.0.1:8000/v1', apiKey: 'local' });
 * const model = await client.models.create({
 *   project: 'demo', name: 'agent', base_model: 'policyloop/tiny', return_existing: true,
 * });
 * for await (const checkpoint of client.checkpoints.list(model.id)) console.log(checkpoint.step);
 */
export class TrainingClient {
  /** Base URL of the training API, normalised to end in `/v1`. */
  readonly baseURL: string;
  /** Base URL of the inference API, normalised to end in `/v1`. */
  readonly inferenceBaseURL: string;
  /** Time allowed per attempt, in milliseconds. */
  readonly timeout: number;
  /** Retries after the first attempt. */
  readonly maxRetries: number;
  /** First wait between attempts, in milliseconds (doubles after). */
  readonly retryDelay: number;
  /** The trainable base models. */
  readonly baseModels: BaseModels;
  /** Trainable models: register, delete, log. */
  readonly models: Models;
  /** A model's checkpoints: list, delete. */
  readonly checkpoints: Checkpoints;
  /** Training jobs: start RL and SFT, read, follow events. */
  readonly jobs: Jobs;
  /** The inference API (`GET /v1/models`). */
  readonly inference: Inference;
  /**
   * The local service's own routes (`/v1/local/...`): models with their latest step, step
   * metrics, a model's jobs and its logged trajectory groups. The hosted service answers 404.
   */
  readonly local: Local;
  // Private so that logging or inspecting the client never shows the key.
  readonly #apiKey: string;
  readonly #transport: Transport;

  /**
   * @throws {MissingApiKeyError} when no key is given and neither `POLICYLOOP_API_KEY` nor
   *   `WANDB_API_KEY` is set.
   * @throws {InvalidArgumentError} for a malformed base URL, timeout or retry count, or a key
   *   that is no option (naming the nearest one).
   */
  constructor(clientOptions?: ClientOptions) {
    const options = parseOptions(ClientOptionsSchema, clientOptions);
    const apiKey = resolveApiKey(options.apiKey);
    if (apiKey === undefined) throw new MissingApiKeyError();
    this.#apiKey = apiKey;
    this.baseURL = normalizeBaseURL(nonEmpty(options.baseURL) ?? readEnv(ENV.baseURL) ?? DEFAULT_BASE_URL, 'baseURL');
    this.inferenceBaseURL = normalizeBaseURL(
      nonEmpty(options.inferenceBaseURL) ?? readEnv(ENV.inferenceBaseURL) ?? DEFAULT_INFERENCE_BASE_URL,
      'inferenceBaseURL',
    );
    this.timeout = options.timeout;
    this.maxRetries = options.maxRetries;
    this.retryDelay = options.retryDelay;
    const injected = options.fetch;
    this.#transport = new Transport({
      apiKey,
      baseURL: this.baseURL,
      timeout: this.timeout,
      maxRetries: this.maxRetries,
      retryDelay: this.retryDelay,
      // Looked up at call time, so that a `fetch` patched after construction is used.
      fetch: injected ?? ((input, init) => globalThis.fetch(input, init)),
      defaultHeaders: options.defaultHeaders,
    });
    this.baseModels = new BaseModels(this.#transport);
    this.models = new Models(this.#transport);
    this.checkpoints = new Checkpoints(this.#transport);
    this.jobs = new Jobs(this.#transport);
    this.inference = new Inference(this.#transport, this.inferenceBaseURL);
    this.local = new Local(this.#transport);
  }

  /** The API key in use (a getter, so that it does not show when the client is logged). */
  get apiKey(): string {
    return this.#apiKey;
  }

  /**
   * Liveness (`GET /v1/health`); resolves to whatever JSON the service returns.
   * @example
   * await client.health({ timeout: 2_000, maxRetries: 0 });
   */
  async health(options?: RequestOptions): Promise<unknown> {
    return this.#transport.request(
      { method: 'GET', path: '/health', template: '/health', response: AnyJSON, responseName: 'JSON' },
      options,
    );
  }

  /**
   * Readiness of the service's parts (`GET /v1/system-check`). Any JSON is accepted (the contract
   * gives the 200 an empty schema); the checks the service description names (`api`, `database`,
   * `cpu_queue`, `gpu_queue`) are typed, each optional. When a check fails the service answers
   * 503, which rejects with an `InternalServerError` whose `body` holds the checks.
   * Like every GET it is retried on 5xx; pass `{ maxRetries: 0 }` for a quick answer.
   * @example
   * try {
   *   const checks = await client.systemCheck({ maxRetries: 0 });
   * } catch (error) {
   *   if (error instanceof InternalServerError) console.log(error.body);
   * }
   */
  async systemCheck(options?: RequestOptions): Promise<SystemCheckReport> {
    return this.#transport.request(
      {
        method: 'GET',
        path: '/system-check',
        template: '/system-check',
        response: SystemCheckReport,
        responseName: 'JSON',
      },
      options,
    );
  }

  /** Keeps the key out of `util.inspect` / `console.log` output. */
  [Symbol.for('nodejs.util.inspect.custom')](): object {
    return {
      baseURL: this.baseURL,
      inferenceBaseURL: this.inferenceBaseURL,
      timeout: this.timeout,
      maxRetries: this.maxRetries,
      retryDelay: this.retryDelay,
    };
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed === undefined || trimmed === '' ? undefined : trimmed;
}
