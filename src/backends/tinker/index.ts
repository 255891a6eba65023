/**
 * The Tinker backend's internals, loaded by `TinkerBackend` when it connects (they need the
 * optional `@bufbuild/protobuf`): the wire client, the engine that serves the local service from a
 * Tinker server, and its errors.
 * @module
 */
import { TinkerClient } from './tinker-client.js';
import type { LoraSettings } from './tinker-client.js';
import { TinkerEngine } from './tinker-engine.js';
import { readTinkerCheckpoint } from './checkpoint-record.js';
import { extractTarGz } from './archive.js';
import { APIError } from '../../client/errors.js';

export { TinkerClient, TINKER_SDK_VERSION } from './tinker-client.js';
export type * from './tinker-client.js';
export { TinkerEngine } from './tinker-engine.js';
export type { TinkerEngineOptions } from './tinker-engine.js';
export { readTinkerCheckpoint, TINKER_CHECKPOINT_FILE } from './checkpoint-record.js';
export type { TinkerCheckpointRecord } from './checkpoint-record.js';
export { TinkerFutureTimeoutError, TinkerRequestFailedError } from './errors.js';

/** What {@link openTinkerEngine} needs. */
export interface OpenTinkerEngineOptions {
  readonly baseURL: string;
  readonly apiKey: string;
  readonly lora: LoraSettings;
  readonly resumableState?: boolean | undefined;
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
      resumableState: options.resumableState,
      env: options.env,
    });
    return { client, engine };
  } catch (error) {
    await client.close();
    throw error;
  }
}

/** What {@link exportTinkerCheckpoint} needs. */
export interface ExportTinkerOptions {
  /** A checkpoint directory of a Tinker-backed model (it holds `tinker.json`). */
  readonly checkpointDirectory: string;
  /** Folder to write the adapter into. */
  readonly out: string;
  /** The server to ask. @default the one recorded in the checkpoint */
  readonly baseURL?: string | undefined;
  /** Its key. @default process.env.TINKER_API_KEY, else the self-hosted placeholder */
  readonly apiKey?: string | undefined;
  readonly fetch?: typeof globalThis.fetch | undefined;
}

/**
 * Writes a Tinker checkpoint's sampler weights as a PEFT adapter folder, from the archive the
 * server offers (`GET training_runs/{model}/checkpoints/{name}/archive`); returns the files written.
 */
export async function exportTinkerCheckpoint(options: ExportTinkerOptions): Promise<string[]> {
  const record = await readTinkerCheckpoint(options.checkpointDirectory);
  const baseURL = options.baseURL ?? record.server;
  const client = new TinkerClient({
    baseURL,
    apiKey: options.apiKey ?? process.env['TINKER_API_KEY'] ?? 'tml-policyloop-self-hosted',
    fetch: options.fetch,
    maxRetries: 1,
  });
  let archive: Uint8Array;
  try {
    archive = await client.downloadSamplerArchive(record.samplerPath);
  } catch (error) {
    if (error instanceof APIError && (error.status === 404 || error.status === 405))
      throw new Error(
        `The Tinker server at ${baseURL} does not offer the archive of ${record.samplerPath} (${error.message}): it may not serve checkpoint archives, or the checkpoint was deleted there. Load the sampler weights through the server instead.`,
      );
    throw new Error(
      `Could not download ${record.samplerPath} from the Tinker server at ${baseURL}: ${error instanceof Error ? error.message : String(error)}. Start the server (or pass the address it runs at now).`,
    );
  }
  return extractTarGz(archive, options.out);
}
