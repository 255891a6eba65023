/**
 * `client.local` against the real local service on loopback: models with their latest step,
 * metrics written and read back merged, a model's jobs, logged groups by step and split, bad
 * arguments refused before any request, and the service's 404 for an unknown model.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgumentError, NotFoundError } from 'policyloop';
import { TrainingClient } from 'policyloop/client';
import { serve, type ServeHandle } from 'policyloop/server';
import { createStandInEngine } from '../server/support/stand-in-engine.js';

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
let server: ServeHandle;
let client: TrainingClient;
let dataDir: string;
let requests: string[];

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'policyloop-client-local-'));
  server = await serve({ port: 0, dataDir, engine: createStandInEngine() });
  requests = [];
  client = new TrainingClient({
    baseURL: server.url,
    apiKey: server.apiKey,
    maxRetries: 0,
    fetch: (input, init) => {
      requests.push(`${init?.method ?? 'GET'} ${String(input)}`);
      return fetch(input, init);
    },
  });
});

afterAll(async () => {
  await server?.close();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
});

const group = (rewards: number[], text: string) => ({
  trajectories: rewards.map((reward) => ({
    messages_and_choices: [
      { role: 'user' as const, content: text },
      { finish_reason: 'stop' as const, index: 0, message: { role: 'assistant' as const, content: 'ok' } },
    ],
    reward,
  })),
});

describe('client.local', () => {
  it('lists models newest first with their latest step, and reads one', async () => {
    const first = await client.models.create({
      project: 'client-local',
      name: 'a',
      base_model: 'policyloop/tiny-chat',
    });
    const second = await client.models.create({
      project: 'client-local',
      name: 'b',
      base_model: 'policyloop/tiny-chat',
    });
    const job = await client.jobs.createRL({ model_id: second.id, trajectory_groups: [group([1, 0], 'x')] });
    for await (const event of client.jobs.events(job.id)) if (event.type === 'training_ended') break;
    await expect.poll(async () => (await client.local.models.retrieve(second.id)).latest_step).toBe(1);

    const seen = [];
    for await (const model of client.local.models.list({ project: 'client-local', limit: 1 })) seen.push(model);
    expect(seen.map((model) => [model.id, model.latest_step])).toEqual([
      [second.id, 1],
      [first.id, 0],
    ]);
    const byName = await client.local.models.list({ project: 'client-local', name: 'a' });
    expect(byName.data.map((model) => model.id)).toEqual([first.id]);

    const jobs = await client.local.jobs.list(second.id);
    expect(jobs.data).toEqual([expect.objectContaining({ id: job.id, kind: 'rl', status: 'COMPLETED' })]);
  });

  it('writes metrics and reads them back merged with what the log route recorded', async () => {
    const model = await client.models.create({
      project: 'client-local',
      name: 'm',
      base_model: 'policyloop/tiny-chat',
    });
    await client.models.log(model.id, { split: 'val', trajectory_groups: [group([1, 0], 'v')] });
    const merged = await client.local.metrics.create(model.id, { step: 0, split: 'val', metrics: { accuracy: 0.5 } });
    expect(merged.metrics).toMatchObject({ reward: 0.5, accuracy: 0.5 });
    await client.local.metrics.create(model.id, { step: 0, split: 'train', metrics: { loss: 2 } });
    await client.local.metrics.create(model.id, { step: 1, split: 'train', metrics: { loss: 1 } });

    const rows = [];
    for await (const row of client.local.metrics.list(model.id, { limit: 2 })) rows.push(row);
    expect(rows.map((row) => row.id)).toEqual(['0:train', '0:val', '1:train']);
    const train = await client.local.metrics.list(model.id, { split: 'train' });
    expect(train.data.map((row) => row.metrics['loss'])).toEqual([2, 1]);
  });

  it('lists logged groups by step and split, with the groups as logged', async () => {
    const model = await client.models.create({
      project: 'client-local',
      name: 'g',
      base_model: 'policyloop/tiny-chat',
    });
    await client.models.log(model.id, { split: 'train', trajectory_groups: [group([1], 'one'), group([0], 'two')] });
    await client.models.log(model.id, { split: 'val', trajectory_groups: [group([1], 'three')] });
    const texts: unknown[] = [];
    for await (const item of client.local.trajectoryGroups.list(model.id, { step: 0, split: 'train', limit: 1 })) {
      texts.push(item.group.trajectories[0]?.messages_and_choices[0]);
    }
    expect(texts).toEqual([
      { role: 'user', content: 'one' },
      { role: 'user', content: 'two' },
    ]);
    expect((await client.local.trajectoryGroups.list(model.id, { step: 1 })).data).toEqual([]);
  });

  it('refuses bad arguments before sending anything', async () => {
    requests.length = 0;
    const cases: [string, () => PromiseLike<unknown>][] = [
      ['limit', () => client.local.models.list({ limit: 500 })],
      ['typo', () => client.local.models.list({ projct: 'x' } as never)],
      ['modelId', () => client.local.metrics.list('')],
      ['split', () => client.local.metrics.list(UNKNOWN_ID, { split: 'a/b' })],
      ['step', () => client.local.trajectoryGroups.list(UNKNOWN_ID, { step: -1 })],
      [
        'NaN',
        () => client.local.metrics.create(UNKNOWN_ID, { step: 0, split: 'train', metrics: { loss: Number.NaN } }),
      ],
      [
        'Infinity',
        () =>
          client.local.metrics.create(UNKNOWN_ID, {
            step: 0,
            split: 'train',
            metrics: { loss: Number.POSITIVE_INFINITY },
          }),
      ],
      [
        'prefix',
        () => client.local.metrics.create(UNKNOWN_ID, { step: 0, split: 'val', metrics: { 'val/reward': 1 } }),
      ],
    ];
    for (const [name, call] of cases) {
      await expect(Promise.resolve().then(call), name).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    expect(requests).toEqual([]);
    await expect(
      client.local.metrics.create(UNKNOWN_ID, { step: 0, split: 'val', metrics: { 'val/reward': 1 } }),
    ).rejects.toThrow(/without the split prefix/);
  });

  it('rejects with NotFoundError for an unknown model (as the hosted service does for every local route)', async () => {
    await expect(client.local.models.retrieve(UNKNOWN_ID)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.local.metrics.list(UNKNOWN_ID)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.local.jobs.list(UNKNOWN_ID)).rejects.toBeInstanceOf(NotFoundError);
    await expect(
      client.local.metrics.create(UNKNOWN_ID, { step: 0, split: 'train', metrics: { loss: 1 } }),
    ).rejects.toBeInstanceOf(NotFoundError);
  });
});
