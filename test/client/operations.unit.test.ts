import { describe, expect, it } from 'vitest';
import { APIUserAbortError, InvalidArgumentError } from 'policyloop';
import { TrainingClient, VERSION, type RequestOptions } from 'policyloop/client';
import { fakeFetch, json, type Reply } from './fake-fetch.js';
import { isSystemCheckObject } from 'policyloop/schema';
import { fullJob, group, JOB_ID, MODEL_ID, modelResponse, uuid } from './fixtures.js';

const BASE = 'http://127.0.0.1:8000/v1';

function setup(...replies: Reply[]) {
  const fake = fakeFetch(...replies);
  const client = new TrainingClient({ apiKey: 'sk-test', baseURL: BASE, fetch: fake.fetch, maxRetries: 0 });
  return { client, ...fake };
}

/** The only request sent, failing the test when there was not exactly one. */
function only(requests: { method: string; url: URL; headers: Headers; body: string }[]) {
  expect(requests).toHaveLength(1);
  const request = requests[0];
  if (request === undefined) throw new Error('no request');
  return request;
}

describe('every operation sends the contract request and returns the parsed response', () => {
  it('health: GET /v1/health', async () => {
    const { client, requests } = setup(json({ status: 'ok' }));
    await expect(client.health()).resolves.toEqual({ status: 'ok' });
    const request = only(requests);
    expect(request.method).toBe('GET');
    expect(request.url.href).toBe(`${BASE}/health`);
    expect(request.body).toBe('');
    expect(request.headers.get('content-type')).toBeNull();
  });

  it('systemCheck: GET /v1/system-check', async () => {
    const checks = { api: true, database: true, cpu_queue: { success: true }, gpu_queue: { success: true } };
    const { client, requests } = setup(json(checks));
    await expect(client.systemCheck()).resolves.toEqual(checks);
    expect(only(requests).url.pathname).toBe('/v1/system-check');
  });

  it('systemCheck accepts any JSON from a hosted service: the contract gives the 200 an empty schema', async () => {
    for (const body of [{}, { status: 'ok' }, { api: 'up', queues: [] }, 'ok', [1], null]) {
      const { client, requests } = setup(json(body));
      await expect(client.systemCheck()).resolves.toEqual(body);
      expect(only(requests).url.pathname).toBe('/v1/system-check');
    }
    const { client } = setup(json({ api: true, gpu_queue: { success: false, error: 'no workers' }, region: 'us' }));
    const report = await client.systemCheck();
    expect(isSystemCheckObject(report) && report.gpu_queue?.success).toBe(false);
    expect(isSystemCheckObject('ok')).toBe(false);
    expect(isSystemCheckObject({ api: 'up' })).toBe(false);
  });

  it('baseModels.list: GET /v1/preview/base-models', async () => {
    const { client, requests } = setup(json(['Qwen/Qwen2.5-14B-Instruct', 'policyloop/tiny']));
    await expect(client.baseModels.list()).resolves.toEqual(['Qwen/Qwen2.5-14B-Instruct', 'policyloop/tiny']);
    const request = only(requests);
    expect(request.method).toBe('GET');
    expect(request.url.pathname).toBe('/v1/preview/base-models');
  });

  it('models.create: POST /v1/preview/models with the body, defaults applied', async () => {
    const { client, requests } = setup(json({ ...modelResponse, extra: 'kept by the service' }));
    const model = await client.models.create({
      entity: null,
      project: 'demo',
      name: 'agent-001',
      base_model: 'Qwen/Qwen2.5-14B-Instruct',
    });
    expect(model.id).toBe(MODEL_ID);
    expect(model.run_id).toBeNull();
    const request = only(requests);
    expect(request.method).toBe('POST');
    expect(request.url.href).toBe(`${BASE}/preview/models`);
    expect(request.body).toBe(
      '{"entity":null,"project":"demo","name":"agent-001","base_model":"Qwen/Qwen2.5-14B-Instruct","return_existing":false}',
    );
    expect(request.headers.get('content-type')).toBe('application/json');
  });

  it('models.delete: DELETE /v1/preview/models/{id}, the id URL-encoded', async () => {
    const { client, requests } = setup(json({ model_id: MODEL_ID, deleted_checkpoints: 3, deleted_run: true }));
    await expect(client.models.delete(MODEL_ID)).resolves.toEqual({
      model_id: MODEL_ID,
      deleted_checkpoints: 3,
      deleted_run: true,
    });
    expect(only(requests).method).toBe('DELETE');
    expect(requests[0]?.url.pathname).toBe(`/v1/preview/models/${MODEL_ID}`);

    const odd = setup(json({ model_id: MODEL_ID, deleted_checkpoints: 0, deleted_run: false }));
    await odd.client.models.delete('a/b c?d');
    expect(only(odd.requests).url.pathname).toBe('/v1/preview/models/a%2Fb%20c%3Fd');
  });

  it('models.log: POST /v1/preview/models/{id}/log with trajectory groups', async () => {
    const { client, requests } = setup(json({ logged: true }));
    await expect(
      client.models.log(MODEL_ID, { split: 'val', trajectory_groups: [group], model_id: MODEL_ID }),
    ).resolves.toEqual({ logged: true });
    const request = only(requests);
    expect(request.method).toBe('POST');
    expect(request.url.pathname).toBe(`/v1/preview/models/${MODEL_ID}/log`);
    const sent = JSON.parse(request.body);
    expect(sent.split).toBe('val');
    expect(sent.model_id).toBe(MODEL_ID);
    // The choice travels as a raw Choice (no role), with its logprobs.
    expect(sent.trajectory_groups[0].trajectories[0].messages_and_choices[2]).toEqual(
      group.trajectories[0]?.messages_and_choices?.[2],
    );
  });

  it('checkpoints.list: GET .../checkpoints with after, limit and order in the query', async () => {
    const page = {
      object: 'list',
      data: [{ id: uuid(9), step: 4, metrics: { reward: 0.5 } }],
      first_id: uuid(9),
      last_id: uuid(9),
      has_more: false,
    };
    const { client, requests } = setup(json(page));
    const first = await client.checkpoints.list(MODEL_ID, { after: uuid(1), limit: 1, order: 'desc' });
    expect(first.data).toEqual(page.data);
    expect(first.has_more).toBe(false);
    const request = only(requests);
    expect(request.method).toBe('GET');
    expect(request.url.pathname).toBe(`/v1/preview/models/${MODEL_ID}/checkpoints`);
    expect(Object.fromEntries(request.url.searchParams)).toEqual({ after: uuid(1), limit: '1', order: 'desc' });
  });

  it('checkpoints.list without a query sends no query string', async () => {
    const { client, requests } = setup(json({ object: 'list', data: [], first_id: '', last_id: '', has_more: false }));
    await client.checkpoints.list(MODEL_ID);
    expect(only(requests).url.search).toBe('');
  });

  it('checkpoints.delete: DELETE .../checkpoints with a JSON body of steps', async () => {
    const { client, requests } = setup(json({ deleted_count: 1, not_found_steps: [7] }));
    await expect(client.checkpoints.delete(MODEL_ID, { steps: [2, 7] })).resolves.toEqual({
      deleted_count: 1,
      not_found_steps: [7],
    });
    const request = only(requests);
    expect(request.method).toBe('DELETE');
    expect(request.url.pathname).toBe(`/v1/preview/models/${MODEL_ID}/checkpoints`);
    expect(request.body).toBe('{"steps":[2,7]}');
    expect(request.headers.get('content-type')).toBe('application/json');
  });

  it('jobs.createRL: POST /v1/preview/training-jobs with groups and the experimental config', async () => {
    const { client, requests } = setup(json({ id: JOB_ID }));
    const config = { learning_rate: 1e-5, loss_fn: 'cispo' as const, ppo: null, epsilon: null };
    await expect(
      client.jobs.createRL({ model_id: MODEL_ID, trajectory_groups: [group], experimental_config: config }),
    ).resolves.toEqual({ id: JOB_ID });
    const request = only(requests);
    expect(request.method).toBe('POST');
    expect(request.url.pathname).toBe('/v1/preview/training-jobs');
    const sent = JSON.parse(request.body);
    expect(sent.model_id).toBe(MODEL_ID);
    expect(sent.experimental_config).toEqual(config);
    expect(sent.trajectory_groups[0].trajectories[0].reward).toBe(1);
  });

  it('jobs.createSFT: POST /v1/preview/sft-training-jobs', async () => {
    const { client, requests } = setup(json(fullJob));
    await client.jobs.createSFT({
      model_id: MODEL_ID,
      training_data_url: 'file:///tmp/data.jsonl',
      config: { batch_size: 'auto', learning_rate: 1e-4 },
    });
    const request = only(requests);
    expect(request.url.pathname).toBe('/v1/preview/sft-training-jobs');
    expect(request.body).toBe(
      `{"model_id":"${MODEL_ID}","training_data_url":"file:///tmp/data.jsonl","config":{"batch_size":"auto","learning_rate":0.0001,"assistant_turns":"all"}}`,
    );
  });

  it('jobs.retrieve: GET /v1/preview/training-jobs/{id}, accepting the short {id} form', async () => {
    const { client, requests } = setup(json({ id: JOB_ID }));
    const job = await client.jobs.retrieve(JOB_ID);
    expect(job).toEqual({ id: JOB_ID });
    expect(job.status).toBeUndefined();
    expect(only(requests).url.pathname).toBe(`/v1/preview/training-jobs/${JOB_ID}`);
  });

  it('jobs.retrieve accepts the full form with status, progress and timestamps', async () => {
    const { client } = setup(json(fullJob));
    const job = await client.jobs.retrieve(JOB_ID);
    expect(job.status).toBe('RUNNING');
    expect(job.progress).toBe(0.5);
    expect(job.training_end).toBeNull();
  });

  it('jobs.events: GET .../events with after and limit', async () => {
    const events = [
      { id: uuid(1), type: 'training_started', data: { num_sequences: 2 } },
      { id: uuid(2), type: 'gradient_step', data: { loss: 0.25 } },
    ];
    const { client, requests } = setup(
      json({ object: 'list', data: events, first_id: uuid(1), last_id: uuid(2), has_more: false }),
    );
    const page = await client.jobs.events(JOB_ID, { after: uuid(0), limit: 50 });
    expect(page.data).toEqual(events);
    const request = only(requests);
    expect(request.url.pathname).toBe(`/v1/preview/training-jobs/${JOB_ID}/events`);
    expect(Object.fromEntries(request.url.searchParams)).toEqual({ after: uuid(0), limit: '50' });
  });

  it('inference.models.list: GET /v1/models on the inference base URL with OpenAI-Project', async () => {
    const fake = fakeFetch(json({ object: 'list', data: [{ id: 'OpenPipe/Qwen3-14B-Instruct', object: 'model' }] }));
    const client = new TrainingClient({
      apiKey: 'sk-test',
      baseURL: BASE,
      inferenceBaseURL: 'http://127.0.0.1:9000',
      fetch: fake.fetch,
    });
    const list = await client.inference.models.list({ project: 'my-team/demo' });
    expect(list.data.map((model) => model.id)).toEqual(['OpenPipe/Qwen3-14B-Instruct']);
    const request = only(fake.requests);
    expect(request.url.href).toBe('http://127.0.0.1:9000/v1/models');
    expect(request.headers.get('openai-project')).toBe('my-team/demo');
    expect(request.headers.get('authorization')).toBe('Bearer sk-test');
  });

  it('inference.models.list takes the request options second; beside `project` they are refused, nothing sent', async () => {
    const fake = fakeFetch(json({ object: 'list', data: [] }));
    const client = new TrainingClient({ apiKey: 'k', baseURL: BASE, fetch: fake.fetch, maxRetries: 0 });
    await client.inference.models.list({ project: 't/p' }, { headers: { 'X-Call': 'apart' }, timeout: 5_000 });
    const request = only(fake.requests);
    expect(request.headers.get('openai-project')).toBe('t/p');
    expect(request.headers.get('x-call')).toBe('apart');
    await expect(
      client.inference.models.list({ project: 't/p', timeout: 5_000 } as unknown as { project: string }),
    ).rejects.toThrow(/Invalid params for GET \/models: .*"timeout"/);
    await expect(client.inference.models.list({}, { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
      APIUserAbortError,
    );
    expect(fake.calls()).toBe(1);
  });

  it('inference.models.list refuses an unknown parameter when the request options come apart', async () => {
    const { client, requests } = setup(json({ object: 'list', data: [] }));
    await expect(client.inference.models.list({ projet: 't/p' } as unknown as { project: string }, {})).rejects.toThrow(
      InvalidArgumentError,
    );
    expect(requests).toHaveLength(0);
  });

  it('inference.models.list without a project sends no OpenAI-Project header', async () => {
    const { client, requests } = setup(json({ object: 'list', data: [] }));
    await client.inference.models.list();
    expect(only(requests).url.href).toBe('https://api.inference.wandb.ai/v1/models');
    expect(requests[0]?.headers.get('openai-project')).toBeNull();
  });
});

describe('headers', () => {
  it('sends the key, Accept, the version and the caller headers, the call winning over the client', async () => {
    const fake = fakeFetch(json({}));
    const client = new TrainingClient({
      apiKey: 'sk-test',
      baseURL: BASE,
      fetch: fake.fetch,
      defaultHeaders: { 'X-Team': 'a', 'X-Trace': 'client' },
    });
    await client.health({ headers: { 'X-Trace': 'call' } });
    const headers = fake.requests[0]?.headers;
    expect(headers?.get('authorization')).toBe('Bearer sk-test');
    expect(headers?.get('accept')).toBe('application/json');
    expect(headers?.get('x-policyloop-version')).toBe(VERSION);
    expect(headers?.get('x-team')).toBe('a');
    expect(headers?.get('x-trace')).toBe('call');
  });

  it('a header option cannot replace the key', async () => {
    const { client, requests } = setup(json({}));
    await client.health({ headers: { Authorization: 'Bearer other' } });
    expect(requests[0]?.headers.get('authorization')).toBe('Bearer sk-test');
  });
});

describe('bad arguments fail before any request, with the zod issues as data', () => {
  it('an RL job without trajectory groups', async () => {
    const { client, calls } = setup(json({ id: JOB_ID }));
    // @ts-expect-error: the missing field is the point
    const error = await captured(() => client.jobs.createRL({ model_id: MODEL_ID }));
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(calls()).toBe(0);
    if (!(error instanceof InvalidArgumentError)) return;
    expect(error.argument).toBe('body');
    expect(error.issues[0]?.path).toEqual(['trajectory_groups']);
    expect(error.message).toContain('trajectory_groups');
    expect(error.message).toContain('POST /preview/training-jobs');
  });

  it('an SFT config with an unknown key (the schema is closed)', async () => {
    const { client, calls } = setup(json({ id: JOB_ID }));
    const body = { model_id: MODEL_ID, training_data_url: 'x', config: { epochs: 3 } };
    await expect(client.jobs.createSFT(body as never)).rejects.toThrow(/config/);
    expect(calls()).toBe(0);
  });

  it('a model id that is not a UUID in an RL job, an empty path id, a limit out of range', async () => {
    const { client, calls } = setup(json({}));
    await expect(client.jobs.createRL({ model_id: 'nope', trajectory_groups: [] })).rejects.toThrow(
      InvalidArgumentError,
    );
    await expect(client.models.delete('')).rejects.toThrow(/modelId/);
    await expect(client.checkpoints.list(MODEL_ID, { limit: 500 })).rejects.toThrow(/limit/);
    await expect(client.jobs.events(JOB_ID, { limt: 5 } as never)).rejects.toThrow(InvalidArgumentError);
    await expect(client.jobs.events('')).rejects.toThrow(/jobId/);
    await expect(client.inference.models.list({ project: 'no-slash' })).rejects.toThrow(/team\/project/);
    expect(calls()).toBe(0);
  });
});

async function captured(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('every operation: per-call options, and paths under the hosted services’ /v1', () => {
  const emptyPage = { object: 'list', data: [], first_id: '', last_id: '', has_more: false };
  /** Each operation, the answer it expects, and its method and path relative to the base URL. */
  const operations: Array<{
    call: (client: TrainingClient, options?: RequestOptions) => PromiseLike<unknown>;
    answer: unknown;
    method: string;
    path: string;
  }> = [
    { call: (client, options) => client.health(options), answer: {}, method: 'GET', path: '/health' },
    {
      call: (client, options) => client.systemCheck(options),
      answer: { api: true, database: true, cpu_queue: { success: true }, gpu_queue: { success: true } },
      method: 'GET',
      path: '/system-check',
    },
    {
      call: (client, options) => client.baseModels.list(options),
      answer: [],
      method: 'GET',
      path: '/preview/base-models',
    },
    {
      call: (client, options) => client.models.create({ project: 'p', name: 'n', base_model: 'b' }, options),
      answer: modelResponse,
      method: 'POST',
      path: '/preview/models',
    },
    {
      call: (client, options) => client.models.delete(MODEL_ID, options),
      answer: { model_id: MODEL_ID, deleted_checkpoints: 0, deleted_run: false },
      method: 'DELETE',
      path: `/preview/models/${MODEL_ID}`,
    },
    {
      call: (client, options) => client.models.log(MODEL_ID, { split: 'train', trajectory_groups: [group] }, options),
      answer: {},
      method: 'POST',
      path: `/preview/models/${MODEL_ID}/log`,
    },
    {
      call: (client, options) => client.checkpoints.list(MODEL_ID, { limit: 1 }, options),
      answer: emptyPage,
      method: 'GET',
      path: `/preview/models/${MODEL_ID}/checkpoints?limit=1`,
    },
    {
      call: (client, options) => client.checkpoints.delete(MODEL_ID, { steps: [1] }, options),
      answer: { deleted_count: 1, not_found_steps: [] },
      method: 'DELETE',
      path: `/preview/models/${MODEL_ID}/checkpoints`,
    },
    {
      call: (client, options) => client.jobs.createRL({ model_id: MODEL_ID, trajectory_groups: [group] }, options),
      answer: { id: JOB_ID },
      method: 'POST',
      path: '/preview/training-jobs',
    },
    {
      call: (client, options) =>
        client.jobs.createSFT({ model_id: MODEL_ID, training_data_url: 'wandb-artifact:///e/p/data:v0' }, options),
      answer: { id: JOB_ID },
      method: 'POST',
      path: '/preview/sft-training-jobs',
    },
    {
      call: (client, options) => client.jobs.retrieve(JOB_ID, options),
      answer: fullJob,
      method: 'GET',
      path: `/preview/training-jobs/${JOB_ID}`,
    },
    {
      call: (client, options) => client.jobs.events(JOB_ID, { after: uuid(1) }, options),
      answer: emptyPage,
      method: 'GET',
      path: `/preview/training-jobs/${JOB_ID}/events?after=${uuid(1)}`,
    },
  ];

  it('every method takes the per-call options: headers reach the wire, a signal cancels', async () => {
    const all = [
      ...operations,
      {
        call: (client: TrainingClient, options?: RequestOptions) =>
          client.inference.models.list({ project: 't/p' }, options),
        answer: { object: 'list', data: [] },
        method: 'GET',
        path: '/models',
      },
    ];
    for (const { call, answer, path } of all) {
      const fake = fakeFetch(json(answer));
      const client = new TrainingClient({ apiKey: 'k', baseURL: BASE, fetch: fake.fetch, maxRetries: 0 });
      await call(client, { headers: { 'X-Call': path }, timeout: 5_000, maxRetries: 0 });
      expect(only(fake.requests).headers.get('x-call'), path).toBe(path);
      await expect(call(client, { signal: AbortSignal.abort() }), path).rejects.toBeInstanceOf(APIUserAbortError);
      expect(fake.calls(), `${path}: an aborted call sends nothing`).toBe(1);
      await expect(call(client, { timeout: -1 }), path).rejects.toThrow(InvalidArgumentError);
      await expect(call(client, { maxRetries: -1 }), path).rejects.toThrow(InvalidArgumentError);
      expect(fake.calls(), path).toBe(1);
    }
  });

  for (const hosted of ['https://api.training.wandb.ai/v1', 'https://forge.coreweave.com/api/training/v1']) {
    for (const given of [hosted, `${hosted}/`, hosted.slice(0, -'/v1'.length)]) {
      it(`baseURL ${given}`, async () => {
        for (const { call, answer, method, path } of operations) {
          const fake = fakeFetch(json(answer));
          await call(new TrainingClient({ apiKey: 'k', baseURL: given, fetch: fake.fetch, maxRetries: 0 }));
          const request = only(fake.requests);
          expect(`${request.method} ${request.url.href}`).toBe(`${method} ${hosted}${path}`);
          expect(request.headers.get('authorization')).toBe('Bearer k');
        }
      });
    }
  }
});
