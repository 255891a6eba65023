/** The one interface both backends implement: where the training API is and how to reach it. */
import type { TrainingClient } from '../client/index.js';

/** A live connection to a training service. */
export interface BackendConnection {
  /** Typed client of the training API. */
  readonly client: TrainingClient;
  /** Base URL of the training API, ending in `/v1`. */
  readonly baseURL: string;
  /** Base URL for OpenAI-compatible chat completions (`<inferenceBaseURL>/chat/completions`). */
  readonly inferenceBaseURL: string;
  /** Bearer key for both. */
  readonly apiKey: string;
  /** The `fetch` used for both, when one was injected (tests, proxies). */
  readonly fetch?: typeof globalThis.fetch | undefined;
  /**
   * Whether the service is known to honour `Idempotency-Key` on its POSTs (the local service
   * does). Only then are training-job requests retried: a retry the service cannot recognise could
   * start a second job.
   * @default false
   */
  readonly honoursIdempotencyKeys?: boolean | undefined;
  /**
   * Whether the service answers the local-only routes under `/v1/local/` (metrics by step, logged
   * groups): `true` for the local service, `false` for the hosted one; when not set, a model
   * asks the service once (a 404 means no) and remembers the answer.
   * @default undefined (ask the service)
   */
  readonly localRoutes?: boolean | undefined;
}

/**
 * A training service a {@link TrainableModel} registers with: the embedded local service
 * ({@link LocalBackend}) or the hosted one ({@link HostedBackend}). Switching is a one-line change.
 */
export interface Backend {
  /** `'local'` or `'hosted'`: what kind of service this is (decides SFT data handling and defaults). */
  readonly kind: 'local' | 'hosted';
  /** Directory for the local files of models (history, spool, SFT data). */
  readonly dataDir: string;
  /** Connects (starting the local service on first use) and returns the connection. */
  connect(options?: { signal?: AbortSignal | undefined }): Promise<BackendConnection>;
  /**
   * The RL learning rate used when `train` is given none: the engine's tuned default on the local
   * backend, null (the service decides) on the hosted one.
   */
  defaultLearningRate(): Promise<number | null>;
  /**
   * A `training_data_url` the service can read for a JSONL file on this machine, or null when the
   * service cannot read local files (the hosted service: upload the file and pass its URL).
   */
  localFileUrl(file: string): string | null;
  /** Stops what the backend started (the local service); safe to call twice. */
  close(): Promise<void>;
}
