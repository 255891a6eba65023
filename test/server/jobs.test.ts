/**
 * The job queue's rules, with the stand-in engine so that tests can hold jobs RUNNING and make
 * them fail on purpose: one model's jobs run one at a time in order, different models overlap up
 * to the limit, every job ends with exactly one terminal event, and nothing is left RUNNING by a
 * failure, a model delete or a shutdown.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PolicyRef } from '../../src/engine/types.js';
import type { ChatCompletionRequestBody } from 'policyloop/schema';
import {
  closedAfterEach,
  startApp,
  startServer,
  temporaryDirectory,
  waitFor,
  type TestService,
} from './support/harness.js';
import { followEvents, registerModel, waitForJobEnd } from './support/jobs.js';
import { createGate } from './support/gate.js';
import { createStandInEngine } from './support/stand-in-engine.js';

/** Services closed after each test. */
const services = closedAfterEach();

/** A service called in process. */
const start = services.startApp;

/** A service on a loopback port, for what needs one (a port that stops listening). */
const startListening = services.startServer;

const group = (rewards: number[]) => ({ trajectories: rewards.map((reward) => ({ reward })) });

async function submit(
  server: TestService,
  modelId: string,
  config: Record<string, unknown> | null = null,
): Promise<string> {
  const response = await server.call('POST', '/v1/preview/training-jobs', {
    body: { model_id: modelId, trajectory_groups: [group([0, 1]), group([1, 0])], experimental_config: config },
  });
  expect(response.status).toBe(200);
  expect(response.body.status).toBe('PENDING');
  return response.body.id;
}

const statusOf = async (server: TestService, jobId: string): Promise<string> =>
  (await server.call('GET', `/v1/preview/training-jobs/${jobId}`)).body.status;

describe('job queue', () => {
  it("runs one model's jobs one at a time, in order, each from the previous checkpoint", async () => {
    const gate = createGate();
    const engine = createStandInEngine({ gate: gate.wait });
    const server = await start({ engine });
    const model = await registerModel(server, 'ordered');
    const jobs = [await submit(server, model.id), await submit(server, model.id), await submit(server, model.id)];
    await waitFor(
      () => statusOf(server, jobs[0] as string),
      (status) => status === 'RUNNING',
    );
    // The queue holds the other two behind the first (every submit has enqueued its job by now).
    const queue = await server.call('GET', '/v1/system-check', { auth: false });
    expect(queue.body.cpu_queue).toMatchObject({ running_jobs: 1, queued_jobs: 2 });
    expect([await statusOf(server, jobs[1] as string), await statusOf(server, jobs[2] as string)]).toEqual([
      'PENDING',
      'PENDING',
    ]);
    const running = await server.call('GET', `/v1/preview/training-jobs/${jobs[0]}`);
    expect(running.body).toMatchObject({ progress: 0, training_end: null });
    expect(running.body.training_start).not.toBeNull();

    gate.open();
    for (const jobId of jobs) expect((await waitForJobEnd(server, jobId)).status).toBe('COMPLETED');
    expect(engine.trainedJobs.map((job) => job.step)).toEqual([1, 2, 3]);
    expect(engine.trainedJobs.map((job) => job.policy.key)).toEqual([
      'policyloop/tiny-chat',
      `${model.id}:1`,
      `${model.id}:2`,
    ]);
    expect(engine.trainedJobs[1]?.policy.checkpointPath).toBe(join(server.dataDir, 'weights', model.id, 'step-1'));
    const starts = await Promise.all(
      jobs.map(async (jobId) => (await server.call('GET', `/v1/preview/training-jobs/${jobId}`)).body),
    );
    for (let index = 1; index < starts.length; index += 1) {
      expect(Date.parse(starts[index].training_start)).toBeGreaterThanOrEqual(
        Date.parse(starts[index - 1].training_end),
      );
    }
    const checkpoints = await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`);
    expect(
      checkpoints.body.data.map((checkpoint: { step: number; metrics: unknown }) => [
        checkpoint.step,
        checkpoint.metrics,
      ]),
    ).toEqual([
      [1, { loss: 0.5, steps: 2 }],
      [2, { loss: 0.5, steps: 2 }],
      [3, { loss: 0.5, steps: 2 }],
    ]);
  });

  it('overlaps jobs of different models up to maxConcurrentJobs', async () => {
    const gate = createGate();
    const server = await start({ engine: createStandInEngine({ gate: gate.wait }), maxConcurrentJobs: 2 });
    const jobs: string[] = [];
    for (const name of ['one', 'two', 'three']) jobs.push(await submit(server, (await registerModel(server, name)).id));
    const statuses = async () => Promise.all(jobs.map((jobId) => statusOf(server, jobId)));
    await waitFor(statuses, (all) => all.filter((status) => status === 'RUNNING').length === 2);
    // The third is held in the queue, not merely late: every submit has enqueued its job by now.
    const check = await server.call('GET', '/v1/system-check', { auth: false });
    expect(check.body.cpu_queue).toMatchObject({
      success: true,
      running_jobs: 2,
      queued_jobs: 1,
      max_concurrent_jobs: 2,
    });
    expect((await statuses()).sort()).toEqual(['PENDING', 'RUNNING', 'RUNNING']);
    gate.open();
    for (const jobId of jobs) expect((await waitForJobEnd(server, jobId)).status).toBe('COMPLETED');
  });

  it('fails a job the engine rejects: FAILED, one training_failed, no checkpoint, no files', async () => {
    const server = await start({ engine: createStandInEngine() });
    const model = await registerModel(server, 'failing');
    const jobId = await submit(server, model.id, { learning_rate: -1 });
    const { events } = await followEvents(server, jobId);
    expect(events.map((event) => event.type)).toEqual(['training_failed']);
    expect(events[0]?.data).toEqual({ error_message: 'learning_rate must be positive, got -1' });
    const job = await server.call('GET', `/v1/preview/training-jobs/${jobId}`);
    expect(job.body).toMatchObject({ status: 'FAILED', error_message: 'learning_rate must be positive, got -1' });
    expect(job.body.training_end).not.toBeNull();
    expect((await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`)).body.data).toEqual([]);
    expect(existsSync(join(server.dataDir, 'weights', model.id, 'step-1'))).toBe(false);
    // The model's queue goes on: the next job trains to step 1.
    const next = await submit(server, model.id);
    expect((await waitForJobEnd(server, next)).status).toBe('COMPLETED');
    expect((await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`)).body.data[0].step).toBe(1);
  });

  it('with the real engine, fails an RL job of 0 trainable tokens: one training_failed, no checkpoint', async () => {
    const server = await start({});
    const model = await registerModel(server, 'nothing-to-train');
    const typo = { messages: [{ role: 'assistant', content: 'hi' }] }; // kept by the tolerant wire schema
    for (const trajectories of [
      [{ reward: 1 }, { reward: 0 }],
      [
        { ...typo, reward: 1 },
        { ...typo, reward: 0 },
      ],
    ]) {
      const created = await server.call('POST', '/v1/preview/training-jobs', {
        body: { model_id: model.id, trajectory_groups: [{ trajectories }] },
      });
      expect(created.status).toBe(200);
      const { events } = await followEvents(server, created.body.id);
      expect(events.map((event) => event.type)).toEqual(['training_failed']);
      const message = String(events[0]?.data['error_message']);
      expect(message).toMatch(/^The job has 0 trainable tokens: no trajectory has a Choice/);
      expect(message).toMatch(/among the 2 trajectories in 1 groups; messages are context only/);
      const job = await server.call('GET', `/v1/preview/training-jobs/${created.body.id}`);
      expect(job.body).toMatchObject({ status: 'FAILED', error_message: message });
      expect((await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`)).body.data).toEqual([]);
      expect(existsSync(join(server.dataDir, 'weights', model.id, 'step-1'))).toBe(false);
    }
  });

  it('long-polls events with wait_ms: an empty answer waits for the next event', async () => {
    const gate = createGate();
    const server = await start({ engine: createStandInEngine({ gate: gate.wait }) });
    const model = await registerModel(server, 'long-poll');
    const jobId = await submit(server, model.id);
    await waitFor(
      () => statusOf(server, jobId),
      (status) => status === 'RUNNING',
    );
    // The stand-in engine sends its first event only once the gate opens: the list is empty now.
    const held = server.call('GET', `/v1/preview/training-jobs/${jobId}/events?wait_ms=30000`);
    expect((await server.call('GET', `/v1/preview/training-jobs/${jobId}/events`)).body.data).toEqual([]);
    gate.open();
    const answer = await held;
    expect(answer.status).toBe(200);
    expect(answer.body.data[0]?.type).toBe('training_started');
    // A finished job's list answers at once, even with nothing after the cursor.
    const { events } = await followEvents(server, jobId);
    const last = events[events.length - 1]?.id;
    const after = await server.call('GET', `/v1/preview/training-jobs/${jobId}/events?after=${last}&wait_ms=30000`);
    expect(after.body).toMatchObject({ data: [], has_more: false });
    expect((await server.call('GET', `/v1/preview/training-jobs/${jobId}/events?wait_ms=30001`)).status).toBe(422);
  });

  it('stops a running job when its model is deleted, and removes its files', async () => {
    const gate = createGate();
    const server = await start({ engine: createStandInEngine({ gate: gate.wait }) });
    const model = await registerModel(server, 'deleted-while-training');
    const jobId = await submit(server, model.id);
    const queued = await submit(server, model.id);
    await waitFor(
      () => statusOf(server, jobId),
      (status) => status === 'RUNNING',
    );
    const deleted = await server.call('DELETE', `/v1/preview/models/${model.id}`);
    expect(deleted.status).toBe(200);
    expect((await server.call('GET', `/v1/preview/training-jobs/${jobId}`)).status).toBe(404);
    expect((await server.call('GET', `/v1/preview/training-jobs/${queued}`)).status).toBe(404);
    expect(existsSync(join(server.dataDir, 'weights', model.id))).toBe(false);
    gate.open();
    expect((await server.call('GET', '/v1/system-check', { auth: false })).body.cpu_queue.running_jobs).toBe(0);
  });

  it('answers 404, not 500, to a completion whose checkpoint is deleted while it waits for the weights', async () => {
    const standIn = createStandInEngine();
    let loading = (): void => undefined;
    const loadStarted = new Promise<void>((resolve) => {
      loading = resolve;
    });
    let release = (): void => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    // Loads a checkpoint's weights as the real engine does: from its directory, when the batch runs.
    const engine = {
      ...standIn,
      async chatCompletion(policy: PolicyRef, request: ChatCompletionRequestBody) {
        if (policy.checkpointPath !== null) {
          loading();
          await released;
          await readFile(join(policy.checkpointPath, 'weights.json'));
        }
        return standIn.chatCompletion(policy, request);
      },
    };
    const server = await start({ engine });
    const model = await registerModel(server, 'vanishing');
    expect((await waitForJobEnd(server, await submit(server, model.id))).status).toBe('COMPLETED');
    const asked = server.call('POST', '/v1/chat/completions', {
      body: {
        model: 'wandb-artifact:///local/server-tests/vanishing:step1',
        messages: [{ role: 'user', content: 'hi' }],
      },
    });
    await loadStarted;
    expect(
      (await server.call('DELETE', `/v1/preview/models/${model.id}/checkpoints`, { body: { steps: [1] } })).body
        .deleted_count,
    ).toBe(1);
    release();
    const response = await asked;
    expect(response.status).toBe(404);
    expect(response.body.detail).toMatch(/checkpoint was deleted/);
  });

  it('gives running and queued jobs their terminal event when the service stops', async () => {
    const dataDir = temporaryDirectory();
    const first = await startListening({ dataDir, engine: createStandInEngine({ gate: createGate().wait }) });
    const model = await registerModel(first, 'stopped');
    const running = await submit(first, model.id);
    const queued = await submit(first, model.id);
    await waitFor(
      () => statusOf(first, running),
      (status) => status === 'RUNNING',
    );
    await first.close(false);
    const afterStop = await first.call('GET', '/v1/system-check', { auth: false }).catch(() => undefined);
    expect(afterStop).toBeUndefined();

    const second = await start({ dataDir, engine: createStandInEngine() });
    for (const [jobId, message] of [
      [running, /stopped while the job was running/],
      [queued, /stopped before the job started/],
    ] as const) {
      const { events } = await followEvents(second, jobId);
      expect(
        events.filter((event) => event.type === 'training_failed' || event.type === 'training_ended'),
      ).toHaveLength(1);
      expect(events[events.length - 1]?.data['error_message']).toMatch(message);
      expect((await second.call('GET', `/v1/preview/training-jobs/${jobId}`)).body.status).toBe('FAILED');
    }
  });

  it('refuses a second service on a data directory in use, and allows it after close', async () => {
    const dataDir = temporaryDirectory();
    const first = await start({ dataDir, engine: createStandInEngine() });
    await expect(startApp({ dataDir, engine: createStandInEngine() })).rejects.toThrow(
      /already used by another service/,
    );
    await first.close(false);
    const second = await start({ dataDir, engine: createStandInEngine() });
    expect((await second.call('GET', '/v1/health')).status).toBe(200);
  });

  it('lets in-flight requests finish when it stops listening', async () => {
    const engine = createStandInEngine({ completionDelayMs: 300 });
    const server = await startServer({ engine });
    const inFlight = server.call('POST', '/v1/chat/completions', {
      body: { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'slow' }] },
    });
    await engine.completionsStarted(1);
    const closing = server.close();
    const response = await inFlight;
    expect(response.status).toBe(200);
    expect(response.body.choices[0].message.content).toBe('echo 0: slow');
    // The client is told not to reuse the connection, so close need not wait for its keep-alive timer.
    expect(response.headers.get('connection')).toBe('close');
    await closing;
    await expect(fetch(`${server.handle.url}/v1/health`)).rejects.toThrow();
  });

  it('answers 503 once closed, and its system check says so', async () => {
    const { createApp } = await import('policyloop/server');
    const app = await createApp({ dataDir: temporaryDirectory(), engine: createStandInEngine() });
    const ask = (path: string) =>
      app.fetch(new Request(`http://local${path}`, { headers: { authorization: 'Bearer policyloop-local-dev-key' } }));
    expect((await ask('/v1/system-check')).status).toBe(200);
    expect((await ask('/v1/models')).status).toBe(200);
    await app.close();
    const check = await ask('/v1/system-check');
    expect(check.status).toBe(503);
    expect(await check.json()).toMatchObject({ api: true, database: { success: false } });
    expect((await ask('/v1/models')).status).toBe(503);
    expect((await ask('/v1/health')).status).toBe(200);
  });
});
