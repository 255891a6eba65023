/**
 * The Responses API through a recording fetch, with the real `openai` client in front and a
 * chat-completions stand-in behind: what goes on the wire, what the client gets back (JSON and
 * typed events), what the trajectory records, `previous_response_id` and `item_reference` within a
 * rollout, and the clear 4xx for what cannot be translated (nothing sent, nothing recorded).
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { captureFetch, isChoice, PromptedModel, recordTrajectory } from 'policyloop';
import type { Choice } from 'policyloop/schema';
import { makeChoice } from 'policyloop/testing';
import { type FakeChatService, fakeChatService } from './support/fake-chat-service.js';

const BASE_URL = 'http://127.0.0.1:9/v1';

function client(service: FakeChatService, defaults: Record<string, unknown> = { logprobs: true, model: 'policy' }) {
  return new OpenAI({
    baseURL: BASE_URL,
    apiKey: 'k',
    maxRetries: 0,
    fetch: captureFetch({ fetch: service.fetch, defaults }),
  });
}

const weatherTool = {
  type: 'function' as const,
  name: 'weather',
  description: 'Weather of a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
};

const call = { id: 'call_7', name: 'weather', arguments: '{"city": "Oslo"}' };

describe('the Responses API through captureFetch', () => {
  it('sends one chat completion to the endpoint beside it, with every setting mapped', async () => {
    const service = fakeChatService([makeChoice('Sunny.')]);
    await client(service).responses.create({
      model: 'policy',
      instructions: 'Be brief.',
      input: [
        { role: 'developer', content: 'Use the tool.' },
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'Weather in ' },
            { type: 'input_text', text: 'Oslo?' },
          ],
        },
        { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '9C' },
      ],
      tools: [weatherTool],
      tool_choice: { type: 'function', name: 'weather' },
      parallel_tool_calls: false,
      max_output_tokens: 12,
      temperature: 0.7,
      top_p: 0.9,
      text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object' }, strict: true } },
      metadata: { run: '1' },
      store: false,
    });
    expect(service.urls).toEqual(['http://127.0.0.1:9/v1/chat/completions']);
    expect(service.headers[0]?.get('authorization')).toBe('Bearer k');
    expect(service.bodies[0]).toEqual({
      model: 'policy',
      logprobs: true,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'system', content: 'Use the tool.' },
        { role: 'user', content: 'Weather in Oslo?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '9C' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'weather',
            description: weatherTool.description,
            parameters: weatherTool.parameters,
            strict: true,
          },
        },
      ],
      tool_choice: { type: 'function', function: { name: 'weather' } },
      parallel_tool_calls: false,
      max_tokens: 12,
      temperature: 0.7,
      top_p: 0.9,
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'answer', schema: { type: 'object' }, strict: true },
      },
    });
  });

  it('answers in the Responses shape: reasoning, message with logprobs, function calls, usage', async () => {
    const choice = makeChoice('Let me check.', { toolCalls: [call] });
    (choice.message as unknown as Record<string, unknown>)['reasoning_content'] = 'The user wants weather.';
    const service = fakeChatService([choice]);
    const response = await client(service).responses.create({
      input: 'Weather in Oslo?',
      tools: [weatherTool],
      include: ['message.output_text.logprobs'],
      metadata: { run: '1' },
    });
    expect(response.object).toBe('response');
    expect(response.id).toMatch(/^resp_/);
    expect(response.status).toBe('completed');
    expect(response.model).toBe('fake-model');
    expect(response.metadata).toEqual({ run: '1' });
    expect(response.output.map((item) => item.type)).toEqual(['reasoning', 'message', 'function_call']);
    const [reasoning, message, functionCall] = response.output;
    expect(reasoning).toMatchObject({ content: [{ type: 'reasoning_text', text: 'The user wants weather.' }] });
    expect(message).toMatchObject({
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'Let me check.' }],
    });
    const logprobs = (message as { content: { logprobs: { token: string; logprob: number }[] }[] }).content[0]
      ?.logprobs;
    expect(logprobs?.map((token) => token.token)).toEqual(choice.logprobs?.content?.map((token) => token.token));
    expect(logprobs?.[0]?.logprob).toBe(-0.1);
    expect(functionCall).toMatchObject({
      type: 'function_call',
      call_id: 'call_7',
      name: 'weather',
      arguments: call.arguments,
    });
    expect(response.output_text).toBe('Let me check.');
    expect(response.usage).toEqual({
      input_tokens: 11,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 18,
    });
  });

  it('says incomplete when the model ran out of tokens', async () => {
    const service = fakeChatService([makeChoice('Sun', { finishReason: 'length' })]);
    const response = await client(service).responses.create({ input: 'Weather?', max_output_tokens: 1 });
    expect(response.status).toBe('incomplete');
    expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
  });

  it('streams the typed events the SDK accumulates into the same response', async () => {
    const choice = makeChoice('It is sunny.', { toolCalls: [call] });
    const service = fakeChatService([choice]);
    const events: string[] = [];
    let text = '';
    let args = '';
    const stream = client(service).responses.stream({ input: 'Weather in Oslo?', tools: [weatherTool] });
    stream.on('event', (event) => {
      events.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.function_call_arguments.delta') args += event.delta;
    });
    const final = await stream.finalResponse();
    expect(service.bodies[0]).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(events[0]).toBe('response.created');
    expect(events[1]).toBe('response.in_progress');
    expect(events.at(-1)).toBe('response.completed');
    expect(events).toContain('response.output_text.delta');
    expect(events).toContain('response.function_call_arguments.delta');
    expect(events.filter((type) => type === 'response.output_item.done')).toHaveLength(2);
    expect(text).toBe('It is sunny.');
    expect(args).toBe(call.arguments);
    expect(final.output_text).toBe('It is sunny.');
    expect(final.output.map((item) => item.type)).toEqual(['message', 'function_call']);
    expect(final.output[1]).toMatchObject({
      call_id: 'call_7',
      name: 'weather',
      arguments: call.arguments,
      status: 'completed',
    });
    expect(final.usage?.total_tokens).toBe(18);
  });

  for (const stream of [false, true]) {
    it(`records a ${stream ? 'streamed' : 'plain'} tool loop as Choices with logprobs in one conversation`, async () => {
      const service = fakeChatService([makeChoice(null, { toolCalls: [call] }), makeChoice('9C in Oslo.')]);
      const openai = client(service);
      const { trajectory } = await recordTrajectory(async () => {
        const input: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: 'Weather in Oslo?' }];
        const first = stream
          ? await openai.responses.stream({ instructions: 'Be brief.', input, tools: [weatherTool] }).finalResponse()
          : await openai.responses.create({ instructions: 'Be brief.', input, tools: [weatherTool] });
        // As the Agents SDK sends the conversation back: the output items, then the tool's result.
        input.push(...(first.output as OpenAI.Responses.ResponseInputItem[]));
        input.push({ type: 'function_call_output', call_id: 'call_7', output: '9C' });
        if (stream)
          await openai.responses.stream({ instructions: 'Be brief.', input, tools: [weatherTool] }).finalResponse();
        else await openai.responses.create({ instructions: 'Be brief.', input, tools: [weatherTool] });
      });
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
      expect(choices[0]?.message.tool_calls?.[0]).toMatchObject({ function: { arguments: call.arguments } });
      expect(choices[1]?.message).toMatchObject({ content: '9C in Oslo.' });
      expect(choices[1]?.logprobs?.content?.length).toBeGreaterThan(0);
      expect(trajectory.tools?.[0]?.function.name).toBe('weather');
    });
  }

  it('continues a response of the same rollout by previous_response_id and item_reference', async () => {
    const service = fakeChatService([makeChoice('Hello.'), makeChoice('Fine.'), makeChoice('Bye.')]);
    const openai = client(service);
    const { trajectory } = await recordTrajectory(async () => {
      const first = await openai.responses.create({ instructions: 'Be brief.', input: 'Hi' });
      const second = await openai.responses.create({
        instructions: 'Be brief.',
        previous_response_id: first.id,
        input: 'How are you?',
      });
      await openai.responses.create({
        instructions: 'Be brief.',
        input: [
          { role: 'user', content: 'Hi' },
          { type: 'item_reference', id: first.output[0]?.id as string },
          { role: 'user', content: 'How are you?' },
          { type: 'item_reference', id: second.output[0]?.id as string },
          { role: 'user', content: 'Bye?' },
        ],
      });
    });
    expect(service.bodies[1]?.['messages']).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello.' },
      { role: 'user', content: 'How are you?' },
    ]);
    expect((service.bodies[2]?.['messages'] as unknown[] | undefined)?.slice(2, 5)).toEqual([
      { role: 'assistant', content: 'Hello.' },
      { role: 'user', content: 'How are you?' },
      { role: 'assistant', content: 'Fine.' },
    ]);
    expect(trajectory.messages_and_choices.filter(isChoice)).toHaveLength(3);
    expect(trajectory.additional_histories).toEqual([]);
  });

  const refusals: Array<[string, Record<string, unknown>, RegExp]> = [
    ['a built-in tool', { input: 'hi', tools: [{ type: 'web_search' }] }, /web search tool \(`web_search`\)/],
    ['file search', { input: 'hi', tools: [{ type: 'file_search', vector_store_ids: ['v'] }] }, /file search/],
    ['computer use', { input: 'hi', tools: [{ type: 'computer_use_preview' }] }, /computer use/],
    [
      'code interpreter',
      { input: 'hi', tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] },
      /code interpreter/,
    ],
    ['background', { input: 'hi', background: true }, /background responses/],
    ['a conversation object', { input: 'hi', conversation: 'conv_1' }, /conversation objects/],
    ['a stored prompt', { prompt: { id: 'pmpt_1' } }, /stored prompt templates/],
    [
      'an image',
      { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] },
      /images/,
    ],
    [
      'an unknown previous_response_id',
      { input: 'hi', previous_response_id: 'resp_other' },
      /resp_other.*same rollout/,
    ],
    ['an unknown item_reference', { input: [{ type: 'item_reference', id: 'msg_other' }] }, /msg_other/],
    ['a malformed input', { input: 42 }, /Expected `input` to be an array, got 42/],
    ['a malformed item', { input: [{ type: 'function_call', name: 'f' }] }, /input\[0\]\.call_id/],
  ];
  for (const [what, body, message] of refusals) {
    it(`refuses ${what} with a 400 that says so, sending and recording nothing`, async () => {
      const service = fakeChatService([makeChoice('x')]);
      const openai = client(service);
      const { result, trajectory } = await recordTrajectory(async () => {
        try {
          await openai.responses.create(body as never);
          return undefined;
        } catch (error) {
          return error;
        }
      });
      expect(result).toBeInstanceOf(OpenAI.BadRequestError);
      expect((result as Error).message).toMatch(message);
      expect(service.bodies).toEqual([]);
      expect(trajectory.messages_and_choices).toEqual([]);
    });
  }

  it('answers an error of the chat endpoint with its status in the Responses error shape, recording nothing', async () => {
    const service = fakeChatService([makeChoice('x')], [503]);
    const { result, trajectory } = await recordTrajectory(() =>
      client(service)
        .responses.create({ input: 'hi' })
        .catch((error: unknown) => error),
    );
    expect(result).toBeInstanceOf(OpenAI.InternalServerError);
    expect((result as Error).message).toContain('the service is busy');
    expect(trajectory.messages_and_choices).toEqual([]);
  });

  it('works through model.openai(), whose chat completions stay as they were', async () => {
    const service = fakeChatService([makeChoice('Hello.'), makeChoice('Hi.')]);
    const model = new PromptedModel({
      project: 'p',
      name: 'n',
      model: 'policy',
      baseURL: BASE_URL,
      apiKey: 'k',
      fetch: service.fetch,
    });
    const openai = model.openai();
    const { result, trajectory } = await recordTrajectory(async () => {
      const response = await openai.responses.create({ model: model.inferenceName(), input: 'Hi' });
      await openai.chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'user', content: 'Hi' }],
      });
      return response;
    });
    expect(result.output_text).toBe('Hello.');
    expect(service.bodies.map((body) => [body['model'], body['logprobs']])).toEqual([
      ['policy', true],
      ['policy', true],
    ]);
    // Two conversations (neither continues the other), each one recorded Choice.
    expect(trajectory.messages_and_choices.filter(isChoice)).toHaveLength(1);
    expect(
      trajectory.additional_histories.flatMap((history) => history.messages_and_choices.filter(isChoice)),
    ).toHaveLength(1);
  });
});
