/**
 * The Tinker backend's internals, loaded by `TinkerBackend` when it connects (they need the
 * optional `@bufbuild/protobuf`): the wire client, the engine that serves the local service from a
 * Tinker server, and its errors.
 * @module
 */
import { TinkerClient } from './tinker-client.js';
import type { LoraSettings } from './tinker-client.js';
import { TinkerEngine } from './tinker-engine.js';

export { TinkerClient, TINKER_SDK_VERSION } from './tinker-client.js';
export type * from './tinker-client.js';
export { TinkerEngine, readTinkerCheckpoint, TINKER_CHECKPOINT_FILE } from './tinker-engine.js';
export type { TinkerCheckpointRecord, TinkerEngineOptions } from './tinker-engine.js';
export { TinkerFutureTimeoutError, TinkerRequestFailedError } from './errors.js';

/** What {@link openTinkerEngine} needs. */
export interface OpenTinkerEngineOptions {
  readonly baseURL: string;
  readonly apiKey: string;
  readonly lora: LoraSettings;
  readonly fetch?: typeof globalThis.fetch | undefined;
  readonly timeout?: number | undefined;
  readonly futureTimeout?: number | undefined;
  readonly maxRetries?: number | undefined;
  readonly env?: NodeJS.ProcessEnv | undefined;
}

/**
 * Opens a Tinker session and makes the engine over it, with the base models the server trains.
 * The caller closes both (the engine, then the client).
 */
export async function openTinkerEngine(
  options: OpenTinkerEngineOptions,
): Promise<{ client: TinkerClient; engine: TinkerEngine }> {
  const client = new TinkerClient({
    baseURL: options.baseURL,
    apiKey: options.apiKey,
    fetch: options.fetch,
    timeout: options.timeout,
    futureTimeout: options.futureTimeout,
    maxRetries: options.maxRetries,
  });
  try {
    await client.open();
    const baseModels = await client.supportedModels();
    const engine = new TinkerEngine({
      client,
      server: options.baseURL,
      baseModels,
      lora: options.lora,
      env: options.env,
    });
    return { client, engine };
  } catch (error) {
    await client.close();
    throw error;
  }
}
