/**
 * The official `openai` npm client, pointed at the local service, works unchanged: plain
 * completions, `n > 1`, logprobs, tools, streaming (raw chunks and the SDK's stream helper), the
 * model list and the SDK's error classes.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from './support/harness.js';
import { registerModel } from './support/jobs.js';
import { createStandInEngine } from './support/stand-in-engine.js';

const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'lookup',
      description: 'Looks a word up',
      parameters: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
    },
  },
];

describe('openai SDK against the real engine', () => {
  let server: TestServer;
  let client: OpenAI;

  beforeAll(async () => {
    server = await startServer();
    client = new OpenAI({
      baseURL: server.handle.baseURL,
      apiKey: server.handle.apiKey,
      maxRetries: 0,
      timeout: 30_000,
    });
    await registerModel(server, 'sdk', 'sdk-project');
  });
  afterAll(async () => {
    await server.close();
  });

  it('creates a plain completion', async () => {
    const completion = await client.chat.completions.create({
      model: 'policyloop/tiny-chat',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 6,
    });
    expect(completion.object).toBe('chat.completion');
    expect(completion.choices).toHaveLength(1);
    expect(completion.choices[0]?.message.role).toBe('assistant');
    expect(typeof completion.choices[0]?.message.content).toBe('string');
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('samples n choices with logprobs and top logprobs, from a trained model name', async () => {
    const completion = await client.chat.completions.create({
      model: 'wandb-artifact:///local/sdk-project/sdk',
      messages: [
        { role: 'developer', content: 'answer' },
        { role: 'user', content: 'hi' },
      ],
      n: 3,
      max_completion_tokens: 5,
      logprobs: true,
      top_logprobs: 3,
      temperature: 1,
      seed: 1,
    });
    expect(completion.model).toBe('wandb-artifact:///local/sdk-project/sdk');
    expect(completion.choices.map((choice) => choice.index)).toEqual([0, 1, 2]);
    for (const choice of completion.choices) {
      const tokens = choice.logprobs?.content ?? [];
      expect(tokens.length).toBeGreaterThan(0);
      for (const token of tokens) {
        expect(token.logprob).toBeLessThanOrEqual(0);
        expect(token.top_logprobs).toHaveLength(3);
      }
    }
  });

  it('accepts tools, tool choices and a tool-call history', async () => {
    const completion = await client.chat.completions.create({
      model: 'policyloop/tiny-chat',
      messages: [
        { role: 'user', content: 'define cat' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"word":"cat"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'a small feline' },
      ],
      tools,
      tool_choice: 'auto',
      max_tokens: 6,
    });
    expect(completion.choices[0]?.finish_reason).toMatch(/^(stop|length|tool_calls)$/);
  });

  it('streams chunks that add up to the completion, with usage', async () => {
    const request = {
      model: 'policyloop/tiny-chat',
      messages: [{ role: 'user' as const, content: 'hi' }],
      max_tokens: 6,
      logprobs: true,
      seed: 11,
    };
    const plain = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    let chunks = 0;
    let loggedTokens = 0;
    for await (const chunk of stream) {
      chunks += 1;
      expect(chunk.object).toBe('chat.completion.chunk');
      for (const choice of chunk.choices) {
        content += choice.delta.content ?? '';
        loggedTokens += choice.logprobs?.content?.length ?? 0;
        finish = choice.finish_reason ?? finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(finish).toMatch(/^(stop|length)$/);
    expect(usage?.completion_tokens).toBe(loggedTokens);
    // Same seed, same sample: the stream carries exactly the plain completion's text.
    expect(content).toBe(plain.choices[0]?.message.content);

    const helper = client.chat.completions.stream({
      model: 'policyloop/tiny-chat',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 6,
      logprobs: true,
      n: 2,
    });
    const final = await helper.finalChatCompletion();
    expect(final.choices).toHaveLength(2);
    expect(final.choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
  });

  it('lists base and trained models', async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(expect.arrayContaining(['policyloop/tiny-chat', 'wandb-artifact:///local/sdk-project/sdk']));
  });

  it("raises the SDK's own error classes for 401, 404 and 422", async () => {
    const stranger = new OpenAI({ baseURL: server.handle.baseURL, apiKey: 'not-the-key', maxRetries: 0 });
    await expect(
      stranger.chat.completions.create({ model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(
      client.chat.completions.create({ model: 'nobody', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(
      client.chat.completions.create({ model: 'policyloop/tiny-chat', messages: [], stream: true }),
    ).rejects.toBeInstanceOf(OpenAI.UnprocessableEntityError);
  });

  it('shows the service\'s reason in the SDK\'s error message, not "(no body)"', async () => {
    const missing = await client.chat.completions
      .create({ model: 'wandb-artifact:///local/sdk-project/nobody', messages: [{ role: 'user', content: 'hi' }] })
      .catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect((missing as Error).message).toMatch(/^404 .*nobody/);
    const invalid = await client.chat.completions
      .create({ model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'hi' }], temperature: 7 })
      .catch((error: unknown) => error);
    expect(invalid).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    expect((invalid as Error).message).toMatch(/^422 body\.temperature: /);
  });
});

describe('openai SDK and tool calls (stand-in engine that always calls the tool)', () => {
  let server: TestServer;
  let client: OpenAI;

  beforeAll(async () => {
    server = await startServer({ engine: createStandInEngine() });
    client = new OpenAI({ baseURL: server.handle.baseURL, apiKey: server.handle.apiKey, maxRetries: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  it('returns tool calls plainly and assembles them from a stream', async () => {
    const plain = await client.chat.completions.create({
      model: 'policyloop/tiny-chat',
      messages: [{ role: 'user', content: 'define cat' }],
      tools,
      tool_choice: 'required',
      n: 2,
    });
    expect(plain.choices.map((choice) => choice.finish_reason)).toEqual(['tool_calls', 'tool_calls']);
    const call = plain.choices[0]?.message.tool_calls?.[0];
    expect(call?.type === 'function' ? call.function : undefined).toEqual({ name: 'lookup', arguments: '{"x": 1}' });

    const stream = client.chat.completions.stream({
      model: 'policyloop/tiny-chat',
      messages: [{ role: 'user', content: 'define cat' }],
      tools,
      tool_choice: 'required',
      n: 2,
      stream_options: { include_usage: true },
    });
    const final = await stream.finalChatCompletion();
    expect(final.choices.map((choice) => choice.message.tool_calls?.[0])).toEqual(
      plain.choices.map((choice) =>
        expect.objectContaining({ id: choice.message.tool_calls?.[0]?.id, type: 'function' }),
      ),
    );
    expect(final.choices[1]?.message.tool_calls?.[0]).toMatchObject({
      function: { name: 'lookup', arguments: '{"x": 1}' },
    });
    expect(final.usage?.total_tokens).toBe(plain.usage?.total_tokens);
  });

  it("streams content token by token with each token's logprob", async () => {
    const stream = await client.chat.completions.create({
      model: 'policyloop/tiny-chat',
      messages: [{ role: 'user', content: 'abc' }],
      logprobs: true,
      stream: true,
      max_tokens: 50,
    });
    const deltas: { content: string; tokens: string[] }[] = [];
    for await (const chunk of stream) {
      for (const choice of chunk.choices)
        if (choice.delta.content)
          deltas.push({
            content: choice.delta.content,
            tokens: (choice.logprobs?.content ?? []).map((token) => token.token),
          });
    }
    expect(deltas.map((delta) => delta.content).join('')).toBe('echo 0: abc');
    for (const delta of deltas) expect(delta.tokens).toEqual([delta.content]);
  });

  it("answers an EngineInputError as a 422 at the engine's loc", async () => {
    const response = await server.call('POST', '/v1/chat/completions', {
      body: { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'x'.repeat(2000) }] },
    });
    expect(response.status).toBe(422);
    expect(response.body.detail[0]).toMatchObject({ loc: ['body', 'messages'], type: 'value_error' });
  });
});
