/**
 * Bad input against the real local service: auth, FastAPI-shaped 422s with exact `loc`s,
 * malformed JSON, 413 before buffering and 404/405. Random input (no 5xx, ever) is fuzz.test.ts.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_API_KEY } from 'policyloop/server';
import { startApp, startServer, type TestApp } from './support/harness.js';
import { registerModel } from './support/jobs.js';
import { declaredResponses } from './support/openapi-responses.js';

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
let server: TestApp;
let modelId: string;

beforeAll(async () => {
  server = await startApp();
  modelId = (await registerModel(server, 'validation')).id;
});
afterAll(async () => {
  await server.close();
});

/** Every operation that needs a key, with a body that would otherwise be valid. */
function keyedOperations(): [string, string, unknown?][] {
  return [
    [
      'POST',
      '/v1/chat/completions',
      { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
    ],
    [
      'POST',
      '/v1/chat/completions/',
      { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
    ],
    ['GET', '/v1/models'],
    ['POST', '/v1/preview/models', { project: 'auth', name: 'never', base_model: 'policyloop/tiny-chat' }],
    ['DELETE', `/v1/preview/models/${modelId}`],
    ['GET', `/v1/preview/models/${modelId}/checkpoints`],
    ['DELETE', `/v1/preview/models/${modelId}/checkpoints`, { steps: [1] }],
    ['POST', `/v1/preview/models/${modelId}/log`, { split: 'train', trajectory_groups: [] }],
    ['POST', '/v1/preview/training-jobs', { model_id: modelId, trajectory_groups: [] }],
    ['POST', '/v1/preview/sft-training-jobs', { model_id: modelId, training_data_url: 'data:,x' }],
    ['GET', `/v1/preview/training-jobs/${UNKNOWN_ID}`],
    ['GET', `/v1/preview/training-jobs/${UNKNOWN_ID}/events`],
  ];
}

describe('auth', () => {
  it('answers 401 {"detail": string} without a key, with a wrong key or a malformed header, on every keyed operation', async () => {
    for (const [method, path, body] of keyedOperations()) {
      for (const auth of [false, 'wrong-key', `${DEV_API_KEY}x`]) {
        const response = await server.call(method, path, { body, auth });
        expect(response.status, `${method} ${path} with ${String(auth)}`).toBe(401);
        expect(typeof response.body.detail).toBe('string');
        expect(response.headers.get('www-authenticate')).toBe('Bearer');
        expect(response.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{32}$/);
      }
      const basic = await server.call(method, path, {
        body,
        auth: false,
        headers: { authorization: `Basic ${DEV_API_KEY}` },
      });
      expect(basic.status).toBe(401);
    }
    // The model still exists: the unauthorised DELETE touched nothing.
    expect((await server.call('GET', `/v1/preview/models/${modelId}/checkpoints`)).status).toBe(200);
    // And the unauthorised create created nothing.
    expect(
      (
        await server.call('POST', '/v1/preview/models', {
          body: { project: 'auth', name: 'never', base_model: 'policyloop/tiny-chat' },
        })
      ).status,
    ).toBe(200);
  });

  it('accepts any configured key and only those', async () => {
    const keyed = await startApp({ apiKeys: ['first-key', 'second-key'] });
    try {
      expect((await keyed.call('GET', '/v1/models', { auth: 'first-key' })).status).toBe(200);
      expect((await keyed.call('GET', '/v1/models', { auth: 'second-key' })).status).toBe(200);
      expect(
        (await keyed.call('GET', '/v1/models', { auth: false, headers: { authorization: 'bearer second-key' } }))
          .status,
      ).toBe(200);
      expect((await keyed.call('GET', '/v1/models', { auth: DEV_API_KEY })).status).toBe(401);
      expect((await keyed.call('GET', '/v1/health', { auth: false })).status).toBe(200);
      expect((await keyed.call('GET', '/v1/preview/base-models', { auth: false })).status).toBe(200);
    } finally {
      await keyed.close();
    }
  });
});

describe('422 in the FastAPI shape', () => {
  const choice = { finish_reason: 'stop', index: 0, message: { role: 'assistant', content: 'x' } };
  const group = (messagesAndChoices: unknown[], reward: unknown = 1) => ({
    trajectories: [{ reward: 1 }, { reward: 0 }, { messages_and_choices: messagesAndChoices, reward }],
  });
  const cases: {
    name: string;
    method: string;
    path: () => string;
    body?: unknown;
    raw?: string;
    loc: (string | number)[];
    type?: string;
  }[] = [
    {
      name: 'a wrong reward type',
      method: 'POST',
      path: () => `/v1/preview/models/${modelId}/log`,
      body: { split: 'train', trajectory_groups: [group([], 'high')] },
      loc: ['body', 'trajectory_groups', 0, 'trajectories', 2, 'reward'],
      type: 'float_type',
    },
    {
      // The primary contract takes scalar metadata values only: what passes here passes on the hosted service.
      name: 'an object in a trajectory metadata value',
      method: 'POST',
      path: () => `/v1/preview/models/${modelId}/log`,
      body: { split: 'train', trajectory_groups: [{ trajectories: [{ reward: 1, metadata: { tags: ['a'] } }] }] },
      loc: ['body', 'trajectory_groups', 0, 'trajectories', 0, 'metadata', 'tags'],
    },
    {
      name: 'a missing split',
      method: 'POST',
      path: () => `/v1/preview/models/${modelId}/log`,
      body: { trajectory_groups: [] },
      loc: ['body', 'split'],
      type: 'missing',
    },
    {
      name: 'a user message with bad content',
      method: 'POST',
      path: () => `/v1/preview/models/${modelId}/log`,
      body: { split: 'train', trajectory_groups: [group([{ role: 'user', content: 5 }])] },
      loc: ['body', 'trajectory_groups', 0, 'trajectories', 2, 'messages_and_choices', 0, 'content'],
    },
    {
      name: 'a user message without content',
      method: 'POST',
      path: () => `/v1/preview/models/${modelId}/log`,
      body: { split: 'train', trajectory_groups: [group([{ role: 'user' }])] },
      loc: ['body', 'trajectory_groups', 0, 'trajectories', 2, 'messages_and_choices', 0, 'content'],
      type: 'missing',
    },
    {
      name: 'an unknown role',
      method: 'POST',
      path: () => `/v1/preview/models/${modelId}/log`,
      body: { split: 'train', trajectory_groups: [group([{ role: 'robot', content: 'x' }])] },
      loc: ['body', 'trajectory_groups', 0, 'trajectories', 2, 'messages_and_choices', 0, 'role'],
    },
    {
      name: 'a choice with bad message content',
      method: 'POST',
      path: () => `/v1/preview/models/${modelId}/log`,
      body: {
        split: 'train',
        trajectory_groups: [
          group([
            { role: 'user', content: 'q' },
            { ...choice, message: { role: 'assistant', content: 3 } },
          ]),
        ],
      },
      loc: ['body', 'trajectory_groups', 0, 'trajectories', 2, 'messages_and_choices', 1, 'message', 'content'],
    },
    {
      name: 'a choice with a bad logprob',
      method: 'POST',
      path: () => `/v1/preview/models/${modelId}/log`,
      body: {
        split: 'train',
        trajectory_groups: [
          group([{ ...choice, logprobs: { content: [{ token: 'x', logprob: 'bad', top_logprobs: [] }] } }]),
        ],
      },
      loc: [
        'body',
        'trajectory_groups',
        0,
        'trajectories',
        2,
        'messages_and_choices',
        0,
        'logprobs',
        'content',
        0,
        'logprob',
      ],
    },
    {
      name: 'a choice with a bad finish reason',
      method: 'POST',
      path: () => '/v1/preview/training-jobs',
      body: { model_id: UNKNOWN_ID, trajectory_groups: [group([{ ...choice, finish_reason: 'tired' }])] },
      loc: ['body', 'trajectory_groups', 0, 'trajectories', 2, 'messages_and_choices', 0, 'finish_reason'],
      type: 'enum',
    },
    {
      name: 'a non-UUID model_id in a body',
      method: 'POST',
      path: () => '/v1/preview/training-jobs',
      body: { model_id: 'abc', trajectory_groups: [] },
      loc: ['body', 'model_id'],
      type: 'uuid_parsing',
    },
    {
      name: 'a bad experimental config value',
      method: 'POST',
      path: () => '/v1/preview/training-jobs',
      body: { model_id: modelId, trajectory_groups: [], experimental_config: { loss_fn: 'magic' } },
      loc: ['body', 'experimental_config', 'loss_fn'],
    },
    {
      name: 'empty messages',
      method: 'POST',
      path: () => '/v1/chat/completions',
      body: { model: 'policyloop/tiny-chat', messages: [] },
      loc: ['body', 'messages'],
      type: 'too_short',
    },
    {
      name: 'a message without role',
      method: 'POST',
      path: () => '/v1/chat/completions',
      body: { model: 'policyloop/tiny-chat', messages: [{ content: 'hi' }] },
      loc: ['body', 'messages', 0, 'role'],
    },
    {
      name: 'a temperature out of range',
      method: 'POST',
      path: () => '/v1/chat/completions',
      body: { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'hi' }], temperature: 5 },
      loc: ['body', 'temperature'],
      type: 'less_than_equal',
    },
    {
      name: 'a missing model',
      method: 'POST',
      path: () => '/v1/chat/completions',
      body: { messages: [{ role: 'user', content: 'hi' }] },
      loc: ['body', 'model'],
      type: 'missing',
    },
    {
      name: 'a non-integer step',
      method: 'DELETE',
      path: () => `/v1/preview/models/${modelId}/checkpoints`,
      body: { steps: [1, 'two'] },
      loc: ['body', 'steps', 1],
    },
    {
      name: 'a body that is not an object',
      method: 'POST',
      path: () => '/v1/preview/models',
      body: ['project'],
      loc: ['body'],
      type: 'dict_type',
    },
    {
      name: 'an empty body',
      method: 'POST',
      path: () => '/v1/preview/models',
      raw: '',
      loc: ['body'],
      type: 'missing',
    },
    {
      name: 'a limit of 0',
      method: 'GET',
      path: () => `/v1/preview/models/${modelId}/checkpoints?limit=0`,
      loc: ['query', 'limit'],
    },
    {
      name: 'a limit of 101',
      method: 'GET',
      path: () => `/v1/preview/models/${modelId}/checkpoints?limit=101`,
      loc: ['query', 'limit'],
    },
    {
      name: 'a non-numeric limit',
      method: 'GET',
      path: () => `/v1/preview/training-jobs/${UNKNOWN_ID}/events?limit=ten`,
      loc: ['query', 'limit'],
    },
    {
      name: 'an unknown order',
      method: 'GET',
      path: () => `/v1/preview/models/${modelId}/checkpoints?order=sideways`,
      loc: ['query', 'order'],
      type: 'enum',
    },
    {
      name: 'a non-UUID model id in the path',
      method: 'GET',
      path: () => '/v1/preview/models/not-a-uuid/checkpoints',
      loc: ['path', 'model_id'],
      type: 'uuid_parsing',
    },
    {
      name: 'a non-UUID job id in the path',
      method: 'GET',
      path: () => '/v1/preview/training-jobs/42',
      loc: ['path', 'training_job_id'],
      type: 'uuid_parsing',
    },
    {
      name: 'a non-UUID model id to delete',
      method: 'DELETE',
      path: () => '/v1/preview/models/42',
      loc: ['path', 'model_id'],
      type: 'uuid_parsing',
    },
    {
      name: 'a stream flag that is not a boolean (trailing-slash route)',
      method: 'POST',
      path: () => '/v1/chat/completions/',
      body: { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'hi' }], stream: 'yes' },
      loc: ['body', 'stream'],
      type: 'bool_type',
    },
    {
      name: 'an SFT URL that is not a string',
      method: 'POST',
      path: () => '/v1/preview/sft-training-jobs',
      body: { model_id: modelId, training_data_url: 7 },
      loc: ['body', 'training_data_url'],
      type: 'string_type',
    },
  ];

  for (const testCase of cases) {
    it(`points at ${testCase.loc.join('.')} for ${testCase.name}`, async () => {
      const response = await server.call(testCase.method, testCase.path(), {
        ...(testCase.body === undefined ? {} : { body: testCase.body }),
        ...(testCase.raw === undefined ? {} : { raw: testCase.raw }),
      });
      expect(response.status, response.text).toBe(422);
      expect(response.body.detail.map((issue: { loc: unknown }) => issue.loc)).toContainEqual(testCase.loc);
      const issue = response.body.detail.find(
        (entry: { loc: unknown[] }) => JSON.stringify(entry.loc) === JSON.stringify(testCase.loc),
      );
      expect(typeof issue.msg).toBe('string');
      if (testCase.type !== undefined) expect(issue.type).toBe(testCase.type);
    });
  }

  it('answers malformed JSON with json_invalid at the error position', async () => {
    const response = await server.call('POST', '/v1/preview/models', {
      raw: '{"project": "p",, }',
      headers: { 'content-type': 'application/json' },
    });
    expect(response.status).toBe(422);
    expect(response.body.detail[0]).toMatchObject({ loc: ['body', 16], type: 'json_invalid' });
    const truncated = await server.call('POST', '/v1/chat/completions', {
      raw: '{"model": "policyloop/tiny-chat", "messages": [',
    });
    expect(truncated.status).toBe(422);
    expect(truncated.body.detail[0].type).toBe('json_invalid');
  });

  it('answers a body that is not UTF-8 with 422', async () => {
    const response = await server.request('/v1/preview/models', {
      method: 'POST',
      headers: { authorization: `Bearer ${server.apiKey}` },
      body: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]),
    });
    expect(response.status).toBe(422);
  });
});

describe('422 coverage', () => {
  it('checked a 422 of every operation that declares one, in both documents', () => {
    const declared = declaredResponses(422);
    expect(declared.length).toBeGreaterThanOrEqual(20);
    const missing = declared.filter((operation) => !server.checkedOperations().has(operation));
    expect(missing).toEqual([]);
  });
});

describe('404 and 405', () => {
  it('404s unknown paths and 405s known paths with the wrong method, before asking for a key', async () => {
    // `/` is the dashboard's page (see local-routes.test.ts); `/assets/` serves only its own files.
    for (const path of [
      '/v1/unknown',
      '/v2/health',
      '/v1/preview/models/x/y/z',
      '/v1/preview/models/',
      '/index.html',
      '/assets/nope.js',
    ]) {
      const response = await server.call('GET', path, { auth: false });
      expect(response.status, path).toBe(404);
      expect(response.body).toEqual({
        detail: 'Not Found',
        error: { message: 'Not Found', type: 'not_found_error', code: 404 },
      });
      expect(response.headers.get('x-request-id')).toMatch(/^req_/);
    }
    const wrongMethods: [string, string, string][] = [
      ['PUT', '/v1/preview/models', 'POST'],
      ['GET', '/v1/chat/completions', 'POST'],
      ['POST', '/v1/health', 'GET, HEAD'],
      ['PATCH', `/v1/preview/training-jobs/${UNKNOWN_ID}`, 'GET, HEAD'],
      ['POST', `/v1/preview/models/${modelId}/checkpoints`, 'GET, HEAD, DELETE'],
    ];
    for (const [method, path, allow] of wrongMethods) {
      const response = await server.call(method, path, { auth: false });
      expect(response.status, `${method} ${path}`).toBe(405);
      expect(response.body).toEqual({
        detail: 'Method Not Allowed',
        error: { message: 'Method Not Allowed', type: 'invalid_request_error', code: 405 },
      });
      expect(response.headers.get('allow')?.split(', ').sort()).toEqual(allow.split(', ').sort());
    }
  });
});

describe('x-request-id', () => {
  it('mints a fresh req_<32 hex> for every answer: a client id is not reused; the dashboard page and a stream carry one', async () => {
    const pattern = /^req_[0-9a-f]{32}$/;
    const given = `req_${'0'.repeat(32)}`;
    const health = await server.request('/v1/health', { headers: { 'x-request-id': given } });
    expect(health.headers.get('x-request-id')).toMatch(pattern);
    expect(health.headers.get('x-request-id')).not.toBe(given);
    const again = await server.request('/v1/health');
    expect(again.headers.get('x-request-id')).not.toBe(health.headers.get('x-request-id'));
    const page = await server.request('/');
    expect(page.status).toBe(200);
    expect(page.headers.get('x-request-id')).toMatch(pattern);
    await page.text();
    const stream = await server.request('/v1/chat/completions', {
      method: 'POST',
      headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'policyloop/tiny-chat',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 2,
        stream: true,
      }),
    });
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    expect(stream.headers.get('x-request-id')).toMatch(pattern);
    await stream.text();
  });
});

describe('413', () => {
  it('refuses a declared Content-Length over the limit and a streamed body as it passes the limit', async () => {
    // On a port: the streamed body must be answered while the client is still sending it.
    const small = await startServer({ maxBodyBytes: 2048 });
    try {
      const fits = await small.call('POST', '/v1/preview/models', {
        body: { project: 'p', name: 'n', base_model: 'policyloop/tiny-chat', padding: 'x'.repeat(1500) },
      });
      expect(fits.status).toBe(200);
      const declared = await small.call('POST', '/v1/preview/models', {
        body: { project: 'p', name: 'n', base_model: 'policyloop/tiny-chat', padding: 'x'.repeat(4000) },
      });
      expect(declared.status).toBe(413);
      expect(declared.body.detail).toContain('2048');

      // Chunked upload without a length: the answer must come while the client is still sending.
      const url = new URL(`${small.handle.url}/v1/preview/models`);
      const outcome = await new Promise<{ status: number; sentWhenAnswered: number }>((resolve, reject) => {
        let sent = 0;
        let answered = false;
        const request = httpRequest(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: 'POST',
            headers: { authorization: `Bearer ${small.handle.apiKey}`, 'transfer-encoding': 'chunked' },
          },
          (response) => {
            answered = true;
            response.resume();
            resolve({ status: response.statusCode ?? 0, sentWhenAnswered: sent });
            request.destroy();
          },
        );
        request.on('error', (error) => {
          if (!answered) reject(error);
        });
        request.write('{"padding": "');
        const pump = (): void => {
          if (answered) return;
          if (sent > 4_000_000) {
            // Never answered while sending: finish, so the test fails on the assertion instead of hanging.
            request.end('"}');
            return;
          }
          request.write('x'.repeat(1024));
          sent += 1024;
          setTimeout(pump, 2);
        };
        pump();
      });
      expect(outcome.status).toBe(413);
      expect(outcome.sentWhenAnswered).toBeLessThan(4_000_000);
      expect((await small.call('GET', '/v1/health')).status).toBe(200);
    } finally {
      await small.close();
    }
  });
});
