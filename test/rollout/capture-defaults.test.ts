/**
 * The one merge rule of `defaults`, shared by `captureCompletions` and `model.openai()`: a default
 * fills a request key whose value is missing, `undefined` or `null` (`model` also when it is
 * `''`); the request's own values win. Asserted on the JSON bodies that went on the wire to the
 * real local service (through an injected `fetch` that records and forwards), for both clients.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureCompletions } from '../../src/rollout/capture-completions.js';
import { recordTrajectory } from '../../src/rollout/rollout-scope.js';
import { startTestService, type TestService } from '../../src/testing/index.js';
import { LocalBackend } from '../../src/training/local-backend.js';
import { TrainableModel } from '../../src/training/trainable-model.js';

let service: TestService;
let dataDir: string;

beforeAll(async () => {
  service = await startTestService();
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-defaults-'));
});

afterAll(async () => {
  await service?.close();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

/** Records the JSON body of every chat-completion request, then sends it to the service. */
function recordingFetch(): { fetch: typeof globalThis.fetch; bodies: Record<string, unknown>[] } {
  const bodies: Record<string, unknown>[] = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url.endsWith('/chat/completions') && typeof init?.body === 'string') bodies.push(JSON.parse(init.body));
    return globalThis.fetch(input, init);
  };
  return { fetch, bodies };
}

const messages = [{ role: 'user', content: 'hi' }];
const OTHER_MODEL = 'policyloop/small-chat';

/**
 * Request keys (besides `messages`) × the defaults `{ model: <default>, logprobs: true,
 * temperature: 1, max_tokens: 3 }` → the keys that went on the wire. `DEFAULT` stands for the
 * default model.
 */
const DEFAULT = Symbol('default model');
const table: { case: string; body: Record<string, unknown>; wire: Record<string, unknown> }[] = [
  {
    case: 'keys left out are filled',
    body: { model: DEFAULT },
    wire: { model: DEFAULT, logprobs: true, temperature: 1, max_tokens: 3 },
  },
  {
    case: "model '' is filled (the SDK's types require the key)",
    body: { model: '' },
    wire: { model: DEFAULT, logprobs: true, temperature: 1, max_tokens: 3 },
  },
  {
    case: 'undefined is filled',
    body: { model: DEFAULT, temperature: undefined, logprobs: undefined },
    wire: { model: DEFAULT, logprobs: true, temperature: 1, max_tokens: 3 },
  },
  {
    case: 'null is filled',
    body: { model: DEFAULT, temperature: null, max_tokens: null },
    wire: { model: DEFAULT, logprobs: true, temperature: 1, max_tokens: 3 },
  },
  {
    case: 'falsy values of the request win (0, false)',
    body: { model: DEFAULT, temperature: 0, logprobs: false },
    wire: { model: DEFAULT, logprobs: false, temperature: 0, max_tokens: 3 },
  },
  {
    case: 'other values of the request win, model included',
    body: { model: OTHER_MODEL, max_tokens: 2, temperature: 0.5 },
    wire: { model: OTHER_MODEL, logprobs: true, temperature: 0.5, max_tokens: 2 },
  },
  {
    case: 'keys without a default go through',
    body: { model: DEFAULT, seed: 7 },
    wire: { model: DEFAULT, logprobs: true, temperature: 1, max_tokens: 3, seed: 7 },
  },
];

function resolve(record: Record<string, unknown>, defaultModel: string): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(record).map(([key, value]) => [key, value === DEFAULT ? defaultModel : value]),
  );
}

type Create = (body: Record<string, unknown>) => Promise<unknown>;

/** Sends every row of the table through `create` (in and out of a rollout) and checks the wire. */
async function expectTable(create: Create, bodies: Record<string, unknown>[], defaultModel: string): Promise<void> {
  for (const row of table) {
    const body = { ...resolve(row.body, defaultModel), messages };
    const expected = { ...resolve(row.wire, defaultModel), messages };
    bodies.length = 0;
    await create(body);
    await recordTrajectory(() => create(body));
    expect(bodies, row.case).toEqual([expected, expected]);
  }
}

describe('defaults: one merge rule', () => {
  it('captureCompletions fills undefined, null (and model "") and lets every other request value win', async () => {
    const wire = recordingFetch();
    const client = captureCompletions(
      new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0, fetch: wire.fetch }),
      { defaults: { model: service.baseModel, logprobs: true, temperature: 1, max_tokens: 3 } },
    );
    const create = (body: Record<string, unknown>) =>
      client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
    await expectTable(create, wire.bodies, service.baseModel);
  });

  it('model.openai() follows the same rule, its model and logprobs defaults included', async () => {
    const wire = recordingFetch();
    const backend = new LocalBackend({ url: service.baseURL, apiKey: service.apiKey, dataDir, fetch: wire.fetch });
    const model = await new TrainableModel({
      project: 'defaults',
      name: 'rule',
      baseModel: service.baseModel,
    }).register(backend);
    try {
      const client = model.openai({ defaults: { temperature: 1, max_tokens: 3 } });
      const create = (body: Record<string, unknown>) =>
        client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming);
      await expectTable(create, wire.bodies, model.inferenceName());
    } finally {
      await model.close();
      await backend.close();
    }
  });
});
