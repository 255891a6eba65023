/**
 * Bad input, property-based (fast-check): every operation of both contract documents plus the
 * /v1/local/ routes gets mutated, mistyped, huge and deep bodies, odd path ids, queries and
 * headers (in process, through the app's fetch handler), and malformed JSON and bytes that are not
 * UTF-8 over real HTTP; random methods and paths go at the router. No case may produce a 5xx, and
 * every 422 must have the FastAPI shape `{detail: [{loc: [body|query|path|header, ...], msg, type}]}`.
 * The seed is printed with the figures: `FUZZ_SEED=<seed>` reruns the same cases.
 */
import { request as httpRequest } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type App, createApp, DEV_API_KEY } from 'policyloop/server';
import { startServer, temporaryDirectory, type TestServer } from './support/harness.js';
import { createStandInEngine } from './support/stand-in-engine.js';

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
const SEED = Number(process.env['FUZZ_SEED'] ?? Date.now() % 2_147_483_647);
const BODY_RUNS = 3_000;
const ROUTER_RUNS = 1_000;
const BYTES_RUNS = 600;

let app: App;
let server: TestServer;
let modelId: string;
let httpModelId: string;
const statuses = new Map<number, number>();
let cases = 0;

beforeAll(async () => {
  const engine = createStandInEngine({ stepDelayMs: 1 });
  app = await createApp({ dataDir: temporaryDirectory('policyloop-fuzz-'), engine });
  modelId = ((await (await send('POST', '/v1/preview/models', JSON.stringify(fixtureModel))).json()) as { id: string })
    .id;
  server = await startServer({ engine });
  httpModelId = (await server.call('POST', '/v1/preview/models', { body: fixtureModel })).body.id;
});
afterAll(async () => {
  await app?.close();
  await server?.close();
  console.log(
    `fuzz: ${cases} cases (seed ${SEED}): ${BODY_RUNS} bodies/queries/headers in process, ${ROUTER_RUNS} methods and paths, ` +
      `${BYTES_RUNS} raw byte bodies over HTTP; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; ` +
      `${[...statuses].filter(([status]) => status >= 500).reduce((sum, [, count]) => sum + count, 0)} 5xx`,
  );
});

const fixtureModel = { project: 'fuzz', name: 'fixture', base_model: 'policyloop/tiny-chat' };

/** Sends a request to the in-process app. */
function send(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Response> {
  return app.fetch(
    new Request(`http://127.0.0.1${path}`, {
      method,
      headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body }),
    }),
  );
}

/** Fails unless the answer is below 500, and a 422 is in the FastAPI shape (a HEAD answer has no body to check). */
async function checkAnswer(status: number, text: string, label: string): Promise<void> {
  cases += 1;
  statuses.set(status, (statuses.get(status) ?? 0) + 1);
  if (status >= 500) throw new Error(`${label} answered ${status}: ${text.slice(0, 500)}`);
  if (status !== 422 || label.startsWith('HEAD ')) return;
  const body = JSON.parse(text) as { detail?: unknown };
  const detail = body.detail;
  if (!Array.isArray(detail) || detail.length === 0) throw new Error(`${label}: 422 without a detail list: ${text}`);
  for (const item of detail as Record<string, unknown>[]) {
    const loc = item['loc'];
    if (
      !Array.isArray(loc) ||
      !['body', 'query', 'path', 'header'].includes(loc[0] as string) ||
      !loc.every((part) => typeof part === 'string' || typeof part === 'number') ||
      typeof item['msg'] !== 'string' ||
      typeof item['type'] !== 'string'
    )
      throw new Error(`${label}: 422 detail not in the FastAPI shape: ${JSON.stringify(item).slice(0, 500)}`);
  }
}

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
const chatBody = {
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
  logprobs: true,
};

/** An operation: method, path template (`{id}` is a path id), a valid body, and its query names. */
interface Operation {
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
  readonly query?: readonly string[];
  /** Whether the fixture model may be the path id (not for deletes: later cases need it). */
  readonly fixture?: boolean;
}

/** Every operation of docs/api/openapi.json and openapi.latest.json, the OpenAI-compatible list, and /v1/local/. */
const operations: readonly Operation[] = [
  { method: 'POST', path: '/v1/chat/completions', body: chatBody },
  { method: 'POST', path: '/v1/chat/completions/', body: chatBody },
  { method: 'GET', path: '/v1/models' },
  { method: 'GET', path: '/v1/health' },
  { method: 'GET', path: '/v1/system-check' },
  { method: 'GET', path: '/v1/preview/base-models' },
  {
    method: 'POST',
    path: '/v1/preview/models',
    body: { project: 'fuzz', name: 'f', base_model: 'policyloop/tiny-chat', return_existing: true },
  },
  { method: 'DELETE', path: '/v1/preview/models/{id}', fixture: false },
  {
    method: 'GET',
    path: '/v1/preview/models/{id}/checkpoints',
    query: ['after', 'limit', 'order'],
    fixture: true,
  },
  { method: 'DELETE', path: '/v1/preview/models/{id}/checkpoints', body: { steps: [7] }, fixture: true },
  {
    method: 'POST',
    path: '/v1/preview/models/{id}/log',
    body: { split: 'train', trajectory_groups: [{ trajectories: [trajectory, trajectory], exceptions: [] }] },
    fixture: true,
  },
  {
    method: 'POST',
    path: '/v1/preview/training-jobs',
    body: {
      model_id: UNKNOWN_ID,
      trajectory_groups: [{ trajectories: [trajectory] }],
      experimental_config: { learning_rate: 0.1 },
    },
  },
  {
    method: 'POST',
    path: '/v1/preview/sft-training-jobs',
    body: { model_id: UNKNOWN_ID, training_data_url: 'data:,x', config: { batch_size: 'auto' } },
  },
  { method: 'GET', path: '/v1/preview/training-jobs/{id}', fixture: false },
  { method: 'GET', path: '/v1/preview/training-jobs/{id}/events', query: ['after', 'limit'], fixture: false },
  { method: 'GET', path: '/v1/local/models', query: ['project', 'name', 'limit', 'after'] },
  { method: 'GET', path: '/v1/local/models/{id}', fixture: true },
  { method: 'GET', path: '/v1/local/models/{id}/metrics', query: ['split', 'after', 'limit'], fixture: true },
  {
    method: 'POST',
    path: '/v1/local/models/{id}/metrics',
    body: { step: 0, split: 'train', metrics: { loss: 1 } },
    fixture: true,
  },
  { method: 'GET', path: '/v1/local/models/{id}/jobs', query: ['after', 'limit'], fixture: true },
  {
    method: 'GET',
    path: '/v1/local/models/{id}/trajectory-groups',
    query: ['step', 'split', 'after', 'limit'],
    fixture: true,
  },
];

/** A value nested `depth` levels (arrays or objects). */
function nested(depth: number, objects: boolean): unknown {
  let value: unknown = 0;
  for (let level = 0; level < depth; level += 1) value = objects ? { a: value } : [value];
  return value;
}

/** Odd values: any JSON, wrong types, edge numbers and strings, huge and deep values (bounded). */
const oddValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom<unknown>(
      null,
      true,
      false,
      '',
      [],
      {},
      [null],
      -1,
      0,
      0.5,
      -0,
      1e308,
      -1e308,
      2 ** 53 + 2,
      '\u0000',
      '\ud800',
      '💥',
      'token_id:-5',
      '__proto__',
      { role: 'tool' },
      { __proto__: { polluted: true } },
      UNKNOWN_ID,
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 64 }) },
  { weight: 1, arbitrary: fc.integer({ min: 10_000, max: 200_000 }).map((length) => 'x'.repeat(length)) },
  { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((length) => new Array(length).fill(1)) },
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 20, max: 400 }), fc.boolean()).map(([d, o]) => nested(d, o)) },
);

/** The paths to every node of a JSON value. */
function nodePaths(value: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (value === null || typeof value !== 'object') return [path];
  const entries = Array.isArray(value) ? value.map((item, index) => [index, item] as const) : Object.entries(value);
  return [path, ...entries.flatMap(([key, item]) => nodePaths(item, [...path, key]))];
}

/** A copy of `body` with the node at `path` replaced, deleted, or given an unknown sibling key. */
function mutate(
  body: unknown,
  path: (string | number)[],
  how: 'replace' | 'delete' | 'extra',
  value: unknown,
): unknown {
  if (path.length === 0) return how === 'replace' ? value : body;
  const copy: any = structuredClone(body);
  let cursor = copy;
  for (const key of path.slice(0, -1)) cursor = cursor[key];
  const last = path[path.length - 1] as string | number;
  if (how === 'delete') {
    if (Array.isArray(cursor)) cursor.splice(last as number, 1);
    else delete cursor[last];
  } else if (how === 'extra' && !Array.isArray(cursor)) {
    cursor['unexpected_key'] = value;
  } else cursor[last] = value;
  return copy;
}

/** Text for a path segment or query value (percent-encoded when it must be). */
const oddText = fc.oneof(
  fc.constantFrom(
    '',
    '0',
    '-1',
    '1e400',
    'NaN',
    'null',
    '%00',
    '%FF',
    '%E0%A4%A',
    '%ZZ',
    '..%2F..',
    UNKNOWN_ID,
    UNKNOWN_ID.toUpperCase(),
    `${UNKNOWN_ID}x`,
  ),
  fc.string({ maxLength: 40 }).map(encodeURIComponent),
  fc.integer({ min: 300, max: 6_000 }).map((length) => 'a'.repeat(length)),
);

/** A header value a `Headers` object accepts (Latin-1 without control characters). */
const headerText = fc.string({
  unit: fc
    .integer({ min: 0x20, max: 0xff })
    .filter((code) => code !== 0x7f)
    .map((code) => String.fromCharCode(code)),
  maxLength: 300,
});

describe('fuzzing every operation', () => {
  it(`answers ${BODY_RUNS} mutated bodies, queries, path ids and headers with no 5xx and FastAPI 422s`, async () => {
    const request = fc.record({
      operation: fc.constantFrom(...operations),
      useFixture: fc.boolean(),
      id: oddText,
      node: fc.nat(),
      how: fc.constantFrom('replace', 'replace', 'replace', 'delete', 'extra') as fc.Arbitrary<
        'replace' | 'delete' | 'extra'
      >,
      value: oddValue,
      whole: fc.oneof(fc.constant(undefined), oddValue),
      query: fc.array(fc.tuple(fc.nat(), oddText), { maxLength: 3 }),
      idempotencyKey: fc.option(headerText, { nil: undefined }),
      auth: fc.oneof({ weight: 9, arbitrary: fc.constant(DEV_API_KEY) }, { weight: 1, arbitrary: headerText }),
    });
    await fc.assert(
      fc.asyncProperty(request, async (input) => {
        const { operation } = input;
        const id = operation.fixture === true && input.useFixture ? modelId : input.id;
        const names = [...(operation.query ?? []), 'x'];
        const query = input.query.map(([index, value]) => `${names[index % names.length]}=${value}`).join('&');
        const path = `${operation.path.replace('{id}', id)}${query === '' ? '' : `?${query}`}`;
        let body: unknown = operation.body;
        if (input.whole !== undefined) body = input.whole;
        else if (body !== undefined) {
          const paths = nodePaths(body);
          body = mutate(body, paths[input.node % paths.length] as (string | number)[], input.how, input.value);
        }
        // Keep completions cheap: the stand-in engine answers up to `max_tokens` characters `n` times.
        if (operation.path.startsWith('/v1/chat') && body !== null && typeof body === 'object' && !Array.isArray(body))
          body = { ...body, max_tokens: 2, n: 1 };
        const headers: Record<string, string> = { authorization: `Bearer ${input.auth}` };
        if (input.idempotencyKey !== undefined) headers['idempotency-key'] = input.idempotencyKey;
        const text = body === undefined || operation.method === 'GET' ? undefined : JSON.stringify(body);
        const response = await send(operation.method, path, text, headers);
        await checkAnswer(
          response.status,
          await response.text(),
          `${operation.method} ${path.slice(0, 200)} with ${String(text).slice(0, 300)}`,
        );
      }),
      { numRuns: BODY_RUNS, seed: SEED, endOnFailure: true },
    );
    // The cases reached past the router into validation, and some got through.
    expect(statuses.get(422)).toBeGreaterThan(100);
    expect(statuses.get(200)).toBeGreaterThan(10);
  });

  it(`answers ${ROUTER_RUNS} wrong methods and paths with 4xx and a JSON detail, never a 5xx`, async () => {
    const templates = operations.map((operation) => operation.path);
    const request = fc.record({
      method: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'),
      template: fc.constantFrom(...templates, '/', '/v1', '/v2/models', '/v1/preview', '/v1/local'),
      id: oddText,
      extra: fc.array(oddText, { maxLength: 3 }),
      body: fc.option(fc.constantFrom('', '{}', '{"steps": [1]}', 'null', '['), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(request, async (input) => {
        const path = `${input.template.replace('{id}', input.id)}${input.extra.map((part) => `/${part}`).join('')}`;
        const body = input.method === 'GET' || input.method === 'HEAD' ? undefined : input.body;
        const response = await send(input.method, path, body);
        const text = await response.text();
        await checkAnswer(response.status, text, `${input.method} ${path.slice(0, 200)}`);
        // Dashboard pages are HTML; every API error is JSON with a detail.
        if (response.status >= 400 && input.method !== 'HEAD' && path.startsWith('/v1')) {
          const parsed = JSON.parse(text) as { detail?: unknown };
          expect(parsed.detail, `${input.method} ${path}: ${text.slice(0, 300)}`).toBeDefined();
        }
        if (response.status === 405) expect(response.headers.get('allow')).toBeTruthy();
      }),
      { numRuns: ROUTER_RUNS, seed: SEED + 1, endOnFailure: true },
    );
    for (const status of [401, 404, 405]) expect(statuses.get(status)).toBeGreaterThan(0);
  });

  it(`answers ${BYTES_RUNS} malformed JSON and non-UTF-8 bodies over HTTP with 4xx, never a 5xx`, async () => {
    const posts = operations.filter((operation) => operation.body !== undefined);
    const badBytes = fc.constantFrom(
      [0xff],
      [0xfe, 0xff],
      [0xc3, 0x28],
      [0xc0, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xf8, 0x88, 0x80, 0x80, 0x80],
      [0xe2, 0x82],
      [0x00],
    );
    const request = fc.record({
      operation: fc.constantFrom(...posts),
      kind: fc.constantFrom('truncate', 'insert', 'bad-utf8', 'random-bytes', 'random-text'),
      at: fc.nat(),
      insert: fc.string({ maxLength: 3 }),
      bytes: badBytes,
      random: fc.uint8Array({ maxLength: 2_000 }),
      text: fc.string({ unit: 'binary', maxLength: 200 }),
      contentType: fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'text/plain',
        'application/x-www-form-urlencoded',
        undefined,
      ),
    });
    await fc.assert(
      fc.asyncProperty(request, async (input) => {
        const path = input.operation.path.replace('{id}', httpModelId);
        const valid = Buffer.from(JSON.stringify(input.operation.body));
        const at = input.at % (valid.length + 1);
        let body: Buffer;
        switch (input.kind) {
          case 'truncate':
            body = valid.subarray(0, at);
            break;
          case 'insert':
            body = Buffer.concat([valid.subarray(0, at), Buffer.from(input.insert), valid.subarray(at)]);
            break;
          case 'bad-utf8': {
            // Inside a JSON string: the bytes around are valid JSON, only the encoding is wrong.
            const quote = valid.indexOf('"', at % valid.length);
            const cut = quote < 0 ? at : quote + 1;
            body = Buffer.concat([valid.subarray(0, cut), Buffer.from(input.bytes), valid.subarray(cut)]);
            break;
          }
          case 'random-bytes':
            body = Buffer.from(input.random);
            break;
          default:
            body = Buffer.from(input.text);
        }
        const { status, text } = await postBytes(
          server.handle.url,
          input.operation.method,
          path,
          body,
          input.contentType,
        );
        await checkAnswer(
          status,
          text,
          `${input.operation.method} ${path} with ${input.kind} ${body.toString('hex').slice(0, 200)}`,
        );
      }),
      { numRuns: BYTES_RUNS, seed: SEED + 2, endOnFailure: true },
    );
    // Past the property: the deepest nesting a parser could overflow on, as one concrete case.
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    const deepLog = await postBytes(
      server.handle.url,
      'POST',
      `/v1/preview/models/${httpModelId}/log`,
      Buffer.from(`{"split": "train", "trajectory_groups": [{"trajectories": [], "metadata": {"deep": ${deep}}}]}`),
      'application/json',
    );
    await checkAnswer(deepLog.status, deepLog.text, 'a log nested 20,000 deep');
    expect(deepLog.status).toBe(422);
    expect(JSON.parse(deepLog.text).detail[0].msg).toContain('nested deeper');
    expect(cases).toBeGreaterThanOrEqual(BODY_RUNS + ROUTER_RUNS + BYTES_RUNS);
    expect((await server.call('GET', '/v1/system-check', { auth: false })).status).toBe(200);
  });
});

/** Sends raw bytes over HTTP (fetch would re-encode a string body). */
function postBytes(
  origin: string,
  method: string,
  path: string,
  body: Buffer,
  contentType: string | undefined,
): Promise<{ status: number; text: string }> {
  const url = new URL(path, origin);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: `${url.pathname}${url.search}`,
        headers: {
          authorization: `Bearer ${DEV_API_KEY}`,
          'content-length': String(body.length),
          ...(contentType === undefined ? {} : { 'content-type': contentType }),
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
        );
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}
