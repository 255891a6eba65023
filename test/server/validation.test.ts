/**
 * Bad input against the real local service: auth, FastAPI-shaped 422s with exact `loc`s,
 * malformed JSON, 413 before buffering, 404/405, and mutated bodies that must never produce a 5xx.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_API_KEY } from '../../src/server/index.js';
import { startServer, type TestServer } from './support/harness.js';
import { registerModel } from './support/jobs.js';
import { declaredResponses } from './support/openapi-responses.js';

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
let server: TestServer;
let modelId: string;

beforeAll(async () => {
  server = await startServer();
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
    const keyed = await startServer({ apiKeys: ['first-key', 'second-key'] });
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
    const response = await fetch(`${server.handle.url}/v1/preview/models`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.handle.apiKey}` },
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

describe('413', () => {
  it('refuses a declared Content-Length over the limit and a streamed body as it passes the limit', async () => {
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

describe('no input produces a 5xx', () => {
  /** Small deterministic generator (mulberry32) so a failure reproduces. */
  function random(seed: number): () => number {
    let state = seed;
    return () => {
      state = (state + 0x6d2b79f5) | 0;
      let value = Math.imul(state ^ (state >>> 15), 1 | state);
      value = (value + Math.imul(value ^ (value >>> 7), 61 | value)) ^ value;
      return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296;
    };
  }
  const oddValues: unknown[] = [
    null,
    -1,
    0,
    1.5,
    1e308,
    -1e308,
    '',
    'x',
    '\u0000',
    '💥',
    true,
    false,
    [],
    {},
    [null],
    { role: 'tool' },
    { __proto__: { polluted: true } },
    'token_id:-5',
  ];

  function leaves(value: unknown, path: (string | number)[] = []): (string | number)[][] {
    if (value === null || typeof value !== 'object') return [path];
    const entries = Array.isArray(value) ? value.map((item, index) => [index, item] as const) : Object.entries(value);
    return [path, ...entries.flatMap(([key, item]) => leaves(item, [...path, key]))];
  }

  function mutate(body: unknown, path: (string | number)[], replacement: unknown): unknown {
    if (path.length === 0) return replacement;
    const copy: any = structuredClone(body);
    let cursor = copy;
    for (const key of path.slice(0, -1)) cursor = cursor[key];
    cursor[path[path.length - 1] as string | number] = replacement;
    return copy;
  }

  it('answers mutated bodies, odd bodies and odd paths with 2xx/4xx only', async () => {
    const next = random(20261121);
    const choice = {
      finish_reason: 'stop',
      index: 0,
      message: {
        role: 'assistant',
        content: 'x',
        tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
      },
      logprobs: { content: [{ token: 'x', bytes: [120], logprob: -1, top_logprobs: [] }] },
    };
    const trajectory = {
      messages_and_choices: [
        { role: 'system', content: 's' },
        { role: 'user', content: [{ type: 'text', text: 'u' }] },
        choice,
        { role: 'tool', content: 'r', tool_call_id: 'c' },
      ],
      reward: 1,
      metrics: { ok: true },
      tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
    };
    const templates: [string, string, unknown][] = [
      [
        'POST',
        `/v1/preview/models/${modelId}/log`,
        { split: 'train', trajectory_groups: [{ trajectories: [trajectory, trajectory], exceptions: [] }] },
      ],
      // Unknown model: the body is validated in full, but no job is trained.
      [
        'POST',
        '/v1/preview/training-jobs',
        {
          model_id: UNKNOWN_ID,
          trajectory_groups: [{ trajectories: [trajectory] }],
          experimental_config: { learning_rate: 0.1 },
        },
      ],
      [
        'POST',
        '/v1/preview/sft-training-jobs',
        { model_id: UNKNOWN_ID, training_data_url: 'data:,x', config: { batch_size: 'auto' } },
      ],
      [
        'POST',
        '/v1/preview/models',
        { project: 'fuzz', name: 'f', base_model: 'policyloop/tiny-chat', return_existing: true },
      ],
      ['DELETE', `/v1/preview/models/${modelId}/checkpoints`, { steps: [7] }],
      [
        'POST',
        '/v1/chat/completions',
        {
          model: 'policyloop/tiny-chat',
          messages: [
            { role: 'user', content: 'hi' },
            {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
            },
            { role: 'tool', content: 'r', tool_call_id: 'c' },
          ],
          max_tokens: 2,
        },
      ],
    ];
    const statuses = new Map<number, number>();
    for (let round = 0; round < 150; round += 1) {
      const [method, path, template] = templates[Math.floor(next() * templates.length)] as [string, string, unknown];
      const paths = leaves(template);
      const target = paths[Math.floor(next() * paths.length)] as (string | number)[];
      // Keep completions cheap: never mutate max_tokens or n into something large.
      if (target.includes('max_tokens')) continue;
      const body = mutate(template, target, oddValues[Math.floor(next() * oddValues.length)]);
      const response = await server.call(method, path, { body });
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      expect(
        response.status,
        `${method} ${path} with ${JSON.stringify(body).slice(0, 500)}: ${response.text.slice(0, 500)}`,
      ).toBeLessThan(500);
    }
    expect(statuses.get(422)).toBeGreaterThan(10);

    const oddRaw = [
      'null',
      '0',
      '"x"',
      '[]',
      'true',
      '{',
      '}',
      '{"a":1}{',
      '\u0000',
      '[[[[[[[[[[]]]]]]]]]]',
      `${'['.repeat(5000)}${']'.repeat(5000)}`,
      '{"__proto__": {"admin": true}}',
    ];
    for (const [method, path] of templates) {
      for (const raw of oddRaw) {
        const response = await server.call(method, path, { raw, headers: { 'content-type': 'text/plain' } });
        expect(response.status, `${method} ${path} with ${raw.slice(0, 40)}`).toBeLessThan(500);
      }
    }
    // Deep values where the schema takes anything (metadata) must not overflow the stack later.
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    const deepLog = await server.call('POST', `/v1/preview/models/${modelId}/log`, {
      raw: `{"split": "train", "trajectory_groups": [{"trajectories": [], "metadata": {"deep": ${deep}}}]}`,
    });
    expect(deepLog.status).toBe(422);
    expect(deepLog.body.detail[0].msg).toContain('nested deeper');
    for (const path of [
      '/v1/preview/models/%ZZ/checkpoints',
      '/v1/preview/training-jobs/%00',
      `/v1/preview/models/${modelId}/checkpoints?limit=1&limit=2&after=`,
      `/v1/preview/models/${modelId}/checkpoints?limit=%FF`,
      '/v1/preview/models/..%2F..%2Fetc/checkpoints',
    ]) {
      const response = await server.call('GET', path);
      expect(response.status, path).toBeLessThan(500);
    }
    expect((await server.call('GET', '/v1/system-check', { auth: false })).status).toBe(200);
  });

  it('answers random queries, path ids and methods on every route with 2xx/4xx only', async () => {
    const next = random(1121);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
    const oddText = [
      '',
      ' ',
      '0',
      '-1',
      '1e400',
      '0x10',
      'NaN',
      'null',
      '[]',
      '{}',
      '%00',
      '%FF',
      '%E0%A4%A',
      '..%2F..',
      '💥',
      'a'.repeat(5000),
      UNKNOWN_ID,
      UNKNOWN_ID.toUpperCase(),
      `${UNKNOWN_ID}x`,
    ];
    const routes = [
      '/v1/health',
      '/v1/system-check',
      '/v1/preview/base-models',
      '/v1/models',
      '/v1/chat/completions',
      '/v1/chat/completions/',
      '/v1/preview/models',
      '/v1/preview/models/{id}',
      '/v1/preview/models/{id}/checkpoints',
      '/v1/preview/models/{id}/log',
      '/v1/preview/training-jobs',
      '/v1/preview/sft-training-jobs',
      '/v1/preview/training-jobs/{id}',
      '/v1/preview/training-jobs/{id}/events',
    ];
    const statuses = new Map<number, number>();
    for (let round = 0; round < 200; round += 1) {
      const id = next() < 0.3 ? modelId : pick(oddText);
      const query = Array.from(
        { length: Math.floor(next() * 4) },
        () => `${pick(['after', 'limit', 'order', 'after[]', 'x'])}=${pick(oddText)}`,
      ).join('&');
      const path = `${pick(routes).replace('{id}', id)}${query === '' ? '' : `?${query}`}`;
      // DELETE only with a random id, never the fixture model, so that the other rounds keep it.
      const method = pick(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'OPTIONS', ...(id === modelId ? [] : ['DELETE'])]);
      const body =
        method === 'GET' || method === 'HEAD'
          ? undefined
          : pick([undefined, '', '{}', '{"steps": [1]}', pick(oddText)]);
      const response = await server.call(method, path, {
        ...(body === undefined ? {} : { raw: body }),
        auth: next() < 0.8,
      });
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      expect(
        response.status,
        `${method} ${path.slice(0, 200)} with ${String(body).slice(0, 100)}: ${response.text.slice(0, 300)}`,
      ).toBeLessThan(500);
    }
    // The rounds reached past the router: validation, auth and not-found answers all came.
    for (const status of [401, 404, 405, 422])
      expect(statuses.get(status), JSON.stringify([...statuses])).toBeGreaterThan(0);
    expect((await server.call('GET', `/v1/preview/models/${modelId}/checkpoints`)).status).toBe(200);
  });
});
