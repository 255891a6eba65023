/** Options of the client and of each call, and the query parameters of the list calls. */
import type { CheckpointListQuery, EventListQuery, ListParams } from '../schema/index.js';

/** Options of `new TrainingClient(options)`. Each resolves explicit option > environment variable > default. */
export interface ClientOptions {
  /**
   * The API key, sent as `Authorization: Bearer <key>`.
   * @default process.env.POLICYLOOP_API_KEY, else process.env.WANDB_API_KEY; none is an error
   */
  apiKey?: string | undefined;
  /**
   * Base URL of the training API. `/v1` is appended when it does not end with it.
   * @default process.env.POLICYLOOP_BASE_URL, else 'https://api.training.wandb.ai/v1'
   */
  baseURL?: string | undefined;
  /**
   * Base URL of the inference API, used by `client.inference.models.list()` (`GET /v1/models`).
   * @default process.env.POLICYLOOP_INFERENCE_BASE_URL, else 'https://api.inference.wandb.ai/v1'
   */
  inferenceBaseURL?: string | undefined;
  /**
   * Time allowed for each attempt (request and response body), in milliseconds.
   * @default 60_000
   */
  timeout?: number | undefined;
  /**
   * Retries after the first attempt, for GET, DELETE and POSTs with an idempotency key.
   * @default 2
   */
  maxRetries?: number | undefined;
  /**
   * Wait before the first retry, in milliseconds; doubles with each further retry (capped at 8 s,
   * or at `retryDelay` when longer), less up to 25 % jitter. A `Retry-After` from the service wins.
   * @default 500
   */
  retryDelay?: number | undefined;
  /**
   * The `fetch` to use (tests inject one; also for proxies or custom agents).
   * @default globalThis.fetch
   */
  fetch?: typeof fetch | undefined;
  /**
   * Headers sent with every request (a call's own `headers` win).
   * @default {}
   */
  defaultHeaders?: Record<string, string> | undefined;
}

/** Per-call options, the last argument of every method; each overrides the client's setting. */
export interface RequestOptions {
  /** Aborts the call, including any wait between retries (rejects with `APIUserAbortError`). */
  signal?: AbortSignal | undefined;
  /**
   * Time allowed for each attempt, in milliseconds (rejects with `APIConnectionTimeoutError`).
   * @default the client's `timeout` (60_000)
   */
  timeout?: number | undefined;
  /**
   * Retries after the first attempt.
   * @default the client's `maxRetries` (2)
   */
  maxRetries?: number | undefined;
  /**
   * Wait before the first retry, in milliseconds (doubling after).
   * @default the client's `retryDelay` (500)
   */
  retryDelay?: number | undefined;
  /** Extra headers for this call (win over the client's and the defaults). */
  headers?: Record<string, string> | undefined;
  /**
   * Sent as `Idempotency-Key`. A POST carrying one is retried like a GET (without one, a POST
   * is never retried: it may already have taken effect).
   */
  idempotencyKey?: string | undefined;
}

/**
 * Query of `client.checkpoints.list`: `after`, `limit` (1..100; the service's default is 20) and
 * `order` (by step; the service's default is `asc`). Derived from `CheckpointListQuery`, the one
 * declaration the service parses with too.
 */
export type CheckpointListParams = ListParams<typeof CheckpointListQuery>;

/**
 * Query of `client.jobs.events`: `after`, `limit` and `wait_ms` (a long poll, 0..30000 ms: when no
 * event follows `after` yet, the local service answers at the job's next event or after this
 * long; other services ignore it and answer at once). Derived from `EventListQuery`.
 */
export type EventListParams = ListParams<typeof EventListQuery>;

/** Parameters of `client.inference.models.list`. */
export interface InferenceModelListParams {
  /** A W&B `team/project`, sent as the `OpenAI-Project` header (lists the project's models too). */
  project?: string | undefined;
}
