/**
 * A request the Tinker server refuses for what it asks stays a 4xx with the server's reason when
 * it comes back through the in-process service (it was a 503, "try again later"), while a fault of
 * the server stays a 503. Against the scripted Tinker server of fake-tinker.ts (SkyRL fails a
 * future with a 400 `{detail}`, hosted Tinker with `{error, category: "user"}`), with a tiny Qwen3
 * folder for the real tokenizer and template.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { APIError } from 'openai';
import { TinkerBackend, TrainableModel } from 'policyloop';
import { writeTinyQwen3 } from 'policyloop/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BASE_URL, fakeTinker, future, json, type WireRequest } from './fake-tinker.js';

let root: string;
let modelDir: string;
const backends: TinkerBackend[] = [];

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'tinker-refusals-'));
  modelDir = await writeTinyQwen3(path.join(root, 'tiny-qwen3'), { hiddenSize: 32, intermediateSize: 64 });
}, 60_000);
afterEach(async () => {
  await Promise.all(backends.splice(0).map((backend) => backend.close()));
});
afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

/** A server that opens sessions on `modelDir` and answers every sample's future with `failure`. */
function serverFailingSamples(failure: () => Response) {
  return fakeTinker((request: WireRequest) => {
    switch (request.route) {
      case 'session_heartbeat':
        return json({ type: 'session_heartbeat' });
      case 'get_server_capabilities':
        return json({ supported_models: [{ model_name: modelDir }] });
      case 'create_sampling_session':
        return json({ sampling_session_id: 'sampling_1' });
      case 'asample':
        return future('42');
      case 'retrieve_future':
        return failure();
      default:
        return json({ detail: `not scripted: ${request.route}` }, 404);
    }
  });
}

async function completionError(server: ReturnType<typeof fakeTinker>, name: string): Promise<APIError> {
  const backend = new TinkerBackend({
    baseURL: BASE_URL,
    fetch: server.fetch,
    dataDir: path.join(root, name),
    maxRetries: 0,
  });
  backends.push(backend);
  const model = await new TrainableModel({ project: 'refusals', name, baseModel: modelDir }).register(backend);
  const client = model.openai({ maxRetries: 0 });
  const error = await client.chat.completions
    .create({ model: model.inferenceName(), messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 })
    .then(
      () => undefined,
      (failure: unknown) => failure,
    );
  await model.close();
  expect(error).toBeInstanceOf(APIError);
  return error as APIError;
}

describe('a Tinker server’s refusal through the in-process service', () => {
  it('SkyRL’s 400 {detail} for a failed sample comes back a 400 with the reason', async () => {
    const server = serverFailingSamples(() => json({ detail: 'max_tokens 9000 exceeds the engine limit' }, 400));
    const error = await completionError(server, 'skyrl-400');
    expect(error.status).toBe(400);
    expect(error.message).toContain(`The Tinker server at ${BASE_URL} refused the request (HTTP 400)`);
    expect(error.message).toContain('max_tokens 9000 exceeds the engine limit');
  });

  it('hosted Tinker’s {error, category: "user"} comes back a 400 with the reason', async () => {
    const server = serverFailingSamples(() =>
      json({ error: 'Prompt is too long for Qwen/Qwen3-8B', category: 'user' }),
    );
    const error = await completionError(server, 'hosted-user');
    expect(error.status).toBe(400);
    expect(error.message).toContain('Prompt is too long for Qwen/Qwen3-8B');
  });

  it('a fault of the server itself stays a 503', async () => {
    const server = serverFailingSamples(() => json({ error: 'CUDA out of memory', category: 'server' }));
    const error = await completionError(server, 'hosted-server');
    expect(error.status).toBe(503);
    expect(error.message).toContain('CUDA out of memory');
  });
});
