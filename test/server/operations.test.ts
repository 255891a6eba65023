/**
 * Every operation of the contract against the real local service (real engine) on loopback.
 * The harness checks each JSON response against both OpenAPI documents.
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceModelList, TrainingJobDetails } from 'policyloop/schema';
import { TrainingClient } from 'policyloop/client';
import { DATABASE_FILE } from 'policyloop/server';
import { openDatabase } from '../../src/server/sqlite.js';
import { checkResponse, declaredResponses } from './support/openapi-responses.js';
import { startApp, temporaryDirectory, type TestApp } from './support/harness.js';
import { dataUrl, followEvents, registerModel, sampledGroup, sftJsonl, waitForJobEnd } from './support/jobs.js';

let server: TestApp;
/** A directory the service may read SFT files from (`trainingDataRoots`). */
const dataRoot = temporaryDirectory();

beforeAll(async () => {
  // SFT data from a root, and downloads from this machine (the test's HTTP server), allowed by name.
  server = await startApp({
    trainingDataRoots: [dataRoot],
    allowTrainingDataDownloads: true,
    trainingDataAllowedAddresses: ['127.0.0.1'],
  });
});
afterAll(async () => {
  await server.close();
});

describe('the contract checker', () => {
  it('rejects a response that breaks a document (so the checks below can fail)', () => {
    const checks = checkResponse('GET', '/v1/preview/training-jobs/not-checked', 200, {
      id: 'not-a-uuid',
      status: 'SLEEPING',
    });
    expect(checks.map((check) => check.checked)).toEqual([true, true]);
    expect(checks.every((check) => check.errors.length > 0)).toBe(true);
  });
});

describe('operations without a key', () => {
  it('answers health, system-check and base-models', async () => {
    expect((await server.call('GET', '/v1/health', { auth: false })).status).toBe(200);
    const check = await server.call('GET', '/v1/system-check', { auth: false });
    expect(check.status).toBe(200);
    expect(check.body).toMatchObject({
      api: true,
      database: { success: true },
      cpu_queue: { success: true },
      gpu_queue: { success: true, runtime: { name: expect.stringMatching(/^(onnxruntime|tfjs-wasm)$/) } },
    });
    const baseModels = await server.call('GET', '/v1/preview/base-models', { auth: false });
    expect(baseModels.body).toContain('policyloop/tiny-chat');
  });
});

describe('models', () => {
  it('registers get-or-create, with the default entity for a null one, and 409 on a duplicate', async () => {
    const body = { entity: null, project: 'models', name: 'first', base_model: 'policyloop/tiny-chat' };
    const created = await server.call('POST', '/v1/preview/models', { body });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({
      entity: 'local',
      project: 'models',
      name: 'first',
      base_model: 'policyloop/tiny-chat',
      run_id: null,
    });
    const again = await server.call('POST', '/v1/preview/models', { body: { ...body, return_existing: true } });
    expect(again.body.id).toBe(created.body.id);
    const duplicate = await server.call('POST', '/v1/preview/models', { body });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.detail).toMatch(/already exists/);
    const otherEntity = await server.call('POST', '/v1/preview/models', { body: { ...body, entity: 'team' } });
    expect(otherEntity.status).toBe(200);
    expect(otherEntity.body.id).not.toBe(created.body.id);
  });

  it('refuses an unknown base model with a 422 at body.base_model', async () => {
    const response = await server.call('POST', '/v1/preview/models', {
      body: { project: 'models', name: 'x', base_model: 'gpt-17' },
    });
    expect(response.status).toBe(422);
    expect(response.body.detail[0].loc).toEqual(['body', 'base_model']);
    expect(response.body.detail[0].msg).toContain('policyloop/tiny-chat');
  });

  it('accepts model and job ids in upper case, as UUIDs are case-insensitive', async () => {
    const model = await registerModel(server, 'upper-case');
    const upper = model.id.toUpperCase();
    expect(upper).not.toBe(model.id);
    expect((await server.call('GET', `/v1/preview/models/${upper}/checkpoints`)).status).toBe(200);
    const created = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: upper, training_data_url: dataUrl(sftJsonl([{ question: 'q', answer: 'a' }])) },
    });
    expect(created.body.model_id).toBe(model.id);
    expect((await waitForJobEnd(server, created.body.id.toUpperCase())).status).toBe('COMPLETED');
  });

  it('404s operations on an unknown model', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect((await server.call('GET', `/v1/preview/models/${unknown}/checkpoints`)).status).toBe(404);
    expect((await server.call('DELETE', `/v1/preview/models/${unknown}`)).status).toBe(404);
    expect(
      (
        await server.call('POST', `/v1/preview/models/${unknown}/log`, {
          body: { split: 'train', trajectory_groups: [] },
        })
      ).status,
    ).toBe(404);
    expect(
      (await server.call('POST', '/v1/preview/training-jobs', { body: { model_id: unknown, trajectory_groups: [] } }))
        .status,
    ).toBe(404);
    expect((await server.call('GET', `/v1/preview/training-jobs/${unknown}`)).status).toBe(404);
    expect((await server.call('GET', `/v1/preview/training-jobs/${unknown}/events`)).status).toBe(404);
  });
});

describe('log', () => {
  it('stores groups at the current step and returns the step metrics with the split prefix', async () => {
    const model = await registerModel(server, 'logged');
    const response = await server.call('POST', `/v1/preview/models/${model.id}/log`, {
      body: {
        model_id: model.id,
        split: 'val',
        trajectory_groups: [
          {
            trajectories: [
              { reward: 1, metrics: { solved: true } },
              { reward: 0, metrics: { solved: false } },
            ],
            metrics: { difficulty: 3 },
          },
          { trajectories: [{ reward: 1 }], exceptions: [{ type: 'ValueError', message: 'boom', traceback: '' }] },
        ],
      },
    });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ model_id: model.id, split: 'val', step: 0 });
    expect(response.body.metrics).toEqual({
      'val/solved': 0.5,
      'val/group_difficulty': 3,
      'val/reward': 2 / 3,
      'val/reward_std_dev': 0.25,
      'val/frac_reward_zero_std': 0.5, // the one-trajectory group
      'val/exception_rate': 0.25,
      'val/data/step_num_trajectories': 3,
      'val/data/step_num_groups_submitted': 2,
      'val/data/step_num_groups_trainable': 1,
    });
  });
});

describe('chat completions', () => {
  it('answers on both routes for a base model, with logprobs and usage', async () => {
    for (const path of ['/v1/chat/completions', '/v1/chat/completions/']) {
      const response = await server.call('POST', path, {
        body: {
          model: 'policyloop/tiny-chat',
          messages: [
            { role: 'system', content: 'be brief' },
            { role: 'user', content: 'hi' },
          ],
          max_tokens: 5,
          logprobs: true,
          top_logprobs: 2,
          seed: 7,
        },
      });
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ object: 'chat.completion', model: 'policyloop/tiny-chat' });
      expect(response.body.id).toMatch(/^chatcmpl-/);
      expect(response.headers.get('x-request-id')).toMatch(/^req_/);
      const choice = response.body.choices[0];
      expect(choice.message.role).toBe('assistant');
      expect(choice.logprobs.content.length).toBeGreaterThan(0);
      expect(choice.logprobs.content[0].top_logprobs).toHaveLength(2);
      expect(response.body.usage.total_tokens).toBe(
        response.body.usage.prompt_tokens + response.body.usage.completion_tokens,
      );
    }
  });

  it('404s unknown models and steps', async () => {
    const model = await registerModel(server, 'names');
    const ask = (name: string) =>
      server.call('POST', '/v1/chat/completions', {
        body: { model: name, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
      });
    expect((await ask('gpt-17')).status).toBe(404);
    expect((await ask('wandb-artifact:///local/server-tests/nobody')).status).toBe(404);
    const missingStep = await ask('wandb-artifact:///local/server-tests/names:step3');
    expect(missingStep.status).toBe(404);
    expect(missingStep.body.detail).toContain('available steps: 0');
    const hugeStep = await ask('wandb-artifact:///local/server-tests/names:step99999999999999999999999');
    expect(hugeStep.status).toBe(404);
    expect(hugeStep.body.detail).toContain('at step 99999999999999999999999;');
    expect((await ask('wandb-artifact:///local/server-tests/names')).status).toBe(200);
    expect((await ask('wandb-artifact:///local/server-tests/names:step0')).status).toBe(200);
    expect((await ask('server-tests/names')).status).toBe(200);
    expect(model.id).toBeDefined();
  });
});

describe('training jobs', () => {
  it('runs an RL job PENDING -> RUNNING -> COMPLETED with its events, then serves the new step', async () => {
    const model = await registerModel(server, 'rl');
    const group = await sampledGroup(server, 'wandb-artifact:///local/server-tests/rl');
    const created = await server.call('POST', '/v1/preview/training-jobs', {
      body: {
        model_id: model.id,
        trajectory_groups: [group],
        experimental_config: { learning_rate: 0.001, loss_fn: null, ppo: null, scale_rewards: true },
      },
    });
    expect(created.status).toBe(200);
    expect(TrainingJobDetails.parse(created.body)).toMatchObject({ model_id: model.id, training_end: null });
    expect(['PENDING', 'RUNNING']).toContain(created.body.status);

    const { events, pages } = await followEvents(server, created.body.id, 1);
    expect(pages).toBeGreaterThanOrEqual(3);
    expect(events[0]?.type).toBe('training_started');
    expect(events[0]?.data['num_sequences']).toBeGreaterThan(0);
    const steps = events.filter((event) => event.type === 'gradient_step');
    expect(steps.length).toBeGreaterThan(0);
    for (const step of steps) for (const value of Object.values(step.data)) expect(typeof value).toBe('number');
    expect(
      events
        .filter((event) => event.type === 'training_ended' || event.type === 'training_failed')
        .map((event) => event.type),
    ).toEqual(['training_ended']);
    expect(events[events.length - 1]?.type).toBe('training_ended');

    const job = await server.call('GET', `/v1/preview/training-jobs/${created.body.id}`);
    expect(job.body).toMatchObject({ status: 'COMPLETED', progress: 1, error_message: null });
    expect(Date.parse(job.body.training_end)).toBeGreaterThanOrEqual(Date.parse(job.body.training_start));

    const checkpoints = await server.call('GET', `/v1/preview/models/${model.id}/checkpoints?order=desc&limit=1`);
    expect(checkpoints.body.data[0].step).toBe(1);
    expect(existsSync(join(server.dataDir, 'weights', model.id, 'step-1'))).toBe(true);

    const pinned = await server.call('POST', '/v1/chat/completions', {
      body: {
        model: 'wandb-artifact:///local/server-tests/rl:step1',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 3,
      },
    });
    expect(pinned.status).toBe(200);
    const log = await server.call('POST', `/v1/preview/models/${model.id}/log`, {
      body: { split: 'train', trajectory_groups: [group] },
    });
    expect(log.body.step).toBe(1);

    const models = await server.call('GET', '/v1/models');
    const ids = InferenceModelList.parse(models.body).data.map((entry) => entry.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'policyloop/tiny-chat',
        'wandb-artifact:///local/server-tests/rl',
        'wandb-artifact:///local/server-tests/rl:step1',
      ]),
    );
  });

  it('fails an RL job the engine refuses, with a terminal event carrying the message', async () => {
    const model = await registerModel(server, 'rl-bad');
    const choice = { index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'hi' } };
    const created = await server.call('POST', '/v1/preview/training-jobs', {
      body: {
        model_id: model.id,
        trajectory_groups: [
          {
            trajectories: [
              { messages_and_choices: [choice], reward: 1 },
              { messages_and_choices: [choice], reward: 0 },
            ],
          },
        ],
      },
    });
    expect(created.status).toBe(200);
    const { events } = await followEvents(server, created.body.id);
    const last = events[events.length - 1];
    expect(last?.type).toBe('training_failed');
    expect(typeof last?.data['error_message']).toBe('string');
    const job = await waitForJobEnd(server, created.body.id);
    expect(job.status).toBe('FAILED');
    expect(job.error_message).toBe(last?.data['error_message']);
    expect((await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`)).body.data).toEqual([]);
  });

  it('runs SFT jobs from file://, data: (percent and base64) and http:// URLs', async () => {
    const model = await registerModel(server, 'sft');
    const jsonl = sftJsonl([
      { question: 'hi', answer: 'hello' },
      { question: 'bye', answer: 'ciao' },
    ]);
    const file = join(dataRoot, 'rows.jsonl');
    writeFileSync(file, jsonl);
    const http: Server = createServer((_request, response) => response.end(jsonl));
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const httpUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}/rows.jsonl`;
    try {
      const urls = [
        pathToFileURL(file).href,
        dataUrl(jsonl),
        `data:application/jsonl;base64,${Buffer.from(jsonl).toString('base64')}`,
        httpUrl,
      ];
      for (const [index, url] of urls.entries()) {
        const created = await server.call('POST', '/v1/preview/sft-training-jobs', {
          body: { model_id: model.id, training_data_url: url, config: { batch_size: 1, learning_rate: 0.001 } },
        });
        expect(created.status).toBe(200);
        const { events } = await followEvents(server, created.body.id);
        expect(events.map((event) => event.type)).toEqual([
          'training_started',
          'gradient_step',
          'gradient_step',
          'training_ended',
        ]);
        const checkpoints = await server.call('GET', `/v1/preview/models/${model.id}/checkpoints?order=desc&limit=1`);
        expect(checkpoints.body.data[0].step).toBe(index + 1);
      }
    } finally {
      http.close();
    }
  });

  it('fails an SFT job on bad data with a message naming the line, and 422s an unreadable scheme', async () => {
    const model = await registerModel(server, 'sft-bad');
    const text = `${sftJsonl([{ question: 'a', answer: 'b' }])}\n{"messages": "nope"}\n`;
    const created = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: dataUrl(text) },
    });
    const job = await waitForJobEnd(server, created.body.id);
    expect(job.status).toBe('FAILED');
    expect(job.error_message).toMatch(/line 2/);

    const notJson = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: {
        model_id: model.id,
        training_data_url: dataUrl(`${sftJsonl([{ question: 'a', answer: 'b' }])}\n\nsecret-token-value\n`),
      },
    });
    const notJsonJob = await waitForJobEnd(server, notJson.body.id);
    expect(notJsonJob.error_message).toMatch(/line 3 is not valid JSON/);
    expect(notJsonJob.error_message).not.toContain('secret');

    // Outside the data directory's SFT files and the roots: refused before a job is made.
    const outside = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: 'file:///nonexistent/rows.jsonl' },
    });
    expect(outside.status).toBe(422);
    expect(outside.body.detail[0]).toMatchObject({ loc: ['body', 'training_data_url'], type: 'url_refused' });
    const missing = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: pathToFileURL(join(dataRoot, 'nonexistent.jsonl')).href },
    });
    expect((await waitForJobEnd(server, missing.body.id)).error_message).toMatch(/no such file/);

    const s3 = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: 's3://bucket/rows.jsonl' },
    });
    expect(s3.status).toBe(422);
    expect(s3.body.detail[0].loc).toEqual(['body', 'training_data_url']);
    expect(s3.body.detail[0].msg).toContain('`s3`');
    const remoteFile = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: 'file://fileserver/rows.jsonl' },
    });
    expect(remoteFile.status).toBe(422);
    expect(remoteFile.body.detail[0]).toMatchObject({
      loc: ['body', 'training_data_url'],
      msg: expect.stringContaining('"fileserver"'),
    });
    const unknownKey = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: dataUrl(text), config: { epochs: 3 } },
    });
    expect(unknownKey.status).toBe(422);
    expect(unknownKey.body.detail[0].loc).toEqual(['body', 'config', 'epochs']);
  });
});

describe('checkpoints', () => {
  it('pages by step in both orders over several pages, and 422s an unknown cursor', async () => {
    const model = await registerModel(server, 'paged');
    for (let job = 0; job < 5; job += 1) {
      const created = await server.call('POST', '/v1/preview/sft-training-jobs', {
        body: { model_id: model.id, training_data_url: dataUrl(sftJsonl([{ question: 'q', answer: 'a' }])) },
      });
      expect((await waitForJobEnd(server, created.body.id)).status).toBe('COMPLETED');
    }
    for (const order of ['asc', 'desc'] as const) {
      const steps: number[] = [];
      let after = '';
      let pages = 0;
      for (;;) {
        const page = await server.call(
          'GET',
          `/v1/preview/models/${model.id}/checkpoints?limit=2&order=${order}${after === '' ? '' : `&after=${after}`}`,
        );
        pages += 1;
        steps.push(...page.body.data.map((checkpoint: { step: number }) => checkpoint.step));
        expect(page.body.first_id).toBe(page.body.data[0]?.id ?? '');
        if (!page.body.has_more) break;
        after = page.body.last_id;
      }
      expect(pages).toBe(3);
      expect(steps).toEqual(order === 'asc' ? [1, 2, 3, 4, 5] : [5, 4, 3, 2, 1]);
    }
    const defaults = await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`);
    expect(defaults.body.data.map((checkpoint: { step: number }) => checkpoint.step)).toEqual([1, 2, 3, 4, 5]);
    expect(defaults.body.data[0].metrics).toEqual(expect.any(Object));
    const emptyCursor = await server.call('GET', `/v1/preview/models/${model.id}/checkpoints?after=&limit=1`);
    expect(emptyCursor.body.data[0].step).toBe(1);
    const unknown = await server.call(
      'GET',
      `/v1/preview/models/${model.id}/checkpoints?after=00000000-0000-4000-8000-000000000000`,
    );
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail[0].loc).toEqual(['query', 'after']);

    const deleted = await server.call('DELETE', `/v1/preview/models/${model.id}/checkpoints`, {
      body: { steps: [1, 2, 9] },
    });
    expect(deleted.body).toEqual({ deleted_count: 2, not_found_steps: [9] });
    expect(readdirSync(join(server.dataDir, 'weights', model.id)).sort()).toEqual(['step-3', 'step-4', 'step-5']);
    const remaining = await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`);
    expect(remaining.body.data.map((checkpoint: { step: number }) => checkpoint.step)).toEqual([3, 4, 5]);
    const gone = await server.call('POST', '/v1/chat/completions', {
      body: {
        model: 'wandb-artifact:///local/server-tests/paged:step1',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 2,
      },
    });
    expect(gone.status).toBe(404);

    const next = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: dataUrl(sftJsonl([{ question: 'q', answer: 'a' }])) },
    });
    await waitForJobEnd(server, next.body.id);
    const newest = await server.call('GET', `/v1/preview/models/${model.id}/checkpoints?order=desc&limit=1`);
    expect(newest.body.data[0].step).toBe(6);
  });

  it('deletes a model with its checkpoints, weight files, jobs, events, logged groups and metrics', async () => {
    const model = await registerModel(server, 'doomed');
    const bystander = await registerModel(server, 'bystander');
    for (const target of [model, bystander]) {
      const created = await server.call('POST', '/v1/preview/sft-training-jobs', {
        body: { model_id: target.id, training_data_url: dataUrl(sftJsonl([{ question: 'q', answer: 'a' }])) },
      });
      await waitForJobEnd(server, created.body.id);
      target.jobId = created.body.id;
      const logged = await server.call('POST', `/v1/preview/models/${target.id}/log`, {
        body: { split: 'train', trajectory_groups: [{ trajectories: [{ reward: 1 }, { reward: 0 }] }] },
      });
      expect(logged.status).toBe(200);
    }
    const rowsOf = (modelId: string, jobId: string) => {
      const database = openDatabase(join(server.dataDir, DATABASE_FILE), { readonly: true });
      try {
        const count = (sql: string, id: string) => (database.prepare(sql).get(id) as { count: number }).count;
        return {
          models: count('SELECT COUNT(*) AS count FROM models WHERE id = ?', modelId),
          checkpoints: count('SELECT COUNT(*) AS count FROM checkpoints WHERE model_id = ?', modelId),
          jobs: count('SELECT COUNT(*) AS count FROM jobs WHERE model_id = ?', modelId),
          events: count('SELECT COUNT(*) AS count FROM job_events WHERE job_id = ?', jobId),
          groups: count('SELECT COUNT(*) AS count FROM trajectory_groups WHERE model_id = ?', modelId),
          metrics: count('SELECT COUNT(*) AS count FROM step_metrics WHERE model_id = ?', modelId),
        };
      } finally {
        database.close();
      }
    };
    const stored = { models: 1, checkpoints: 1, jobs: 1, events: 3, groups: 1, metrics: 1 };
    expect(rowsOf(model.id, model.jobId)).toEqual(stored);
    expect(readdirSync(join(server.dataDir, 'weights', model.id))).toEqual(['step-1']);
    const deleted = await server.call('DELETE', `/v1/preview/models/${model.id}`);
    expect(deleted.body).toEqual({ model_id: model.id, deleted_checkpoints: 1, deleted_run: false });
    expect(existsSync(join(server.dataDir, 'weights', model.id))).toBe(false);
    expect(rowsOf(model.id, model.jobId)).toEqual({
      models: 0,
      checkpoints: 0,
      jobs: 0,
      events: 0,
      groups: 0,
      metrics: 0,
    });
    // Only that model's data went.
    expect(rowsOf(bystander.id, bystander.jobId)).toEqual(stored);
    expect(readdirSync(join(server.dataDir, 'weights', bystander.id))).toEqual(['step-1']);
    expect((await server.call('GET', `/v1/preview/training-jobs/${model.jobId}`)).status).toBe(404);
    expect((await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`)).status).toBe(404);
    const again = await server.call('POST', '/v1/preview/models', {
      body: { project: 'server-tests', name: 'doomed', base_model: 'policyloop/tiny-chat' },
    });
    expect(again.status).toBe(200);
    expect(again.body.id).not.toBe(model.id);
  });
});

describe('the inference model list', () => {
  it('gives every entry its root and a real created time, and the client parses both', async () => {
    const now = () => Math.floor(Date.now() / 1000);
    const before = now();
    const model = await registerModel(server, 'listed');
    const job = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: dataUrl(sftJsonl([{ question: 'q', answer: 'a' }])) },
    });
    expect(job.status).toBe(200);
    expect((await waitForJobEnd(server, job.body.id)).status).toBe('COMPLETED');

    const client = new TrainingClient({
      baseURL: 'http://127.0.0.1',
      inferenceBaseURL: 'http://127.0.0.1',
      apiKey: server.apiKey,
      fetch: server.fetch,
      maxRetries: 0,
    });
    const { data } = await client.inference.models.list();
    const after = now();
    const byId = new Map(data.map((entry) => [entry.id, entry]));
    // A base model derives from itself, created at the documented fixed time (2026-11-21T00:00Z).
    expect(byId.get('policyloop/tiny-chat')).toMatchObject({ root: 'policyloop/tiny-chat', created: 1_795_219_200 });
    // The trained model (latest and step 0) and its checkpoint derive from the base model, created
    // when they were: the model at registration, the checkpoint when its job ended.
    const name = 'wandb-artifact:///local/server-tests/listed';
    const latest = byId.get(name);
    const step0 = byId.get(`${name}:step0`);
    const step1 = byId.get(`${name}:step1`);
    for (const entry of [latest, step0, step1]) expect(entry?.root).toBe('policyloop/tiny-chat');
    expect(latest?.created).toBeGreaterThanOrEqual(before);
    expect(step0?.created).toBe(latest?.created);
    expect(step1?.created).toBeGreaterThanOrEqual(latest?.created ?? Number.POSITIVE_INFINITY);
    expect(step1?.created).toBeLessThanOrEqual(after);
    for (const entry of data) {
      expect(entry.root).toEqual(expect.any(String));
      expect(entry.created).toBeGreaterThan(0);
    }
  });
});

describe('contract coverage', () => {
  it('checked responses against the documents along the way', () => {
    expect(server.contractChecks()).toBeGreaterThan(50);
  });

  it('checked a 200 of every operation of both documents', () => {
    const declared = declaredResponses(200);
    expect(declared.length).toBeGreaterThanOrEqual(25);
    const missing = declared.filter((operation) => !server.checkedOperations().has(operation));
    expect(missing).toEqual([]);
  });
});
