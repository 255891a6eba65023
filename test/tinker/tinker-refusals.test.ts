/**
 * A request the Tinker server refuses for what it asks stays a 4xx with the server's reason when
 * it comes back through the in-process service (it was a 503, "try again later"), while a fault of
 * the server stays a 503. A step's parameter the server cannot honour is refused before any
 * rollout samples (`RLTrainer.run`) or any training request (`model.train`). Against the scripted Tinker server of fake-tinker.ts (SkyRL fails a
 * future with a 400 `{detail}`, hosted Tinker with `{error, category: "user"}`), with a tiny Qwen3
 * folder for the real tokenizer and template.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { APIError } from 'openai';
import { InvalidArgumentError, RLTrainer, TinkerBackend, TrainableModel } from 'policyloop';
import type { TrainParams } from 'policyloop/training';
import { writeTinyQwen3 } from 'policyloop/testing';
import { mkdir } from 'node:fs/promises';
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

describe('a step’s parameters a Tinker server cannot honour', () => {
  /** A backend on a server that opens sessions on `modelDir` and scripts nothing else, and a model registered on it. */
  async function registeredModel(name: string) {
    const server = serverFailingSamples(() => json({ detail: 'not expected' }, 400));
    const backend = new TinkerBackend({ baseURL: BASE_URL, fetch: server.fetch, dataDir: path.join(root, name) });
    backends.push(backend);
    const model = await new TrainableModel({ project: 'refusals', name, baseModel: modelDir }).register(backend);
    return { server, model };
  }

  it('RLTrainer.run refuses each before its first rollout: no sample reaches the server', async () => {
    const adapter = path.join(root, 'peft-adapter');
    await mkdir(adapter, { recursive: true });
    const cases: [Omit<TrainParams, 'maxStepsOffPolicy' | 'log'>, string, RegExp][] = [
      [{ epsilon: 0.2 }, 'train.epsilon', /with the importance_sampling loss \(the tinker backend's default\)/],
      [{ lossFn: 'dro', epsilonHigh: 0.28 }, 'train.epsilonHigh', /a Tinker server's dro loss has none/],
      [
        { config: { importance_sampling_level: 'sequence' } },
        'train.config.importance_sampling_level',
        /a Tinker server does not honour it/,
      ],
      [{ maskProbRatio: true }, 'train.maskProbRatio', /a Tinker server does not honour it/],
      [{ klPenaltyCoef: 0.1, klRefAdapterPath: adapter }, 'train.klRefAdapterPath', /cannot load a PEFT adapter/],
    ];
    const { server, model } = await registeredModel('trainer-refusals');
    let rollouts = 0;
    for (const [train, argument, message] of cases) {
      const trainer = new RLTrainer({
        model,
        scenarios: ['cat'],
        rollout: async () => {
          rollouts += 1;
          await model.openai({ maxRetries: 0 }).chat.completions.create({
            model: model.inferenceName(),
            messages: [{ role: 'user', content: 'cat' }],
            max_tokens: 2,
          });
        },
        reward: () => 1,
        groupSize: 2,
        groupsPerStep: 1,
        maxSteps: 1,
        train,
        progress: false,
      });
      const error = await trainer.run().then(
        () => undefined,
        (failure: unknown) => failure,
      );
      expect(error, argument).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).argument).toBe(argument);
      expect((error as Error).message).toMatch(message);
    }
    expect(rollouts).toBe(0);
    expect(server.to('create_sampling_session')).toEqual([]);
    expect(server.to('asample')).toEqual([]);
    await model.close();
  });

  it('model.train refuses before any training request: no model is created, nothing is forwarded', async () => {
    const { server, model } = await registeredModel('train-refusals');
    const error = await model.train([], { lossFn: 'dro', epsilon: 0.1 }).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe('params.epsilon');
    for (const route of ['create_model', 'forward', 'forward_backward', 'asample'])
      expect(server.to(route)).toEqual([]);
    await model.close();
  });
});
