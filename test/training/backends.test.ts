/**
 * What differs between the backends: keys, the default learning rate each sends, and how SFT data
 * reaches the service. The hosted backend is driven through an injected fetch (no network); the
 * local one through the real service, also reached by URL as a running service.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LEARNING_RATE } from '../../src/engine/index.js';
import { recordTrajectory } from '../../src/rollout/rollout-scope.js';
import { HostedBackend } from '../../src/backends/hosted-backend.js';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { TrainableModel } from '../../src/training/trainable-model.js';

const MODEL_ID = '00000000-0000-4000-8000-0000000000c1';
const JOB_ID = '00000000-0000-4000-8000-0000000000c2';
const EVENT_ID = '00000000-0000-4000-8000-0000000000c3';
const CHECKPOINT_ID = '00000000-0000-4000-8000-0000000000c4';

/** A hosted service stand-in: answers what the model handle calls, recording every request body. */
function hostedStandIn() {
  const requests: Array<{
    method: string;
    host: string;
    path: string;
    body: unknown;
    authorization: string | null;
    project: string | null;
  }> = [];
  let trained = false;
  const json = (body: unknown) =>
    new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = new URL(String(input));
    const method = init?.method ?? 'GET';
    requests.push({
      method,
      host: url.host,
      path: url.pathname,
      body: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined,
      authorization: new Headers(init?.headers).get('authorization'),
      project: new Headers(init?.headers).get('openai-project'),
    });
    if (url.pathname === '/v1/models' && method === 'GET') {
      return json({
        object: 'list',
        data: [{ id: 'OpenPipe/Qwen3-14B-Instruct', object: 'model', created: 0, owned_by: 'w' }],
      });
    }
    if (url.pathname.endsWith('/preview/models')) {
      return json({
        id: MODEL_ID,
        entity: 'my-team',
        project: 'p',
        name: 'm',
        base_model: 'OpenPipe/Qwen3-14B-Instruct',
        run_id: null,
      });
    }
    if (url.pathname.endsWith('/checkpoints')) {
      const data = trained ? [{ id: CHECKPOINT_ID, step: 1, metrics: {} }] : [];
      return json({ object: 'list', data, first_id: '', last_id: '', has_more: false });
    }
    if (url.pathname.endsWith('/training-jobs') || url.pathname.endsWith('/sft-training-jobs'))
      return json({ id: JOB_ID });
    if (url.pathname.endsWith('/events')) {
      trained = true;
      return json({
        object: 'list',
        data: [{ id: EVENT_ID, type: 'training_ended', data: {} }],
        first_id: '',
        last_id: '',
        has_more: false,
      });
    }
    if (url.pathname.endsWith('/log')) return json({});
    if (url.pathname.endsWith('/chat/completions')) {
      const body = JSON.parse(String(init?.body)) as { model: string };
      const logprobs = {
        content: [{ token: 'hi', bytes: [104, 105], logprob: -0.1, top_logprobs: [] }],
        refusal: null,
      };
      const choice = {
        index: 0,
        finish_reason: 'stop',
        message: { role: 'assistant', content: 'hi', refusal: null },
        logprobs,
      };
      return json({ id: 'chatcmpl-1', object: 'chat.completion', created: 0, model: body.model, choices: [choice] });
    }
    return new Response(JSON.stringify({ detail: 'not found' }), { status: 404 });
  };
  return { fetch: fetch as typeof globalThis.fetch, requests };
}

function groupWithLogprobs() {
  return {
    trajectories: [0, 1].map((reward) => ({
      reward,
      messages_and_choices: [
        { role: 'user' as const, content: 'q' },
        {
          index: 0,
          finish_reason: 'stop' as const,
          message: { role: 'assistant' as const, content: 'a' },
          logprobs: { content: [{ token: 'a', logprob: -0.5, top_logprobs: [] }] },
        },
      ],
    })),
  };
}

describe('HostedBackend', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-hosted-'));
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('fails at construction without a key, naming WANDB_API_KEY', () => {
    const saved = { policyloop: process.env['POLICYLOOP_API_KEY'], wandb: process.env['WANDB_API_KEY'] };
    delete process.env['POLICYLOOP_API_KEY'];
    delete process.env['WANDB_API_KEY'];
    try {
      expect(() => new HostedBackend()).toThrow(/WANDB_API_KEY/);
    } finally {
      if (saved.policyloop !== undefined) process.env['POLICYLOOP_API_KEY'] = saved.policyloop;
      if (saved.wandb !== undefined) process.env['WANDB_API_KEY'] = saved.wandb;
    }
  });

  it('lists models on the inference API and samples trained models on the training host', async () => {
    const saved = process.env['POLICYLOOP_INFERENCE_BASE_URL'];
    delete process.env['POLICYLOOP_INFERENCE_BASE_URL'];
    try {
      const service = hostedStandIn();
      const backend = new HostedBackend({ apiKey: 'wandb-key', fetch: service.fetch, dataDir });
      const { client } = await backend.connect();
      const list = await client.inference.models.list({ project: 'my-team/p' });
      expect(list.data.map((entry) => entry.id)).toEqual(['OpenPipe/Qwen3-14B-Instruct']);
      expect(service.requests.at(-1)).toMatchObject({
        method: 'GET',
        host: 'api.inference.wandb.ai',
        path: '/v1/models',
        authorization: 'Bearer wandb-key',
        project: 'my-team/p',
      });

      const model = await new TrainableModel({
        project: 'p',
        name: 'm',
        baseModel: 'OpenPipe/Qwen3-14B-Instruct',
      }).register(backend);
      await model
        .openai()
        .chat.completions.create({ model: model.inferenceName(), messages: [{ role: 'user', content: 'q' }] });
      expect(service.requests.at(-1)).toMatchObject({
        method: 'POST',
        host: 'api.training.wandb.ai',
        path: '/v1/chat/completions',
      });
      expect(model.inferenceBaseURL).toBe('https://api.training.wandb.ai/v1');
    } finally {
      if (saved !== undefined) process.env['POLICYLOOP_INFERENCE_BASE_URL'] = saved;
    }
  });

  it('takes the inference API and the chat URL as separate options', async () => {
    const service = hostedStandIn();
    const backend = new HostedBackend({
      apiKey: 'wandb-key',
      baseURL: 'https://training.test/v1',
      inferenceApiBaseURL: 'https://inference.test/v1',
      inferenceBaseURL: 'https://chat.test/v1',
      fetch: service.fetch,
      dataDir,
    });
    const { client } = await backend.connect();
    await client.inference.models.list();
    expect(service.requests.at(-1)).toMatchObject({ host: 'inference.test', path: '/v1/models', project: null });
    const model = await new TrainableModel({
      project: 'p',
      name: 'm',
      baseModel: 'OpenPipe/Qwen3-14B-Instruct',
    }).register(backend);
    expect(service.requests.at(-1)).toMatchObject({ host: 'training.test', path: '/v1/preview/models' });
    await model
      .openai()
      .chat.completions.create({ model: model.inferenceName(), messages: [{ role: 'user', content: 'q' }] });
    expect(service.requests.at(-1)).toMatchObject({ host: 'chat.test', path: '/v1/chat/completions' });
  });

  it('refuses object metadata before anything is sent, and sends a naive start_time as UTC', async () => {
    const service = hostedStandIn();
    const backend = new HostedBackend({
      apiKey: 'wandb-key',
      baseURL: 'https://hosted.test/v1',
      fetch: service.fetch,
      dataDir,
    });
    const model = await new TrainableModel({
      project: 'p',
      name: 'm',
      baseModel: 'OpenPipe/Qwen3-14B-Instruct',
    }).register(backend);
    const nested = { trajectories: [{ reward: 1, metadata: { source: { name: 'x' } } as never }] };
    await expect(model.log({ groups: [nested], split: 'val' })).rejects.toThrow(
      /trajectories\[0\]\.metadata\.source: Expected a string, number, boolean or null .*JSON\.stringify/,
    );
    expect(service.requests.some((request) => request.path.endsWith('/log'))).toBe(false);

    const naive = { trajectories: [{ reward: 1, start_time: '2025-06-01T12:00:00.5', metadata: { task: 't-1' } }] };
    await model.log({ groups: [naive], split: 'val' });
    await model.flushLogs();
    const sent = service.requests.find((request) => request.path.endsWith('/log'))?.body as {
      trajectory_groups: Array<{ trajectories: Array<{ start_time: string; metadata: unknown }> }>;
    };
    expect(sent.trajectory_groups[0]?.trajectories[0]).toMatchObject({
      start_time: '2025-06-01T12:00:00.5Z',
      metadata: { task: 't-1' },
    });
  });

  it('sends the key, leaves the learning rate to the service, and needs a URL for SFT data', async () => {
    const service = hostedStandIn();
    const backend = new HostedBackend({
      apiKey: 'wandb-key',
      baseURL: 'https://hosted.test',
      fetch: service.fetch,
      dataDir,
    });
    const model = await new TrainableModel({
      project: 'p',
      name: 'm',
      baseModel: 'OpenPipe/Qwen3-14B-Instruct',
    }).register(backend);
    expect(model.inferenceName()).toBe('wandb-artifact:///my-team/p/m');
    expect(model.files.history).toBe(path.join(dataDir, 'p', 'models', 'm', 'history.jsonl'));
    expect(service.requests[0]).toMatchObject({
      method: 'POST',
      path: '/v1/preview/models',
      authorization: 'Bearer wandb-key',
    });

    const result = await model.train([groupWithLogprobs()], { log: false });
    expect(result.step).toBe(1);
    const job = service.requests.find((request) => request.path === '/v1/preview/training-jobs');
    expect(
      ((job?.body ?? {}) as { experimental_config: Record<string, unknown> }).experimental_config,
    ).not.toHaveProperty('learning_rate');

    const rows = [
      {
        messages: [
          { role: 'user' as const, content: 'q' },
          { role: 'assistant' as const, content: 'a' },
        ],
      },
    ];
    await expect(model.trainSFT(rows)).rejects.toThrow(/upload the file .* `trainingDataUrl`/);
    await expect(model.trainSFT('local.jsonl')).rejects.toThrow(/trainingDataUrl/);
    await model.trainSFT(undefined, { trainingDataUrl: 'wandb-artifact:///my-team/p/sft:v0' });
    const sft = service.requests.find((request) => request.path === '/v1/preview/sft-training-jobs');
    expect(sft?.body).toMatchObject({ model_id: MODEL_ID, training_data_url: 'wandb-artifact:///my-team/p/sft:v0' });
    await model.close();
  });
});

describe('the one-line switch', () => {
  it("keeps the models' local files under .policyloop in the working directory by default, with both backends", () => {
    expect(new LocalBackend().dataDir).toBe(path.resolve('.policyloop'));
    expect(new HostedBackend({ apiKey: 'key' }).dataDir).toBe(path.resolve('.policyloop'));
  });

  it('hands out an OpenAI client bound to the hosted service: its key, its inference URL, this model, logprobs on', async () => {
    const service = hostedStandIn();
    const backend = new HostedBackend({
      apiKey: 'wandb-key',
      baseURL: 'https://hosted.test/v1',
      inferenceBaseURL: 'https://inference.test/v1',
      fetch: service.fetch,
      dataDir: path.join(tmpdir(), 'policyloop-hosted-openai'),
    });
    const model = await new TrainableModel({
      project: 'p',
      name: 'm',
      baseModel: 'OpenPipe/Qwen3-14B-Instruct',
    }).register(backend);
    const { trajectory } = await recordTrajectory(() =>
      model.openai({ step: 3 }).chat.completions.create({ model: '', messages: [{ role: 'user', content: 'hello' }] }),
    );
    const request = service.requests.find((entry) => entry.path.endsWith('/chat/completions'));
    expect(request).toMatchObject({
      method: 'POST',
      host: 'inference.test',
      path: '/v1/chat/completions',
      authorization: 'Bearer wandb-key',
      body: { model: 'wandb-artifact:///my-team/p/m:step3', logprobs: true },
    });
    expect(
      service.requests
        .filter((entry) => entry.path.startsWith('/v1/preview'))
        .every((entry) => entry.host === 'hosted.test'),
    ).toBe(true);
    // The captured Choice keeps the hosted service's logprobs, as on the local backend.
    expect(trajectory.messages_and_choices).toHaveLength(2);
    expect(JSON.stringify(trajectory.messages_and_choices?.[1])).toContain('"logprob":-0.1');
  });
});

describe('LocalBackend', () => {
  let dataDir: string;
  let backend: LocalBackend;
  const jobBodies: unknown[] = [];
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-local-'));
    const recording: typeof globalThis.fetch = async (input, init) => {
      if (String(input).endsWith('/preview/training-jobs')) jobBodies.push(JSON.parse(String(init?.body)));
      return fetch(input, init);
    };
    backend = await LocalBackend.start({ dataDir, fetch: recording });
  });
  afterAll(async () => {
    await backend?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("sends the engine's documented default learning rate when none is given", async () => {
    const model = await new TrainableModel({ project: 'p', name: 'lr', baseModel: 'policyloop/tiny-chat' }).register(
      backend,
    );
    await model.train([groupWithLogprobs()], { log: false, allowTrainingWithoutLogprobs: true });
    await model.train([groupWithLogprobs()], {
      log: false,
      allowTrainingWithoutLogprobs: true,
      learningRate: 0.001,
    });
    const rates = jobBodies.map(
      (body) => (body as { experimental_config: { learning_rate?: number } }).experimental_config.learning_rate,
    );
    expect(rates).toEqual([DEFAULT_LEARNING_RATE, 0.001]);
  });

  it('stops waiting for the service when the signal of register aborts, and the start still completes', async () => {
    const starting = new LocalBackend({ dataDir: path.join(dataDir, 'aborted-start') });
    try {
      const model = new TrainableModel({ project: 'p', name: 'aborted', baseModel: 'policyloop/tiny-chat' });
      await expect(model.register(starting, { signal: AbortSignal.abort(new Error('user stop')) })).rejects.toThrow(
        'user stop',
      );
      // It stopped waiting at once: the service was not up yet.
      expect(() => starting.baseURL).toThrow(/not started yet/);
      expect(model.isRegistered).toBe(false);
      await model.register(starting);
      expect(await model.getStep()).toBe(0);
    } finally {
      await starting.close();
    }
  });

  it('connects to a running service by URL with the development key', async () => {
    const first = await new TrainableModel({
      project: 'p',
      name: 'shared',
      baseModel: 'policyloop/tiny-chat',
    }).register(backend);
    const byUrl = new LocalBackend({ url: backend.baseURL, dataDir });
    const second = await new TrainableModel({
      project: 'p',
      name: 'shared',
      baseModel: 'policyloop/tiny-chat',
    }).register(byUrl);
    expect(second.id).toBe(first.id);
    await byUrl.close();
    // Closing a backend that connected by URL leaves the service running.
    expect(await first.getStep()).toBe(0);
  });
});
