/**
 * The real local training service on a random loopback port with a throwaway data directory: what
 * integration tests of rollouts and training run against (no mocks of the service).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServeHandle, ServeOptions } from '../server/index.js';
import { loadLocalService } from '../backends/local-backend.js';

/** A running test service. */
export interface TestService {
  /** `http://127.0.0.1:PORT/v1`: the `baseURL` of an OpenAI client and of the training client. */
  readonly baseURL: string;
  /** A key the service accepts. */
  readonly apiKey: string;
  /** The first base model id the service offers (from `GET /v1/preview/base-models`). */
  readonly baseModel: string;
  /** The throwaway data directory (removed on close unless it was given). */
  readonly dataDir: string;
  /** Stops the service and removes the data directory it made. */
  close(): Promise<void>;
}

/** Options of {@link startTestService}: the service's own options (port and host are fixed). */
export type StartTestServiceOptions = Omit<ServeOptions, 'port' | 'host'>;

/**
 * Starts the local service on `127.0.0.1` and a free port, with a temporary data directory.
 * @example
 * const service = await startTestService();
 * const client = new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey });
 * await client.chat.completions.create({ model: service.baseModel, messages, logprobs: true });
 * await service.close();
 */
export async function startTestService(options: StartTestServiceOptions = {}): Promise<TestService> {
  const ownDir = options.dataDir === undefined ? await mkdtemp(join(tmpdir(), 'policyloop-test-')) : undefined;
  const dataDir = options.dataDir ?? (ownDir as string);
  let handle: ServeHandle;
  try {
    // Loaded on demand: the service's optional dependencies (SQLite, the engine) are only needed
    // by tests that start it, not by users of makeChoice or scriptedChatClient.
    const { serve } = await loadLocalService();
    handle = await serve({ ...options, dataDir, port: 0, host: '127.0.0.1' });
  } catch (error) {
    if (ownDir !== undefined) await rm(ownDir, { recursive: true, force: true });
    throw error;
  }
  const close = async (): Promise<void> => {
    await handle.close();
    if (ownDir !== undefined) await rm(ownDir, { recursive: true, force: true });
  };
  try {
    const response = await fetch(`${handle.baseURL}/preview/base-models`, { signal: AbortSignal.timeout(30_000) });
    const models = (await response.json()) as unknown;
    const baseModel = Array.isArray(models) && typeof models[0] === 'string' ? models[0] : undefined;
    if (baseModel === undefined)
      throw new Error(`Expected GET /v1/preview/base-models to list a model, got ${JSON.stringify(models)}`);
    return { baseURL: handle.baseURL, apiKey: handle.apiKey, baseModel, dataDir, close };
  } catch (error) {
    await close();
    throw error;
  }
}
