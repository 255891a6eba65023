import { describe, expect, it } from 'vitest';
import { captureFetch } from '../../src/rollout/capture-fetch.js';
import { recordTrajectory } from '../../src/rollout/rollout-scope.js';
import { type Choice, isChoice } from '../../src/schema/index.js';
import { makeChoice } from '../../src/testing/index.js';

const URL_ = 'http://127.0.0.1:1/v1/chat/completions';

/** A fake service: answers each chat-completions call with the next Choice, JSON or SSE, and keeps the bodies. */
function fakeService(choices: Choice[], options: { status?: number[] } = {}) {
  const bodies: Record<string, unknown>[] = [];
  let call = 0;
  const fetch = async (_input: unknown, init?: RequestInit): Promise<Response> => {
    const body = JSON.parse(String(init?.body)) as Record<string, unknown>;
    bodies.push(body);
    const status = options.status?.[call] ?? 200;
    const choice = choices[Math.min(call, choices.length - 1)] as Choice;
    call += 1;
    if (status !== 200) return new Response('{"error":{"message":"busy"}}', { status });
    if (body['stream'] !== true) {
      return Response.json({ id: 'c', object: 'chat.completion', created: 0, model: 'm', choices: [choice] });
    }
    const tokens = choice.logprobs?.content ?? [];
    const events = [
      ...tokens.map((token) => ({
        choices: [{ index: 0, delta: { content: token.token }, logprobs: { content: [token] }, finish_reason: null }],
      })),
      ...(choice.message.tool_calls ?? []).map((toolCall, index) => ({
        choices: [{ index: 0, delta: { tool_calls: [{ index, ...toolCall }] }, finish_reason: null }],
      })),
      { choices: [{ index: 0, delta: {}, finish_reason: choice.finish_reason }] },
      { choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } },
    ];
    const text = `${events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('')}data: [DONE]\n\n`;
    return new Response(text, { headers: { 'content-type': 'text/event-stream' } });
  };
  return { fetch: fetch as typeof globalThis.fetch, bodies };
}

const post = (fetch: typeof globalThis.fetch, body: Record<string, unknown>) =>
  fetch(URL_, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** Reads an SSE response the way frameworks do, stopping after the chunk with `finish_reason`. */
async function readUntilFinish(response: Response): Promise<string> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (text.includes('"finish_reason":"')) break;
  }
  await reader.cancel();
  return text;
}

describe('captureFetch', () => {
  it('records a JSON tool loop into one conversation although the framework re-serializes the call', async () => {
    const call = { id: 'call_1', name: 'weather', arguments: '{"city": "Oslo", "days": 2}' };
    const service = fakeService([makeChoice(null, { toolCalls: [call] }), makeChoice('Rain.')]);
    const fetch = captureFetch({ fetch: service.fetch, defaults: { logprobs: true, model: 'policy' } });
    const { trajectory } = await recordTrajectory(async () => {
      const messages: unknown[] = [{ role: 'user', content: [{ type: 'text', text: 'Weather?' }] }];
      await post(fetch, { model: '', messages, tools: [{ type: 'function', function: { name: 'weather' } }] });
      // As frameworks send it back: arguments re-serialized (no spaces, other key order), content
      // as an empty string, no refusal field.
      messages.push(
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"days":2,"city":"Oslo"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '9C' },
      );
      await post(fetch, { messages, tools: [{ type: 'function', function: { name: 'weather' } }], logprobs: false });
    });
    expect(service.bodies.map((body) => [body['model'], body['logprobs']])).toEqual([
      ['policy', true],
      ['policy', false],
    ]);
    expect(trajectory.additional_histories).toEqual([]);
    const items = trajectory.messages_and_choices ?? [];
    expect(items.map((item) => (isChoice(item) ? 'choice' : item.role))).toEqual(['user', 'choice', 'tool', 'choice']);
    // The Choice is the model's own, with its own spelling of the arguments.
    const first = items[1] as Choice;
    expect(first.message.tool_calls?.[0]).toMatchObject({ function: { arguments: '{"city": "Oslo", "days": 2}' } });
    // The user message is recorded exactly as sent.
    expect(items[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'Weather?' }] });
  });

  it('records an SSE stream once, at the finish_reason chunk, when the reader stops there', async () => {
    const service = fakeService([makeChoice('Sunny today')]);
    const fetch = captureFetch({ fetch: service.fetch });
    const { trajectory } = await recordTrajectory(async () => {
      const response = await post(fetch, { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] });
      expect(response.headers.get('content-type')).toBe('text/event-stream');
      await readUntilFinish(response);
    });
    const choices = (trajectory.messages_and_choices ?? []).filter(isChoice);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.message.content).toBe('Sunny today');
    expect(choices[0]?.logprobs?.content?.map((token) => token.token).join('')).toBe('Sunny today');
  });

  it('hands the caller the same SSE bytes the service sent', async () => {
    const service = fakeService([makeChoice('ok')]);
    const direct = await (await post(service.fetch, { model: 'm', stream: true, messages: [] })).text();
    const { result } = await recordTrajectory(async () =>
      (await post(captureFetch({ fetch: service.fetch }), { model: 'm', stream: true, messages: [] })).text(),
    );
    expect(result).toBe(direct);
  });

  it('records nothing for a stream cancelled before its finish_reason, a non-2xx answer, or a failed attempt', async () => {
    const service = fakeService([makeChoice('a b c d')], { status: [200, 500, 200] });
    let fail = true;
    const flaky: typeof globalThis.fetch = async (input, init) => {
      if (fail) {
        fail = false;
        throw new TypeError('fetch failed');
      }
      return service.fetch(input, init);
    };
    const fetch = captureFetch({ fetch: flaky });
    const messages = [{ role: 'user', content: 'hi' }];
    const { trajectory } = await recordTrajectory(async () => {
      await expect(post(fetch, { model: 'm', messages })).rejects.toThrow('fetch failed');
      const response = await post(fetch, { model: 'm', stream: true, messages });
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      await reader.cancel();
      expect((await post(fetch, { model: 'm', messages })).status).toBe(500);
      await post(fetch, { model: 'm', messages }); // the retry that succeeds
    });
    expect((trajectory.messages_and_choices ?? []).filter(isChoice)).toHaveLength(1);
  });

  it('outside a rollout only fills the defaults; other requests pass through untouched', async () => {
    const seen: [string, RequestInit | undefined][] = [];
    const inner: typeof globalThis.fetch = async (input, init) => {
      seen.push([String(input), init]);
      return Response.json({ choices: [makeChoice('x')] });
    };
    const fetch = captureFetch({ fetch: inner, defaults: { logprobs: true } });
    await post(fetch, { model: 'm', messages: [] });
    const embeddings = { method: 'POST', body: '{"input":"x"}' };
    await fetch('http://127.0.0.1:1/v1/embeddings', embeddings);
    await fetch('http://127.0.0.1:1/v1/chat/completions/c1', { method: 'GET' });
    expect(JSON.parse(String(seen[0]?.[1]?.body))).toEqual({ model: 'm', messages: [], logprobs: true });
    expect(seen[1]?.[1]).toBe(embeddings);
    expect(seen[2]?.[0]).toBe('http://127.0.0.1:1/v1/chat/completions/c1');
  });

  it('refuses bad options with a clear message', () => {
    expect(() => captureFetch({ fetch: 'nope' as never })).toThrow('Expected `fetch` to be a function, got');
  });
});
