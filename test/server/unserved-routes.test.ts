/**
 * OpenAI routes the service does not serve answer a 404 that says what it speaks and how to stay
 * there: the `openai` SDK's `responses.create` (what a framework switched to the Responses API
 * sends) gets a `NotFoundError` whose message names chat completions and each framework's setting.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from './support/harness.js';

describe('routes the service does not serve', () => {
  let server: TestServer;
  let client: OpenAI;

  beforeAll(async () => {
    server = await startServer();
    client = new OpenAI({ baseURL: server.handle.baseURL, apiKey: server.handle.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  it('POST /v1/responses: a 404 naming chat completions and the setting of each framework', async () => {
    const error = await client.responses.create({ model: 'any', input: 'hi' }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    const message = (error as InstanceType<typeof OpenAI.NotFoundError>).message;
    expect(message).toContain('POST /v1/responses is not served');
    expect(message).toContain('Chat Completions API only');
    for (const setting of [
      'OpenAIChatCompletionsModel',
      'provider.chat(name)',
      'ChatOpenAICompletions',
      'useResponsesApi: false',
    ])
      expect(message).toContain(setting);
  });

  it('other OpenAI routes get the same answer; an unknown path keeps the plain 404', async () => {
    const origin = new URL(server.handle.baseURL).origin;
    const headers = { authorization: `Bearer ${server.handle.apiKey}`, 'content-type': 'application/json' };
    for (const route of ['/v1/completions', '/v1/embeddings', '/v1/responses/resp_1/input_items']) {
      const response = await fetch(`${origin}${route}`, { method: 'POST', headers, body: '{}' });
      expect(response.status).toBe(404);
      const body = (await response.json()) as { detail: string; error: { message: string; type: string } };
      expect(body.error.type).toBe('not_found_error');
      expect(body.detail).toContain(`POST ${route} is not served`);
      expect(body.error.message).toBe(body.detail);
    }
    const plain = await fetch(`${origin}/v1/nothing-here`, { method: 'POST', headers, body: '{}' });
    expect(plain.status).toBe(404);
    expect(((await plain.json()) as { detail: string }).detail).toBe('Not Found');
  });
});
