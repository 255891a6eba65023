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
} as const;

/**
 * The value of environment variable `name`, trimmed; `undefined` when unset, blank, or when there
 * is no `process` (browsers, some edge runtimes).
 * @example
 * const key = readEnv('POLICYLOOP_API_KEY') ?? readEnv('WANDB_API_KEY');
 */
export function readEnv(name: string): string | undefined {
  const value = globalThis.process?.env?.[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** The first of `names` that is set (see {@link readEnv}), with its name; `undefined` when none is. */
export function readFirstEnv(names: readonly string[]): { name: string; value: string } | undefined {
  for (const name of names) {
    const value = readEnv(name);
    if (value !== undefined) return { name, value };
  }
  return undefined;
}
