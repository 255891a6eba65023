import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  APIError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  InternalServerError,
  MissingApiKeyError,
  NotFoundError,
  PermissionDeniedError,
  PolicyloopError,
  RateLimitError,
  ResponseValidationError,
  UnprocessableEntityError,
} from 'policyloop';
import { TrainingClient } from 'policyloop/client';
import { fakeFetch, json, type Reply } from './fake-fetch.js';
import { JOB_ID, MODEL_ID, uuid } from './fixtures.js';

function setup(...replies: Reply[]) {
  const fake = fakeFetch(...replies);
  const client = new TrainingClient({
    apiKey: 'sk-secret-key',
    baseURL: 'http://svc/v1',
    fetch: fake.fetch,
    maxRetries: 0,
  });
  return { client, ...fake };
}

async function rejection(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('status mapping', () => {
  const cases = [
    [400, BadRequestError, false],
    [401, AuthenticationError, false],
    [403, PermissionDeniedError, false],
    [404, NotFoundError, false],
    [409, ConflictError, true],
    [422, UnprocessableEntityError, false],
    [429, RateLimitError, true],
    [500, InternalServerError, true],
    [503, InternalServerError, true],
  ] as const;

  for (const [status, type, retryable] of cases) {
    it(`${status} rejects with ${type.name} (retryable: ${retryable}) carrying status, body, headers and request id`, async () => {
      const { client } = setup(json({ detail: `went wrong ${status}` }, status, { 'x-request-id': `req-${status}` }));
      const error = await rejection(client.jobs.retrieve(JOB_ID));
      expect(error).toBeInstanceOf(type);
      expect(error).toBeInstanceOf(APIError);
      expect(error).toBeInstanceOf(PolicyloopError);
      if (!(error instanceof APIError)) return;
      expect(error.name).toBe(type.name);
      expect(error.status).toBe(status);
      expect(error.retryable).toBe(retryable);
      expect(error.requestId).toBe(`req-${status}`);
      expect(error.headers.get('content-type')).toBe('application/json');
      expect(error.body).toEqual({ detail: `went wrong ${status}` });
      expect(error.message).toBe(`${status} went wrong ${status}`);
    });
  }

  it('408 and other statuses without a subclass are a plain APIError; 408 is retryable', () => {
    const timeout = APIError.generate(408, undefined, 'Request Timeout');
    expect(timeout.constructor).toBe(APIError);
    expect(timeout.retryable).toBe(true);
    expect(timeout.message).toBe('408 Request Timeout');
    const teapot = APIError.generate(418, 'short and stout');
    expect(teapot.retryable).toBe(false);
    expect(teapot.message).toBe('418 short and stout');
    expect(APIError.generate(413, undefined).message).toBe('413 status code (no body)');
  });

  it('an OpenAI-style error body gives its message (gateways and OpenAI-compatible services send it)', () => {
    expect(APIError.generate(404, { error: { message: 'Model x not found', type: 'not_found_error' } }).message).toBe(
      '404 Model x not found',
    );
    expect(APIError.generate(429, { error: 'quota exceeded' }).message).toBe('429 quota exceeded');
    expect(APIError.generate(500, { message: 'boom' }).message).toBe('500 boom');
    // The contract's detail wins when both are there (our local service sends both).
    expect(APIError.generate(404, { detail: 'Job not found', error: { message: 'other' } }).message).toBe(
      '404 Job not found',
    );
  });

  it('a non-JSON error body is kept as text and becomes the message', async () => {
    const { client } = setup(new Response('upstream connect error', { status: 502 }));
    const error = await rejection(client.health());
    expect(error).toBeInstanceOf(InternalServerError);
    expect((error as APIError).body).toBe('upstream connect error');
    expect((error as APIError).message).toBe('502 upstream connect error');
  });
});

describe('422', () => {
  it('parses detail into typed issues and names them in the message', async () => {
    const detail = [
      { loc: ['body', 'trajectory_groups', 0, 'trajectories'], msg: 'Field required', type: 'missing' },
      { loc: ['body', 'model_id'], msg: 'Input should be a valid UUID', type: 'uuid_parsing', input: 'x' },
    ];
    const { client } = setup(json({ detail }, 422));
    const error = await rejection(client.jobs.retrieve(JOB_ID));
    expect(error).toBeInstanceOf(UnprocessableEntityError);
    if (!(error instanceof UnprocessableEntityError)) return;
    expect(error.issues).toEqual(detail);
    expect(error.issues[0]?.loc).toEqual(['body', 'trajectory_groups', 0, 'trajectories']);
    expect(error.message).toBe(
      '422 body.trajectory_groups.0.trajectories: Field required; body.model_id: Input should be a valid UUID',
    );
    expect(error.retryable).toBe(false);
  });

  it('a 422 without a readable detail list has no issues but still a message', () => {
    const error = APIError.generate(422, { detail: 'nope' });
    expect(error).toBeInstanceOf(UnprocessableEntityError);
    expect((error as UnprocessableEntityError).issues).toEqual([]);
    expect(error.message).toBe('422 nope');
  });
});

describe('the API key never shows', () => {
  it('is not in error messages, nor in the logged client', async () => {
    const { client } = setup(json({ detail: 'bad key' }, 401));
    const error = await rejection(client.models.delete(MODEL_ID));
    expect(String(error)).not.toContain('sk-secret-key');
    expect(JSON.stringify(error)).not.toContain('sk-secret-key');
    const { inspect } = await import('node:util');
    expect(inspect(client, { depth: 5 })).not.toContain('sk-secret-key');
    expect(JSON.stringify(client)).not.toContain('sk-secret-key');
    expect(client.apiKey).toBe('sk-secret-key');
  });
});

describe('system check', () => {
  it('a 503 rejects with InternalServerError whose body holds the checks', async () => {
    const checks = {
      api: true,
      database: false,
      cpu_queue: { success: true },
      gpu_queue: { success: false, error: 'down' },
    };
    const { client } = setup(json(checks, 503));
    const error = await rejection(client.systemCheck());
    expect(error).toBeInstanceOf(InternalServerError);
    expect((error as APIError).body).toEqual(checks);
  });
});

describe('response validation', () => {
  it('a response that breaks the contract names the field and keeps the raw body', async () => {
    const raw = JSON.stringify({
      object: 'list',
      data: [
        { id: uuid(1), step: 1, metrics: {} },
        { id: uuid(2), step: 'two', metrics: {} },
      ],
      first_id: uuid(1),
      last_id: uuid(2),
      has_more: false,
    });
    const { client } = setup(new Response(raw, { status: 200, headers: { 'x-request-id': 'req-1' } }));
    const error = await rejection(client.checkpoints.list(MODEL_ID));
    expect(error).toBeInstanceOf(ResponseValidationError);
    if (!(error instanceof ResponseValidationError)) return;
    expect(error.path).toBe('data[1].step');
    expect(error.message).toContain('data[1].step');
    expect(error.message).toContain('"two"');
    expect(error.message).toContain(`GET /v1/preview/models/{model_id}/checkpoints`);
    expect(error.rawBody).toBe(raw);
    expect(error.requestId).toBe('req-1');
    expect(error.retryable).toBe(false);
  });

  it('an unknown job status is named', async () => {
    const { client } = setup(json({ id: JOB_ID, status: 'DONE' }));
    const error = await rejection(client.jobs.retrieve(JOB_ID));
    expect(error).toBeInstanceOf(ResponseValidationError);
    expect((error as ResponseValidationError).path).toBe('status');
  });

  it('unknown keys pass', async () => {
    const { client } = setup(json({ id: JOB_ID, status: 'PENDING', queue_position: 3 }));
    await expect(client.jobs.retrieve(JOB_ID)).resolves.toMatchObject({ id: JOB_ID, status: 'PENDING' });
  });

  it('names each operation as the contract writes it (method and path template)', async () => {
    const contract = JSON.parse(
      readFileSync(new URL('../../docs/api/openapi.latest.json', import.meta.url), 'utf8'),
    ) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const documented = new Set(
      Object.entries(contract.paths).flatMap(([path, methods]) =>
        Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
      ),
    );
    // systemCheck and health are left out: the contract gives their 200 an empty schema (any JSON).
    const calls: Array<(client: TrainingClient) => PromiseLike<unknown>> = [
      (client) => client.baseModels.list(),
      (client) => client.models.create({ project: 'p', name: 'n', base_model: 'b' }),
      (client) => client.models.delete(MODEL_ID),
      (client) => client.checkpoints.list(MODEL_ID),
      (client) => client.checkpoints.delete(MODEL_ID, { steps: [1] }),
      (client) => client.jobs.createRL({ model_id: MODEL_ID, trajectory_groups: [] }),
      (client) => client.jobs.createSFT({ model_id: MODEL_ID, training_data_url: 'x' }),
      (client) => client.jobs.retrieve(JOB_ID),
      (client) => client.jobs.events(JOB_ID),
    ];
    const operations = [];
    for (const call of calls) {
      const { client } = setup(json(42));
      const error = await rejection(call(client));
      expect(error).toBeInstanceOf(ResponseValidationError);
      operations.push((error as ResponseValidationError).operation);
    }
    expect(operations.filter((operation) => !documented.has(operation))).toEqual([]);
    expect(new Set(operations).size).toBe(calls.length);
  });

  it('a body that is not JSON is a ResponseValidationError too', async () => {
    const { client } = setup(new Response('<html>proxy login</html>', { status: 200 }));
    const error = await rejection(client.baseModels.list());
    expect(error).toBeInstanceOf(ResponseValidationError);
    expect((error as ResponseValidationError).message).toContain('not JSON');
    expect((error as ResponseValidationError).rawBody).toBe('<html>proxy login</html>');
  });
});

describe('MissingApiKeyError', () => {
  it('names both environment variables', () => {
    const error = new MissingApiKeyError();
    expect(error.message).toContain('POLICYLOOP_API_KEY');
    expect(error.message).toContain('WANDB_API_KEY');
    expect(error.name).toBe('MissingApiKeyError');
  });
});
