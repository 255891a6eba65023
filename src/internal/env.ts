/**
 * The one place environment variables are read, so that every setting resolves the same way:
 * explicit option > environment variable > documented default.
 */

/** Names of the environment variables policyloop reads. */
export const ENV = {
  /** Our own API key variable; wins over `WANDB_API_KEY`. */
  apiKey: 'POLICYLOOP_API_KEY',
  /** The hosted service's conventional API key variable (a W&B API key). */
  wandbApiKey: 'WANDB_API_KEY',
  /** Base URL of the training API. */
  baseURL: 'POLICYLOOP_BASE_URL',
  /** Base URL of the inference API (`GET /v1/models`). */
  inferenceBaseURL: 'POLICYLOOP_INFERENCE_BASE_URL',
  /** Base URL of a Tinker server (`TinkerBackend`), as the Tinker SDK reads it. */
  tinkerBaseURL: 'TINKER_BASE_URL',
  /** A Tinker API key (`TinkerBackend`), as the Tinker SDK reads it. */
  tinkerApiKey: 'TINKER_API_KEY',
  /** The OpenAI-compatible endpoint's key of a prompted (baseline) model. */
  openAIApiKey: 'OPENAI_API_KEY',
} as const;

/**
 * The default data directory of the models' local files and of the local service's store,
 * relative to the working directory.
 */
export const DEFAULT_DATA_DIR = '.policyloop';
/** The hosted training API. */
export const DEFAULT_BASE_URL = 'https://api.training.wandb.ai/v1';
/** The hosted inference API. */
export const DEFAULT_INFERENCE_BASE_URL = 'https://api.inference.wandb.ai/v1';

/**
 * The value of environment variable `name`, trimmed; `undefined` when unset, blank, or when there
 * is no `process` (browsers, some edge runtimes).
 * @example
 * const steps = readEnv('POLICYLOOP_EXAMPLE_STEPS') ?? '60';
 */
export function readEnv(name: string): string | undefined {
  const value = globalThis.process?.env?.[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/**
 * The training service's API key: `explicit` when it is not blank (trimmed), else
 * `POLICYLOOP_API_KEY`, else `WANDB_API_KEY`; `undefined` when none is set.
 */
export function resolveApiKey(explicit: string | undefined): string | undefined {
  const given = explicit?.trim();
  if (given !== undefined && given !== '') return given;
  return readEnv(ENV.apiKey) ?? readEnv(ENV.wandbApiKey);
}

/**
 * Where a connection to a training service goes: `baseURL`, else `POLICYLOOP_BASE_URL`, else the
 * hosted training API; the inference API (the model list) at `inferenceBaseURL`, else
 * `POLICYLOOP_INFERENCE_BASE_URL`, else the hosted inference API on the hosted service and the
 * training URL on any other (the local service answers both).
 */
export function resolveServiceURLs(explicit: { baseURL?: string | undefined; inferenceBaseURL?: string | undefined }): {
  baseURL: string;
  inferenceBaseURL: string;
} {
  const baseURL = explicit.baseURL ?? readEnv(ENV.baseURL) ?? DEFAULT_BASE_URL;
  const inferenceBaseURL =
    explicit.inferenceBaseURL ??
    readEnv(ENV.inferenceBaseURL) ??
    (baseURL === DEFAULT_BASE_URL ? DEFAULT_INFERENCE_BASE_URL : baseURL);
  return { baseURL, inferenceBaseURL };
}
