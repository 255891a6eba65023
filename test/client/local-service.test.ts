/**
 * The client against the real local service on loopback: the same bytes the hosted service
 * would get, answered by our own implementation of the contract.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthenticationError, NotFoundError, UnprocessableEntityError } from 'policyloop';
import { TrainingClient } from 'policyloop/client';
import { serve, type ServeHandle } from 'policyloop/server';
import { SystemCheckResponse } from 'policyloop/schema';

let server: ServeHandle;
let client: TrainingClient;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'policyloop-client-'));
  server = await serve({ port: 0, dataDir });
  client = new TrainingClient({ baseURL: server.url, apiKey: server.apiKey, maxRetries: 0, timeout: 30_000 });
});

afterAll(async () => {
  await server?.close();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
});

describe('client against the local service', () => {
  it('health, system check and base models answer', async () => {
    await expect(client.health()).resolves.toBeDefined();
    // Our own service answers the strict shape of the service description's prose.
    const checks = SystemCheckResponse.parse(await client.systemCheck());
    expect(checks.api).toBe(true);
    expect(checks.gpu_queue.success).toBe(true);
    const baseModels = await client.baseModels.list();
    expect(baseModels.length).toBeGreaterThan(0);
  });

  it('registers get-or-create, lists no checkpoints, logs, and deletes', async () => {
    const [baseModel] = await client.baseModels.list();
    if (baseModel === undefined) throw new Error('no base model');
    const body = { project: 'client-test', name: 'agent', base_model: baseModel, return_existing: true };
    const model = await client.models.create(body);
    const again = await client.models.create(body);
    expect(again.id).toBe(model.id);

    const page = await client.checkpoints.list(model.id, { limit: 1, order: 'desc' });
    expect(page.data).toEqual([]);
    expect(page.has_more).toBe(false);

    await client.models.log(model.id, {
      split: 'val',
      trajectory_groups: [
        { trajectories: [{ messages_and_choices: [{ role: 'user', content: 'hi' }], reward: 1 }, { reward: 0 }] },
      ],
    });

    await expect(client.checkpoints.delete(model.id, { steps: [5] })).resolves.toEqual({
      deleted_count: 0,
      not_found_steps: [5],
    });
    const deleted = await client.models.delete(model.id);
    expect(deleted.model_id).toBe(model.id);
    await expect(client.models.delete(model.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('maps the service errors: 401 for a wrong key, 404 for a missing job, 422 with issues', async () => {
    const stranger = new TrainingClient({ baseURL: server.baseURL, apiKey: 'wrong-key', maxRetries: 0 });
    await expect(stranger.models.delete('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(
      AuthenticationError,
    );
    await expect(client.jobs.retrieve('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(NotFoundError);
    const error = await client.jobs.retrieve('not-a-uuid').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(UnprocessableEntityError);
    expect((error as UnprocessableEntityError).issues[0]?.loc[0]).toBe('path');
  });

  it('runs an RL job and follows its events across pages to one terminal event', async () => {
    const [baseModel] = await client.baseModels.list();
    if (baseModel === undefined) throw new Error('no base model');
    const model = await client.models.create({
      project: 'client-test',
      name: 'rl',
      base_model: baseModel,
      return_existing: true,
    });
    const choice = (content: string) => ({
      finish_reason: 'stop' as const,
      index: 0,
      message: { role: 'assistant' as const, content },
      logprobs: null,
    });
    const job = await client.jobs.createRL({
      model_id: model.id,
      trajectory_groups: [
        {
          trajectories: [
            { messages_and_choices: [{ role: 'user', content: 'say yes' }, choice('yes')], reward: 1 },
            { messages_and_choices: [{ role: 'user', content: 'say yes' }, choice('no')], reward: 0 },
          ],
        },
      ],
      experimental_config: { allow_training_without_logprobs: true },
    });
    let after: string | undefined;
    const types: string[] = [];
    for (
      let polls = 0;
      polls < 240 && !types.some((type) => type === 'training_ended' || type === 'training_failed');
      polls += 1
    ) {
      // limit 1 forces one page per event, so following `after` across pages is exercised.
      for await (const event of client.jobs.events(job.id, { after, limit: 1 })) {
        types.push(event.type);
        after = event.id;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(types[0]).toBe('training_started');
    expect(types.filter((type) => type === 'training_ended' || type === 'training_failed')).toHaveLength(1);
    expect(types.at(-1)).toBe('training_ended');
    const finished = await client.jobs.retrieve(job.id);
    expect(finished.status).toBe('COMPLETED');
    // The finished job added the first checkpoint: step 1, visible before the terminal event.
    const newest = await client.checkpoints.list(model.id, { limit: 1, order: 'desc' });
    expect(newest.data[0]?.step).toBe(1);
    await expect(client.checkpoints.delete(model.id, { steps: [1] })).resolves.toEqual({
      deleted_count: 1,
      not_found_steps: [],
    });
  });
});
