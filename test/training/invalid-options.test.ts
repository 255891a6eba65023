/**
 * One validator for every public option: a table of bad values, each refused with
 * InvalidArgumentError naming the option ("Expected `x` to be ..., got ..."), before anything is
 * sent or run. The model methods run against the real local service on loopback, through a
 * `fetch` that counts what reaches it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APIUserAbortError, InvalidArgumentError, TrainingClient } from 'policyloop/client';
import { gatherTrajectoryGroups } from '../../src/rollout/gather-trajectory-groups.js';
import { makeGroup, startTestService, type TestService } from 'policyloop/testing';
import type { Backend } from '../../src/training/backend.js';
import { HostedBackend } from '../../src/backends/hosted-backend.js';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { LogBatcher } from '../../src/training/log-batcher.js';
import { TrainableModel } from '../../src/training/trainable-model.js';

const MESSAGE = /^Expected `[^`]+` to be .+, got .+$/;

/** The error `run` throws or rejects with. */
async function failure(run: () => unknown): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  return undefined;
}

function expectInvalid(error: unknown, argument: string): void {
  expect(error, argument).toBeInstanceOf(InvalidArgumentError);
  expect((error as InvalidArgumentError).argument).toBe(argument);
  expect((error as Error).message).toMatch(MESSAGE);
  expect((error as Error).message).toContain(`\`${argument}\``);
}

/** A fetch that answers 200 `{}` and counts calls: nothing may reach it. */
function countingFetch() {
  const state = { calls: 0 };
  const fetch = async (): Promise<Response> => {
    state.calls += 1;
    return new Response('{}', { headers: { 'content-type': 'application/json' } });
  };
  return { fetch: fetch as typeof globalThis.fetch, state };
}

describe('client options', () => {
  it.each([
    [{ timeout: 0 }, 'timeout'],
    [{ timeout: Number.POSITIVE_INFINITY }, 'timeout'],
    [{ maxRetries: -1 }, 'maxRetries'],
    [{ maxRetries: 1.5 }, 'maxRetries'],
    [{ retryDelay: -1 }, 'retryDelay'],
    [{ retryDelay: '1s' }, 'retryDelay'],
    [{ baseURL: 'localhost:8000' }, 'baseURL'],
    [{ baseURL: 42 }, 'baseURL'],
    [{ fetch: 'fetch' }, 'fetch'],
  ])('new TrainingClient(%o) names `%s`', async (bad, argument) => {
    expectInvalid(await failure(() => new TrainingClient({ apiKey: 'k', ...(bad as object) })), argument);
  });

  it.each([
    [{ timeout: -1 }, 'options.timeout'],
    [{ maxRetries: Number.NaN }, 'options.maxRetries'],
    [{ retryDelay: Number.POSITIVE_INFINITY }, 'options.retryDelay'],
    [{ signal: 'abort' }, 'options.signal'],
    [{ idempotencyKey: '' }, 'options.idempotencyKey'],
  ])('a call with %o names `%s` and sends nothing', async (bad, argument) => {
    const { fetch, state } = countingFetch();
    const client = new TrainingClient({ apiKey: 'k', baseURL: 'http://service.test/v1', fetch });
    expectInvalid(await failure(() => client.health(bad as never)), argument);
    expect(state.calls).toBe(0);
  });
});

describe('gather options', () => {
  it.each([
    [{ groupSize: 0 }, 'groupSize'],
    [{ groupSize: 2.5 }, 'groupSize'],
    [{ concurrency: 0 }, 'concurrency'],
    [{ timeout: 0 }, 'timeout'],
    [{ timeout: Number.NaN }, 'timeout'],
    [{ maxRetries: -1 }, 'maxRetries'],
    [{ retryDelay: -5 }, 'retryDelay'],
    [{ maxExceptions: -1 }, 'maxExceptions'],
    [{ maxExceptions: Number.POSITIVE_INFINITY }, 'maxExceptions'],
    [{ reward: 'exact' }, 'reward'],
    [{ scoreGroup: {} }, 'scoreGroup'],
    [{ sampledStep: 3 }, 'sampledStep'],
    [{ signal: true }, 'signal'],
    [{ progress: 'yes' }, 'progress'],
    [{ events: {} }, 'events'],
  ])('%o names `%s` and runs no rollout', async (bad, argument) => {
    let ran = 0;
    const error = await failure(() =>
      gatherTrajectoryGroups(
        [1, 2],
        async () => {
          ran += 1;
        },
        bad as never,
      ),
    );
    expectInvalid(error, argument);
    expect(ran).toBe(0);
  });

  it('a rollout that is not a function is named', async () => {
    expectInvalid(await failure(() => gatherTrajectoryGroups([1], 'rollout' as never)), 'rollout');
  });
});

describe('log batcher options', () => {
  const base = { modelId: 'm', spoolPath: path.join(tmpdir(), 'never-written.jsonl') };

  it.each([
    [{ maxBatchGroups: 0 }, 'maxBatchGroups'],
    [{ maxBatchBytes: -1 }, 'maxBatchBytes'],
    [{ maxDelay: -1 }, 'maxDelay'],
    [{ maxBufferedBytes: 0 }, 'maxBufferedBytes'],
    [{ maxRetries: 0.5 }, 'maxRetries'],
    [{ retryDelay: Number.NaN }, 'retryDelay'],
    [{ timeout: 0 }, 'timeout'],
    [{ modelId: '' }, 'modelId'],
    [{ client: {} }, 'client'],
  ])('new LogBatcher(%o) names `%s`', async (bad, argument) => {
    const { fetch } = countingFetch();
    const client = new TrainingClient({ apiKey: 'k', baseURL: 'http://service.test/v1', fetch });
    expectInvalid(await failure(() => new LogBatcher({ client, ...base, ...(bad as object) } as never)), argument);
  });

  it('a signal passed where the options go (the old `flush(signal)`) is refused, not ignored', async () => {
    const { fetch } = countingFetch();
    const client = new TrainingClient({ apiKey: 'k', baseURL: 'http://service.test/v1', fetch });
    const batcher = new LogBatcher({ client, ...base });
    const error = await failure(() => batcher.flush(new AbortController().signal as never));
    expectInvalid(error, 'options');
    expect((error as Error).message).toBe(
      'Expected `options` to be an options object (pass `{ signal }`), got an AbortSignal',
    );
  });

  it.each([
    ['flush', { timeout: -1 }, 'options.timeout'],
    ['flush', { signal: {} }, 'options.signal'],
    ['close', { timeout: 0 }, 'options.timeout'],
  ] as const)('%s(%o) names `%s` and sends nothing', async (method, bad, argument) => {
    const { fetch, state } = countingFetch();
    const client = new TrainingClient({ apiKey: 'k', baseURL: 'http://service.test/v1', fetch });
    const batcher = new LogBatcher({ client, ...base, maxDelay: 60_000 });
    await batcher.add({ split: 'val', groups: [makeGroup([{ reward: 1 }])] });
    expectInvalid(await failure(() => batcher[method](bad as never)), argument);
    expect(state.calls).toBe(0);
  });
});

describe('backend options', () => {
  it.each([
    [{ port: 70_000 }, 'port'],
    [{ timeout: -1 }, 'timeout'],
    [{ maxRetries: 1.5 }, 'maxRetries'],
    [{ retryDelay: -1 }, 'retryDelay'],
  ])('new LocalBackend(%o) names `%s` before any service starts', async (bad, argument) => {
    expectInvalid(await failure(() => new LocalBackend(bad)), argument);
  });

  it.each([
    [() => new LocalBackend({ dataDri: '/tmp/x' } as never), 'Unknown option `dataDri`; did you mean `dataDir`?'],
    [() => new LocalBackend({ retry: 2 } as never), 'Unknown option `retry`; did you mean `retryDelay`?'],
    [
      () => new HostedBackend({ apiKey: 'k', inferenceApiBaseUrl: 'http://x.test' } as never),
      'Unknown option `inferenceApiBaseUrl`; did you mean `inferenceApiBaseURL`?',
    ],
  ])('a misspelt backend option is refused, naming the nearest (%#)', async (make, message) => {
    const error = await failure(make);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as Error).message).toBe(message);
  });
});

describe('model options, against the local service', () => {
  let service: TestService;
  let dataDir: string;
  const state = { calls: 0 };
  let backend: Backend;
  let model: TrainableModel;

  beforeAll(async () => {
    service = await startTestService();
    dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-options-'));
    const counted = (input: RequestInfo | URL, init?: RequestInit) => {
      state.calls += 1;
      return globalThis.fetch(input, init);
    };
    const client = new TrainingClient({ apiKey: service.apiKey, baseURL: service.baseURL, fetch: counted });
    const connection = {
      client,
      baseURL: service.baseURL,
      inferenceBaseURL: service.baseURL,
      apiKey: service.apiKey,
      fetch: counted as typeof globalThis.fetch,
    };
    backend = {
      kind: 'local',
      dataDir,
      connect: async () => connection,
      defaultLearningRate: async () => null,
      localFileUrl: (file) => new URL(`file://${file}`).href,
      close: async () => undefined,
    };
    model = await new TrainableModel({ project: 'options', name: 'table', baseModel: service.baseModel }).register(
      backend,
    );
  });

  afterAll(async () => {
    await service?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it.each([
    [{ name: '' }, 'name'],
    [{ project: 'a/b' }, 'project'],
    [{ baseModel: 7 }, 'baseModel'],
    [{ entity: '' }, 'entity'],
  ])('new TrainableModel(%o) names `%s`', async (bad, argument) => {
    const options = { project: 'p', name: 'n', baseModel: 'b', ...(bad as object) };
    expectInvalid(await failure(() => new TrainableModel(options as never)), argument);
  });

  const group = () => makeGroup([{ user: 'hi', answer: 'a', reward: 1 }]);
  const cases: [string, string, (model: TrainableModel) => unknown][] = [
    ['register', 'backend', (m) => m.register({} as never)],
    ['register', 'signal', (m) => m.register(backend, { signal: 'stop' as never })],
    ['getStep', 'signal', (m) => m.getStep({ signal: 1 as never })],
    ['log', 'step', (m) => m.log({ groups: [group()], step: -1 })],
    ['log', 'send', (m) => m.log({ groups: [group()], send: 'no' as never })],
    ['log', 'params', (m) => m.log(null as never)],
    ['log', 'split', (m) => m.log({ groups: [group()], split: 'a/b' })],
    ['log', 'groups', (m) => m.log({ groups: 'g' as never })],
    ['log', 'signal', (m) => m.log({ groups: [group()] }, { signal: 'x' as never })],
    ['log', 'options.split', (m) => m.log({ groups: [group()] }, { split: 'train' } as never)],
    ['flushLogs', 'options.timeout', (m) => m.flushLogs({ timeout: 0 })],
    ['close', 'options.timeout', (m) => m.close({ timeout: -1 })],
    ['train', 'timeout', (m) => m.train([group()], {}, { timeout: 0 })],
    ['train', 'pollInterval', (m) => m.train([group()], {}, { pollInterval: -1 })],
    ['train', 'onProgress', (m) => m.train([group()], {}, { onProgress: 'log' as never })],
    ['train', 'learningRate', (m) => m.train([group()], { learningRate: 0 })],
    ['train', 'lossFn', (m) => m.train([group()], { lossFn: 'grpo' as never })],
    ['train', 'maxStepsOffPolicy', (m) => m.train([group()], { maxStepsOffPolicy: -1 })],
    ['train', 'log', (m) => m.train([group()], { log: 1 as never })],
    ['train', 'signal', (m) => m.train([group()], {}, { signal: {} as never })],
    ['trainSFT', 'batchSize', (m) => m.trainSFT('data.jsonl', { batchSize: 0 })],
    ['trainSFT', 'learningRate[1]', (m) => m.trainSFT('data.jsonl', { learningRate: [1e-4, -1] })],
    ['trainSFT', 'assistantTurns', (m) => m.trainSFT('data.jsonl', { assistantTurns: 'first' as never })],
    ['trainSFT', 'source', (m) => m.trainSFT(undefined)],
    ['train', 'params', (m) => m.train([group()], 'cispo' as never)],
    ['train', 'options', (m) => m.train([group()], {}, new AbortController().signal as never)],
    ['train', 'timeout', (m) => m.train([group()], { learningRate: 1e-4 }, { timeout: 0 })],
    ['train', 'signal', (m) => m.train([group()], {}, { signal: 'stop' as never })],
    ['train', 'learningRate', (m) => m.train([group()], { learningRate: -1 }, { timeout: 1_000 })],
    ['trainSFT', 'pollInterval', (m) => m.trainSFT('data.jsonl', {}, { pollInterval: 0 })],
    ['trainSFT', 'onProgress', (m) => m.trainSFT('data.jsonl', { batchSize: 1 }, { onProgress: 1 as never })],
    ['trainSFT', 'signal', (m) => m.trainSFT('data.jsonl', {}, { signal: 'x' as never })],
    ['replaySpool', 'signal', (m) => m.replaySpool({ signal: 'x' as never })],
    ['pruneCheckpoints', 'signal', (m) => m.pruneCheckpoints({ keepBestBy: null }, { signal: 'x' as never })],
    ['delete', 'signal', (m) => m.delete({ signal: 'x' as never })],
    ['inferenceName', 'step', (m) => m.inferenceName(1.5)],
  ];

  it.each(cases)('%s with a bad `%s` is refused and sends nothing', async (_method, argument, call) => {
    const before = state.calls;
    expectInvalid(await failure(() => call(model)), argument);
    expect(state.calls).toBe(before);
    expect(await model.history()).toEqual([]);
  });

  it('pruneCheckpoints takes which to keep first and { signal } second', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    const before = state.calls;
    const error = await failure(() => model.pruneCheckpoints({ keepBestBy: null }, { signal: controller.signal }));
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toEqual(new Error('stop'));
    expect(state.calls).toBe(before);
  });

  it('log takes what is logged first and request options second', async () => {
    const other = await new TrainableModel({
      project: 'options',
      name: 'log-forms',
      baseModel: service.baseModel,
    }).register(backend);
    const { signal } = new AbortController();
    const row = await other.log({ groups: [group()], split: 'val', step: 3, send: false }, { signal });
    expect(row).toMatchObject({ training_step: 3, 'val/reward': 1 });
    expect((await other.history()).map((entry) => entry.training_step)).toEqual([3]);
    await other.close();
  });

  it('train and trainSFT take request options third', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    const { signal } = controller;
    const rows = [
      {
        messages: [
          { role: 'user' as const, content: 'a' },
          { role: 'assistant' as const, content: 'b' },
        ],
      },
    ];
    const before = state.calls;
    for (const call of [
      () => model.train([group()], { learningRate: 1e-4 }, { signal }),
      () => model.train([group()], undefined, { signal, timeout: 60_000 }),
      () => model.trainSFT(rows, { batchSize: 1 }, { signal }),
    ]) {
      const error = await failure(call);
      expect(error).toBeInstanceOf(APIUserAbortError);
      expect((error as APIUserAbortError).cause).toEqual(new Error('stop'));
    }
    expect(state.calls).toBe(before);
    expect(await model.history()).toEqual([]);
  });

  it.each([
    [
      'train',
      (m: TrainableModel) => m.train([group()], { learningrate: 1e-4 } as never),
      'learningrate',
      'learningRate',
    ],
    ['train', (m: TrainableModel) => m.train([group()], {}, { timout: 1_000 } as never), 'timout', 'timeout'],
    ['trainSFT', (m: TrainableModel) => m.trainSFT('data.jsonl', { batchsize: 2 } as never), 'batchsize', 'batchSize'],
    ['log', (m: TrainableModel) => m.log({ groups: [group()], spilt: 'val' } as never), 'spilt', 'split'],
  ] as const)(
    '%s with a misspelt option is refused, naming the nearest, and sends nothing',
    async (_method, call, key, nearest) => {
      const before = state.calls;
      const error = await failure(() => call(model));
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as Error).message).toBe(`Unknown option \`${key}\`; did you mean \`${nearest}\`?`);
      expect(state.calls).toBe(before);
    },
  );

  it.each(['signal', 'timeout', 'pollInterval', 'onProgress'] as const)(
    'a request option among the parameters (`%s`) is refused, naming the third argument, and nothing is sent',
    async (name) => {
      const before = state.calls;
      const rows = [
        {
          messages: [
            { role: 'user' as const, content: 'a' },
            { role: 'assistant' as const, content: 'b' },
          ],
        },
      ];
      const given = { [name]: name === 'onProgress' ? () => undefined : 1_000 } as never;
      for (const call of [() => model.train([group()], given), () => model.trainSFT(rows, given)]) {
        const error = await failure(call);
        expect(error).toBeInstanceOf(InvalidArgumentError);
        expect((error as InvalidArgumentError).argument).toBe(`params.${name}`);
        expect((error as Error).message).toBe(
          `Unknown option \`params.${name}\`: \`${name}\` is a request option, the third argument (\`{ ${name} }\`)`,
        );
      }
      expect(state.calls).toBe(before);
      expect(await model.history()).toEqual([]);
    },
  );
});
