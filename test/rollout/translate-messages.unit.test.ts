/**
 * Anthropic's Messages API through a recording fetch, with the real `@anthropic-ai/sdk` client in
 * front and a chat-completions stand-in behind: what goes on the wire, what the client gets back
 * (JSON and named events), what the trajectory records, and the clear 4xx for what cannot be
 * translated (nothing sent, nothing recorded).
 */
import Anthropic from '@anthropic-ai/sdk';
import { describe, expect, it } from 'vitest';
import { captureFetch, isChoice, PromptedModel, recordTrajectory } from 'policyloop';
import type { Choice } from 'policyloop/schema';
import { makeChoice } from 'policyloop/testing';
import { type FakeChatService, fakeChatService } from './support/fake-chat-service.js';

const BASE_URL = 'http://127.0.0.1:9';

function client(service: FakeChatService) {
  return new Anthropic({
    baseURL: BASE_URL,
    apiKey: 'k',
    maxRetries: 0,
    fetch: captureFetch({ fetch: service.fetch, defaults: { logprobs: true } }),
  });
}

const weatherTool = {
  name: 'weather',
  description: 'Weather of a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
};
const call = { id: 'call_7', name: 'weather', arguments: '{"city": "Oslo"}' };

describe("Anthropic's Messages API through captureFetch", () => {
  it('sends one chat completion with every setting mapped, the key as a bearer key', async () => {
    const service = fakeChatService([makeChoice('Sunny.')]);
    await client(service).messages.create({
      model: 'policy',
      max_tokens: 12,
      system: [
        { type: 'text', text: 'Be brief.' },
        { type: 'text', text: 'Use the tool.', cache_control: { type: 'ephemeral' } },
      ],
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Call it.', signature: '' },
            { type: 'text', text: 'Checking.' },
            { type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Oslo' } },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'call_1',
              content: [{ type: 'text', text: 'timeout' }],
              is_error: true,
            },
            { type: 'text', text: 'Try again?' },
          ],
        },
      ],
      tools: [weatherTool],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
      stop_sequences: ['END'],
      metadata: { user_id: 'u1' },
      output_config: { format: { type: 'json_schema', schema: { type: 'object' } } },
      // Sampling settings older SDKs typed (and raw callers still send).
      ...({ temperature: 0.5, top_p: 0.9, top_k: 20 } as object),
    });
    expect(service.urls).toEqual(['http://127.0.0.1:9/v1/chat/completions']);
    expect(service.headers[0]?.get('authorization')).toBe('Bearer k');
    expect(service.headers[0]?.get('x-api-key')).toBeNull();
    expect(service.bodies[0]).toEqual({
      model: 'policy',
      logprobs: true,
      max_tokens: 12,
      messages: [
        { role: 'system', content: 'Be brief.\nUse the tool.' },
        { role: 'user', content: 'Weather in Oslo?' },
        {
          role: 'assistant',
          content: 'Checking.',
          reasoning_content: 'Call it.',
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'Error: timeout' },
        { role: 'user', content: 'Try again?' },
      ],
      tools: [
        {
          type: 'function',
          function: { name: 'weather', description: weatherTool.description, parameters: weatherTool.input_schema },
        },
      ],
      tool_choice: 'required',
      parallel_tool_calls: false,
      stop: ['END'],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 20,
      user: 'u1',
      response_format: { type: 'json_schema', json_schema: { name: 'output', schema: { type: 'object' } } },
    });
  });

  it('answers a message with thinking, text and tool_use blocks, stop_reason and usage', async () => {
    const choice = makeChoice('Let me check.', { toolCalls: [call] });
    (choice.message as unknown as Record<string, unknown>)['reasoning_content'] = 'The user wants weather.';
    const message = await client(fakeChatService([choice])).messages.create({
      model: 'policy',
      max_tokens: 50,
      tools: [weatherTool],
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
    });
    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'fake-model',
      stop_reason: 'tool_use',
      stop_sequence: null,
      content: [
        { type: 'thinking', thinking: 'The user wants weather.' },
        { type: 'text', text: 'Let me check.' },
        { type: 'tool_use', id: 'call_7', name: 'weather', input: { city: 'Oslo' } },
      ],
      usage: { input_tokens: 11, output_tokens: 7 },
    });
    expect(message.id).toMatch(/^msg_/);
  });

  it('maps each finish reason to its stop_reason', async () => {
    const service = fakeChatService([makeChoice('Done.'), makeChoice('Cut', { finishReason: 'length' })]);
    const anthropic = client(service);
    const ask = () =>
      anthropic.messages.create({ model: 'p', max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] });
    expect((await ask()).stop_reason).toBe('end_turn');
    expect((await ask()).stop_reason).toBe('max_tokens');
  });

  it('streams the named events the SDK accumulates into the same message', async () => {
    const service = fakeChatService([makeChoice('It is sunny.', { toolCalls: [call] })]);
    const stream = client(service).messages.stream({
      model: 'policy',
      max_tokens: 50,
      tools: [weatherTool],
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
    });
    const events: string[] = [];
    let text = '';
    for await (const event of stream) {
      events.push(event.type === 'content_block_delta' ? `delta:${event.delta.type}` : event.type);
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
    }
    const final = await stream.finalMessage();
    expect(events).toEqual([
      'message_start',
      'content_block_start',
      'delta:text_delta',
      'delta:text_delta',
      'content_block_stop',
      'content_block_start',
      'delta:input_json_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(text).toBe('It is sunny.');
    expect(final.content).toMatchObject([
      { type: 'text', text: 'It is sunny.' },
      { type: 'tool_use', id: 'call_7', name: 'weather', input: { city: 'Oslo' } },
    ]);
    expect(final.stop_reason).toBe('tool_use');
    expect(final.usage).toMatchObject({ input_tokens: 11, output_tokens: 7 });
  });

  for (const stream of [false, true]) {
    it(`records a ${stream ? 'streamed' : 'plain'} tool loop in one conversation, even with arguments that do not parse`, async () => {
      const broken = { id: 'call_9', name: 'weather', arguments: '{"city": Oslo' };
      const service = fakeChatService([makeChoice(null, { toolCalls: [broken] }), makeChoice('9C in Oslo.')]);
      const anthropic = client(service);
      const { trajectory } = await recordTrajectory(async () => {
        const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Oslo?' }];
        const params = { model: 'policy', system: 'Be brief.', max_tokens: 50, tools: [weatherTool] };
        const first = stream
          ? await anthropic.messages.stream({ ...params, messages }).finalMessage()
          : await anthropic.messages.create({ ...params, messages });
        const use = first.content.find((block) => block.type === 'tool_use');
        expect(use).toMatchObject({ id: 'call_9', input: {} });
        messages.push({ role: 'assistant', content: first.content });
        messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_9', content: '9C' }] });
        if (stream) await anthropic.messages.stream({ ...params, messages }).finalMessage();
        else await anthropic.messages.create({ ...params, messages });
      });
      // The call goes back to the model as it wrote it, so the second request continues the first.
      const sent = (service.bodies[1]?.['messages'] as Record<string, unknown>[] | undefined)?.[2];
      expect(sent).toMatchObject({ tool_calls: [{ function: { arguments: broken.arguments } }] });
      expect(trajectory.additional_histories).toEqual([]);
      const items = trajectory.messages_and_choices;
      expect(items.map((item) => (isChoice(item) ? 'choice' : item.role))).toEqual([
        'system',
        'user',
        'choice',
        'tool',
        'choice',
      ]);
      const choices = items.filter(isChoice) as Choice[];
      expect(choices[1]?.logprobs?.content?.length).toBeGreaterThan(0);
    });
  }

  const refusals: Array<[string, Record<string, unknown>, RegExp]> = [
    [
      'an image',
      { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }] },
      /images \(`image` blocks\)/,
    ],
    [
      'a document',
      {
        messages: [
          {
            role: 'user',
            content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'x' } }],
          },
        ],
      },
      /documents/,
    ],
    [
      'citations',
      { messages: [{ role: 'user', content: [{ type: 'text', text: 'x', citations: [{ type: 'char_location' }] }] }] },
      /citations/,
    ],
    [
      'a server tool',
      { tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
      /server tools \(`web_search_20250305`\)/,
    ],
    [
      'a prefilled assistant turn',
      {
        messages: [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: '{' },
        ],
      },
      /prefilled/,
    ],
    ['a malformed message', { messages: [{ role: 'robot', content: 'x' }] }, /messages\[0\]\.role/],
  ];
  for (const [what, overrides, message] of refusals) {
    it(`refuses ${what} with a 400 that says so, sending and recording nothing`, async () => {
      const service = fakeChatService([makeChoice('x')]);
      const body = { model: 'p', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }], ...overrides };
      const { result, trajectory } = await recordTrajectory(() =>
        client(service)
          .messages.create(body as never)
          .catch((error: unknown) => error),
      );
      expect(result).toBeInstanceOf(Anthropic.BadRequestError);
      expect((result as Error).message).toMatch(message);
      expect(service.bodies).toEqual([]);
      expect(trajectory.messages_and_choices).toEqual([]);
    });
  }

  it('gives model.anthropicBaseURL, where the SDK reaches the model through model.fetch()', async () => {
    const service = fakeChatService([makeChoice('Hello.')]);
    const model = new PromptedModel({
      project: 'p',
      name: 'n',
      model: 'policy',
      baseURL: `${BASE_URL}/v1`,
      apiKey: 'k',
      fetch: service.fetch,
    });
    expect(model.anthropicBaseURL).toBe(BASE_URL);
    const anthropic = new Anthropic({
      baseURL: model.anthropicBaseURL,
      apiKey: model.inferenceApiKey,
      fetch: model.fetch(),
    });
    const { result, trajectory } = await recordTrajectory(() =>
      anthropic.messages.create({
        model: model.inferenceName(),
        max_tokens: 5,
        messages: [{ role: 'user', content: 'Hi' }],
      }),
    );
    expect(result.content).toEqual([{ type: 'text', text: 'Hello.', citations: null }]);
    expect(service.bodies[0]).toMatchObject({ model: 'policy', logprobs: true });
    expect(trajectory.messages_and_choices.filter(isChoice)).toHaveLength(1);
  });
});
