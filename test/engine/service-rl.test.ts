/**
 * The engine's done-criterion through the local service's job path: a fresh base model trained by
 * RL jobs (over HTTP semantics, via the service's fetch handler) raises its mean reward by >= 0.3.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEV_API_KEY, createApp } from 'policyloop/server';
import type { App } from 'policyloop/server';
import type { Choice } from 'policyloop/schema';
import { capitalsReward, makeScenarios } from '../../examples/tasks/uppercase.js';

let app: App;
let directory: string;
beforeAll(async () => {
  directory = await mkdtemp(path.join(os.tmpdir(), 'engine-service-'));
  app = await createApp({ dataDir: directory });
});
afterAll(async () => {
  await app?.close();
  await rm(directory, { recursive: true, force: true });
});

async function call<T>(method: string, route: string, body?: unknown): Promise<T> {
  const response = await app.fetch(
    new Request(`http://local${route}`, {
      method,
      headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

async function waitForJob(jobId: string): Promise<string> {
  let after = '';
  for (let attempt = 0; attempt < 600; attempt += 1) {
    const page = await call<{ data: { id: string; type: string; data: Record<string, unknown> }[] }>(
      'GET',
      `/v1/preview/training-jobs/${jobId}/events?limit=100${after ? `&after=${after}` : ''}`,
    );
    for (const event of page.data) {
      after = event.id;
      if (event.type === 'training_ended') return 'ended';
      if (event.type === 'training_failed') throw new Error(`training failed: ${JSON.stringify(event.data)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`job ${jobId} did not end`);
}

describe('RL through the local service', () => {
  it('raises the mean reward of a fresh base model by at least 0.3', async () => {
    const model = await call<{ id: string; entity: string; project: string; name: string }>(
      'POST',
      '/v1/preview/models',
      { project: 'engine-test', name: 'capitals', base_model: 'policyloop/tiny-chat' },
    );
    const inferenceName = `wandb-artifact:///${model.entity}/${model.project}/${model.name}`;
    const means: number[] = [];
    for (let step = 1; step <= 16; step += 1) {
      const prompts = makeScenarios(step, 8).map((scenario) => scenario.word);
      const results = await Promise.all(
        prompts.map((content) =>
          call<{ choices: Choice[] }>('POST', '/v1/chat/completions', {
            model: inferenceName,
            messages: [{ role: 'user', content }],
            n: 8,
            max_tokens: 6,
            temperature: 1,
            logprobs: true,
          }),
        ),
      );
      let total = 0;
      const trajectoryGroups = results.map((result, index) => ({
        trajectories: result.choices.map((choice) => {
          const reward = capitalsReward(choice.message.content);
          total += reward;
          return { messages_and_choices: [{ role: 'user', content: prompts[index] }, choice], reward };
        }),
      }));
      means.push(total / 64);
      const job = await call<{ id: string }>('POST', '/v1/preview/training-jobs', {
        model_id: model.id,
        trajectory_groups: trajectoryGroups,
        experimental_config: { learning_rate: null },
      });
      await waitForJob(job.id);
    }
    const first = (means[0]! + means[1]!) / 2;
    const last = (means.at(-1)! + means.at(-2)!) / 2;
    expect(last - first).toBeGreaterThanOrEqual(0.3);
  });
});
