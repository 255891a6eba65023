/**
 * Retries that store nothing twice, against the real local service on loopback: a fetch that lets
 * the service handle a POST and then loses its answer (a connection reset after the write) makes
 * the log batcher retry and replay its spool with the batch's one Idempotency-Key, and the model
 * handle retry a training-job POST with the job's key, each ending with exactly one stored write.
 * A service not known to honour the key gets no blind retry of a job POST: a clear error instead.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Choice } from 'policyloop/schema';
import type { TrainingClient } from 'policyloop/client';
import { HostedBackend } from '../../src/backends/hosted-backend.js';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { LogBatcher } from '../../src/training/log-batcher.js';
import { TrainableModel } from '../../src/training/trainable-model.js';
import { TrainingJobUncertainError } from '../../src/training/errors.js';

const BASE_MODEL = 'policyloop/tiny-chat';
let dataDir: string;
let service: LocalBackend;
let apiKey: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-idempotent-'));
  service = await LocalBackend.start({ dataDir });
  apiKey = (await service.connect()).apiKey;
});

afterAll(async () => {
  await service?.close();
  await rm(dataDir, { recursive: true, force: true });
});

interface SeenRequest {
  readonly method: string;
  readonly path: string;
  readonly key: string | null;
  readonly lost: boolean;
}

/**
 * A fetch that passes every request to the service, but for the next `count` POSTs whose path ends
 * with `suffix` reads the service's answer and then fails like a connection reset.
 */
function losingAnswers() {
  const seen: SeenRequest[] = [];
  let rule: { suffix: string; count: number } | undefined;
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    const method = init?.method ?? 'GET';
    const key = new Headers(init?.headers).get('idempotency-key');
    const response = await globalThis.fetch(input, init);
    const lose = rule !== undefined && method === 'POST' && url.pathname.endsWith(rule.suffix) && rule.count > 0;
    seen.push({ method, path: url.pathname, key, lost: lose });
    if (!lose || rule === undefined) return response;
    rule.count -= 1;
    await response.text();
    throw new TypeError('fetch failed', { cause: new Error('read ECONNRESET (injected after the service answered)') });
  };
  return {
    fetch: fetch as typeof globalThis.fetch,
    seen,
    lose(suffix: string, count: number) {
      rule = { suffix, count };
    },
  };
}

/**
 * The hosted backend aimed at the local service through a fetch that can lose answers: the client
 * cannot know that this service honours keys, as with the real hosted service.
 */
function hostedBehindFaults() {
  const faults = losingAnswers();
  const backend = new HostedBackend({ baseURL: service.baseURL, apiKey, fetch: faults.fetch, dataDir, retryDelay: 10 });
  return { faults, backend };
}

async function storedGroups(client: TrainingClient, modelId: string): Promise<number> {
  let count = 0;
  for await (const _row of client.local.trajectoryGroups.list(modelId)) count += 1;
  return count;
}

let modelCount = 0;
async function registered(backend: LocalBackend | HostedBackend): Promise<TrainableModel> {
  modelCount += 1;
  return new TrainableModel({ project: 'idempotent', name: `model-${modelCount}`, baseModel: BASE_MODEL }).register(
    backend,
  );
}

const group = (reward: number) => ({
  trajectories: [{ reward, messages_and_choices: [{ role: 'user' as const, content: 'hi' }] }],
});

describe('the log batcher', () => {
  it('stores a batch once when the answer to its POST is lost twice, retrying with one key', async () => {
    const faults = losingAnswers();
    const backend = new LocalBackend({ url: service.baseURL, apiKey, fetch: faults.fetch, dataDir });
    const model = await registered(backend);
    const { client } = await backend.connect();
    const batcher = new LogBatcher({
      client,
      modelId: model.id,
      spoolPath: path.join(dataDir, 'spool-retry.jsonl'),
      retryDelay: 10,
    });
    faults.lose('/log', 2);
    await batcher.add({ split: 'train', groups: [group(1), group(0), group(0.5)] });
    const stats = await batcher.close();

    const logs = faults.seen.filter((request) => request.path.endsWith('/log'));
    expect(logs.map((request) => request.lost)).toEqual([true, true, false]);
    expect(new Set(logs.map((request) => request.key)).size).toBe(1);
    expect(logs[0]?.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(stats).toMatchObject({ sentBatches: 1, sentGroups: 3, spooledBatches: 0 });
    expect(await storedGroups(client, model.id)).toBe(3);
  });

  it('replays a spooled batch with its key, so a batch the service stored is not stored twice', async () => {
    const faults = losingAnswers();
    const backend = new LocalBackend({ url: service.baseURL, apiKey, fetch: faults.fetch, dataDir });
    const model = await registered(backend);
    const { client } = await backend.connect();
    const spoolPath = path.join(dataDir, 'spool-replay.jsonl');
    const first = new LogBatcher({ client, modelId: model.id, spoolPath, retryDelay: 10, maxRetries: 1 });
    faults.lose('/log', 2);
    await first.add({ split: 'val', groups: [group(1), group(0)] });
    expect(await first.close()).toMatchObject({ sentBatches: 0, spooledBatches: 1, spooledGroups: 2 });
    // Both answers were lost, but the service had stored the batch the first time.
    expect(await storedGroups(client, model.id)).toBe(2);

    const second = new LogBatcher({ client, modelId: model.id, spoolPath, retryDelay: 10 });
    expect(await second.replaySpool()).toMatchObject({ replayedBatches: 1, replayedGroups: 2, respooledBatches: 0 });
    await second.close();

    const logs = faults.seen.filter((request) => request.path.endsWith('/log'));
    expect(logs).toHaveLength(3);
    expect(new Set(logs.map((request) => request.key)).size).toBe(1);
    expect(await storedGroups(client, model.id)).toBe(2);
  });
});

describe('training jobs', () => {
  const rows = [
    {
      messages: [
        { role: 'user' as const, content: 'ping' },
        { role: 'assistant' as const, content: 'pong' },
      ],
    },
  ];

  it('with the local service: a lost answer is retried with the job’s key and gives one job', async () => {
    const faults = losingAnswers();
    const backend = new LocalBackend({
      url: service.baseURL,
      apiKey,
      fetch: faults.fetch,
      dataDir,
      retryDelay: 10,
    });
    const model = await registered(backend);
    const { client } = await backend.connect();
    faults.lose('/sft-training-jobs', 1);
    const result = await model.trainSFT(rows, { batchSize: 1 });
    expect(result.step).toBe(1);

    const posts = faults.seen.filter((request) => request.path.endsWith('/sft-training-jobs'));
    expect(posts.map((request) => request.lost)).toEqual([true, false]);
    expect(posts[0]?.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(posts[1]?.key).toBe(posts[0]?.key);
    const jobs = await client.local.jobs.list(model.id);
    expect(jobs.data).toHaveLength(1);
  });

  it('with a service not known to honour the key: no second POST, a clear error, one job', async () => {
    const { faults, backend } = hostedBehindFaults();
    const model = await registered(backend);
    const { client } = await backend.connect();
    faults.lose('/sft-training-jobs', 1);
    // The local service reads file:// data from the models' sft-data folders (and its roots).
    const file = path.join(dataDir, 'p', 'models', 'n', 'sft-data', 'sft-rows.jsonl');
    const { mkdir, writeFile } = await import('node:fs/promises');
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, `${JSON.stringify(rows[0])}\n`);
    const error = await model
      .trainSFT(undefined, { trainingDataUrl: `file://${file}`, batchSize: 1 })
      .catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(TrainingJobUncertainError);
    expect((error as TrainingJobUncertainError).message).toMatch(/may or may not have reached the service/);
    expect((error as TrainingJobUncertainError).message).toMatch(/Check the model's jobs/);
    const posts = faults.seen.filter((request) => request.path.endsWith('/sft-training-jobs'));
    expect(posts).toHaveLength(1);
    expect((error as TrainingJobUncertainError).idempotencyKey).toBe(posts[0]?.key);
    const jobs = await client.local.jobs.list(model.id);
    expect(jobs.data).toHaveLength(1);
  });

  it('an RL step whose answer was lost on such a service is never sent again, until the caller discards it', async () => {
    const { faults, backend } = hostedBehindFaults();
    const model = await registered(backend);
    const { client } = await backend.connect();
    const sampled = model.openai();
    const rlGroup = async () => {
      const trajectories = [];
      for (const reward of [0, 1]) {
        const completion = await sampled.chat.completions.create({
          model: BASE_MODEL,
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: 4,
        });
        const choice = completion.choices[0] as Choice;
        trajectories.push({ reward, messages_and_choices: [{ role: 'user' as const, content: 'hi' }, choice] });
      }
      return { trajectories };
    };
    const groups = [await rlGroup()];
    faults.lose('/training-jobs', 1);
    const first = await model.train(groups, { log: false }).catch((caught: unknown) => caught);
    expect(first).toBeInstanceOf(TrainingJobUncertainError);

    // The next step would re-send the lost POST: on a service not known to honour the key it
    // refuses, names the way on, and sends nothing.
    const postsBefore = faults.seen.filter((request) => request.path.endsWith('/training-jobs')).length;
    const second = await model.train(groups, { log: false }).catch((caught: unknown) => caught);
    expect(second).toBeInstanceOf(TrainingJobUncertainError);
    expect((second as Error).message).toMatch(/discardPendingJob/);
    expect(faults.seen.filter((request) => request.path.endsWith('/training-jobs'))).toHaveLength(postsBefore);

    expect(await model.discardPendingJob()).toBe(true);
    expect(await model.discardPendingJob()).toBe(false);
    const jobs = await client.local.jobs.list(model.id);
    expect(jobs.data).toHaveLength(1);
  });
});

describe('large bodies', () => {
  it('are compared by their bytes: the same bytes replay, the same value in other bytes is refused', async () => {
    const backend = new LocalBackend({ url: service.baseURL, apiKey, dataDir });
    const model = await registered(backend);
    const { client } = await backend.connect();
    const groups = Array.from({ length: 40 }, (_, index) => ({
      trajectories: [{ reward: index, logs: ['x'.repeat(2_000)] }],
    }));
    const compact = JSON.stringify({ split: 'train', trajectory_groups: groups });
    expect(Buffer.byteLength(compact)).toBeGreaterThan(64 * 1024);
    const post = (body: string) =>
      fetch(`${service.baseURL}/preview/models/${model.id}/log`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'idempotency-key': 'big-1' },
        body,
      });

    const first = await post(compact);
    const again = await post(compact);
    const respaced = await post(JSON.stringify({ split: 'train', trajectory_groups: groups }, null, 1));

    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(await first.text());
    expect(respaced.status).toBe(422);
    expect(((await respaced.json()) as { detail: Array<{ type: string }> }).detail[0]?.type).toBe(
      'idempotency_key_reused',
    );
    expect(await storedGroups(client, model.id)).toBe(40);
  });
});
