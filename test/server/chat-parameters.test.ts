/**
 * Every chat-completions parameter the service lists is honoured end to end (HTTP, real engine):
 * each test compares two requests that differ in one parameter, so it fails if the service drops
 * or mangles that parameter on its way to the engine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from './support/harness.js';

let server: TestApp;

beforeAll(async () => {
  server = await startApp();
});
afterAll(async () => {
  await server.close();
});

interface TokenLogprob {
  token: string;
  logprob: number;
  top_logprobs: { token: string; logprob: number }[];
}
interface Completion {
  choices: {
    index: number;
    finish_reason: string;
    message: { content: string | null; tool_calls?: unknown[] };
    logprobs: { content: TokenLogprob[] } | null;
  }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

const messages = [{ role: 'user', content: 'hello there' }];

async function complete(parameters: Record<string, unknown>): Promise<Completion> {
  const response = await server.call<Completion>('POST', '/v1/chat/completions', {
    body: { model: 'policyloop/tiny-chat', messages, ...parameters },
  });
  expect(response.status, response.text).toBe(200);
  return response.body;
}

const texts = (completion: Completion) => completion.choices.map((choice) => choice.message.content);

describe('chat-completions parameters', () => {
  it('n: that many choices, indexed 0..n-1, usage counting all of them', async () => {
    const completion = await complete({ n: 4, max_tokens: 3, logprobs: true });
    expect(completion.choices.map((choice) => choice.index)).toEqual([0, 1, 2, 3]);
    const sampled = completion.choices.reduce((sum, choice) => sum + (choice.logprobs?.content.length ?? 0), 0);
    expect(completion.usage.completion_tokens).toBe(sampled);
    expect(completion.usage.total_tokens).toBe(completion.usage.prompt_tokens + completion.usage.completion_tokens);
  });

  it('max_tokens and max_completion_tokens cap the completion (max_completion_tokens wins)', async () => {
    const long = await complete({ temperature: 0, max_tokens: 12, logprobs: true });
    expect(long.choices[0]?.logprobs?.content.length).toBe(12);
    expect(long.choices[0]?.finish_reason).toBe('length');
    const short = await complete({ temperature: 0, max_tokens: 4, logprobs: true });
    expect(short.choices[0]?.logprobs?.content.map((token) => token.token)).toEqual(
      long.choices[0]?.logprobs?.content.slice(0, 4).map((token) => token.token),
    );
    expect(short.usage.completion_tokens).toBe(4);
    const both = await complete({ temperature: 0, max_tokens: 12, max_completion_tokens: 2, logprobs: true });
    expect(both.choices[0]?.logprobs?.content).toHaveLength(2);
  });

  it('seed: the same seed samples the same text, other seeds other texts', async () => {
    const first = await complete({ seed: 42, max_tokens: 16, n: 2 });
    const again = await complete({ seed: 42, max_tokens: 16, n: 2 });
    expect(texts(again)).toEqual(texts(first));
    const others = await Promise.all([1, 2, 3].map((seed) => complete({ seed, max_tokens: 16 })));
    expect(new Set([texts(first)[0], ...others.map((completion) => texts(completion)[0])]).size).toBeGreaterThan(1);
  });

  it('temperature 0 and a tiny top_p are greedy whatever the seed; temperature 2 is not', async () => {
    const greedy = await complete({ temperature: 0, max_tokens: 16, seed: 1 });
    expect(texts(await complete({ temperature: 0, max_tokens: 16, seed: 2 }))).toEqual(texts(greedy));
    expect(texts(await complete({ top_p: 1e-6, max_tokens: 16, seed: 3 }))).toEqual(texts(greedy));
    const hot = await Promise.all([4, 5, 6].map((seed) => complete({ temperature: 2, max_tokens: 16, seed })));
    expect(hot.some((completion) => texts(completion)[0] !== texts(greedy)[0])).toBe(true);
  });

  it('stop: the completion ends before the first stop sequence, with finish_reason stop', async () => {
    const greedy = texts(await complete({ temperature: 0, max_tokens: 24 }))[0] as string;
    // A printable character past the start of the greedy text, so that something comes before it.
    const at = [...greedy].findIndex((character, index) => index > 0 && /^[ -~]$/.test(character));
    expect(at, `greedy text ${JSON.stringify(greedy)} has no printable character to stop at`).toBeGreaterThan(0);
    const stop = [...greedy][at] as string;
    for (const form of [stop, ['never-sampled-sequence', stop]]) {
      const stopped = await complete({ temperature: 0, max_tokens: 24, stop: form });
      expect(stopped.choices[0]?.finish_reason).toBe('stop');
      expect(stopped.choices[0]?.message.content).toBe(greedy.slice(0, greedy.indexOf(stop)));
    }
  });

  it('logprobs and top_logprobs: none unless asked; then one entry per token with that many alternatives', async () => {
    const plain = await complete({ max_tokens: 3 });
    expect(plain.choices[0]?.logprobs).toBeNull();
    const logged = await complete({ temperature: 0, max_tokens: 5, logprobs: true, top_logprobs: 4 });
    const tokens = logged.choices[0]?.logprobs?.content ?? [];
    expect(tokens).toHaveLength(5);
    for (const token of tokens) {
      expect(token.top_logprobs).toHaveLength(4);
      // Greedy: the sampled token is the most likely one.
      expect(token.logprob).toBeCloseTo(Math.max(...token.top_logprobs.map((alternative) => alternative.logprob)), 6);
      expect(
        token.top_logprobs.reduce((sum, alternative) => sum + Math.exp(alternative.logprob), 0),
      ).toBeLessThanOrEqual(1 + 1e-6);
    }
    const noAlternatives = await complete({ max_tokens: 2, logprobs: true });
    for (const token of noAlternatives.choices[0]?.logprobs?.content ?? []) expect(token.top_logprobs).toEqual([]);
  });

  it('tools: rendered into the prompt (usage counts them); tool_choice none never yields tool calls', async () => {
    const tools = [
      {
        type: 'function',
        function: {
          name: 'lookup',
          description: 'Looks a word up',
          parameters: { type: 'object', properties: { word: { type: 'string' } } },
        },
      },
    ];
    const without = await complete({ max_tokens: 1 });
    const withTools = await complete({ max_tokens: 1, tools });
    expect(withTools.usage.prompt_tokens).toBeGreaterThan(without.usage.prompt_tokens + 'lookup'.length);
    const none = await complete({ max_tokens: 24, tools, tool_choice: 'none', n: 8, temperature: 2 });
    for (const choice of none.choices) {
      expect(choice.message.tool_calls).toBeUndefined();
      expect(choice.finish_reason).not.toBe('tool_calls');
    }
  });

  it('usage: prompt_tokens grows with the messages', async () => {
    const short = await complete({ max_tokens: 1 });
    const response = await server.call<Completion>('POST', '/v1/chat/completions', {
      body: {
        model: 'policyloop/tiny-chat',
        messages: [{ role: 'system', content: 'You are terse.' }, ...messages],
        max_tokens: 1,
      },
    });
    expect(response.body.usage.prompt_tokens).toBeGreaterThanOrEqual(
      short.usage.prompt_tokens + 'You are terse.'.length,
    );
  });
});
