import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EngineInputError, VOCABULARY_SIZE, createEngine, recoverTokenId } from '../../src/engine/index.js';
import type { Engine, PolicyRef } from '../../src/engine/index.js';
import type { ChatCompletionRequestBody } from 'policyloop/schema';

const base: PolicyRef = { baseModel: 'policyloop/tiny-chat', checkpointPath: null, key: 'policyloop/tiny-chat' };
const ask = (content: string, extra: Partial<ChatCompletionRequestBody> = {}): ChatCompletionRequestBody =>
  ({ model: base.baseModel, messages: [{ role: 'user', content }], ...extra }) as ChatCompletionRequestBody;

let engine: Engine;
let directory: string;
beforeAll(async () => {
  engine = await createEngine({ workers: false });
  directory = await mkdtemp(path.join(os.tmpdir(), 'engine-sampling-'));
});
afterAll(async () => {
  await engine.close();
  await rm(directory, { recursive: true, force: true });
});

describe('sampling', () => {
  it('lists its base models', () => {
    expect(engine.baseModels()).toContain('policyloop/tiny-chat');
  });

  it('gives the same output for the same seed, and different outputs for different seeds', async () => {
    const request = ask('hello', { seed: 42, max_tokens: 12, n: 2, logprobs: true });
    const [first, second, other] = await Promise.all([
      engine.chatCompletion(base, request),
      engine.chatCompletion(base, request),
      engine.chatCompletion(base, { ...request, seed: 43 }),
    ]);
    expect(second.choices).toEqual(first.choices);
    expect(other.choices.map((choice) => choice.message.content)).not.toEqual(
      first.choices.map((choice) => choice.message.content),
    );
    // The n choices of one request are different samples.
    expect(first.choices[0]?.message.content).not.toBe(first.choices[1]?.message.content);
    expect(first.choices.map((choice) => choice.index)).toEqual([0, 1]);
  });

  it("reports the model's logprobs with top alternatives and bytes", async () => {
    const result = await engine.chatCompletion(
      base,
      ask('abc', { seed: 1, max_tokens: 6, logprobs: true, top_logprobs: 5 }),
    );
    const entries = result.choices[0]?.logprobs?.content ?? [];
    expect(entries.length).toBe(result.usage.completion_tokens);
    for (const entry of entries) {
      expect(entry.top_logprobs).toHaveLength(5);
      const probabilities = entry.top_logprobs.map((alternative) => Math.exp(alternative.logprob));
      expect(probabilities.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1 + 1e-9);
      expect([...probabilities].sort((a, b) => b - a)).toEqual(probabilities);
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(recoverTokenId(entry)).not.toBeNull();
      const listed = entry.top_logprobs.find((alternative) => alternative.token === entry.token);
      if (listed) expect(listed.logprob).toBeCloseTo(entry.logprob, 10);
      else expect(entry.logprob).toBeLessThanOrEqual(entry.top_logprobs[4]?.logprob ?? 0);
    }
    // The alternatives at the first position are a property of the prompt, not of the seed.
    const again = await engine.chatCompletion(
      base,
      ask('abc', { seed: 2, max_tokens: 1, logprobs: true, top_logprobs: 5 }),
    );
    expect(again.choices[0]?.logprobs?.content?.[0]?.top_logprobs).toEqual(entries[0]?.top_logprobs);
  });

  it('samples greedily at temperature 0; the temperature changes which tokens are drawn, not their logprobs', async () => {
    const greedy = await engine.chatCompletion(
      base,
      ask('abc', { temperature: 0, max_tokens: 5, logprobs: true, top_logprobs: 1 }),
    );
    for (const entry of greedy.choices[0]?.logprobs?.content ?? [])
      expect(entry.token).toBe(entry.top_logprobs[0]?.token);
    // The reported logprobs are the model's own (temperature 1) at every temperature, as vLLM's
    // default raw_logprobs: the same prompt gives the same first-position alternatives.
    const first = (temperature: number) =>
      engine.chatCompletion(
        base,
        ask('abc', { temperature, max_tokens: 1, n: 64, seed: 5, logprobs: true, top_logprobs: 3 }),
      );
    const [cold, hot] = await Promise.all([first(0.25), first(4)]);
    const alternatives = greedy.choices[0]?.logprobs?.content?.[0]?.top_logprobs;
    for (const result of [cold, hot])
      for (const choice of result.choices) {
        const entry = choice.logprobs?.content?.[0];
        const listed = alternatives?.find((alternative) => alternative.token === entry?.token);
        if (listed) expect(entry?.logprob).toBeCloseTo(listed.logprob, 6);
      }
    // A low temperature draws the most likely token more often than a high one.
    const top = alternatives?.[0]?.token;
    const share = (result: typeof cold): number =>
      result.choices.filter((choice) => choice.logprobs?.content?.[0]?.token === top).length / 64;
    expect(share(cold)).toBeGreaterThan(share(hot));
  });

  it('reports logprobs of a full distribution: over the whole vocabulary they sum to 1, at any temperature', async () => {
    for (const temperature of [1, 0.7, 2]) {
      const result = await engine.chatCompletion(
        base,
        ask('abc', { seed: 4, temperature, max_tokens: 3, logprobs: true, top_logprobs: VOCABULARY_SIZE }),
      );
      for (const entry of result.choices[0]?.logprobs?.content ?? []) {
        expect(entry.top_logprobs).toHaveLength(VOCABULARY_SIZE);
        expect(new Set(entry.top_logprobs.map((alternative) => recoverTokenId(alternative))).size).toBe(
          VOCABULARY_SIZE,
        );
        expect(entry.top_logprobs.reduce((sum, alternative) => sum + Math.exp(alternative.logprob), 0)).toBeCloseTo(
          1,
          5,
        );
        // The sampled token's logprob is its entry in that distribution.
        expect(entry.top_logprobs.find((alternative) => alternative.token === entry.token)?.logprob).toBeCloseTo(
          entry.logprob,
          10,
        );
      }
    }
  });

  it('samples only from the nucleus with top_p: a tiny top_p is greedy', async () => {
    const greedy = await engine.chatCompletion(base, ask('nucleus', { temperature: 0, max_tokens: 10 }));
    const nucleus = await Promise.all(
      [1, 2, 3].map((seed) =>
        engine.chatCompletion(base, ask('nucleus', { temperature: 1, top_p: 1e-6, max_tokens: 10, seed })),
      ),
    );
    for (const result of nucleus) expect(result.choices[0]?.message.content).toBe(greedy.choices[0]?.message.content);
    // With top_p 1 the same seeds sample other tokens.
    const full = await Promise.all(
      [1, 2, 3].map((seed) =>
        engine.chatCompletion(base, ask('nucleus', { temperature: 1, top_p: 1, max_tokens: 10, seed })),
      ),
    );
    expect(full.some((result) => result.choices[0]?.message.content !== greedy.choices[0]?.message.content)).toBe(true);
    // top_p 0.5 keeps the most likely tokens up to half the mass: every sampled token is among them.
    const half = await engine.chatCompletion(
      base,
      ask('nucleus', {
        temperature: 1,
        top_p: 0.5,
        max_tokens: 10,
        seed: 8,
        n: 4,
        logprobs: true,
        top_logprobs: VOCABULARY_SIZE,
      }),
    );
    for (const choice of half.choices) {
      for (const entry of choice.logprobs?.content ?? []) {
        const rank = entry.top_logprobs.findIndex((alternative) => alternative.token === entry.token);
        const massBefore = entry.top_logprobs
          .slice(0, rank)
          .reduce((sum, alternative) => sum + Math.exp(alternative.logprob), 0);
        expect(massBefore).toBeLessThan(0.5);
      }
    }
  });

  it('writes token strings as token_id:<id> when asked', async () => {
    const result = await engine.chatCompletion(
      base,
      ask('x', { max_tokens: 4, logprobs: true, top_logprobs: 2, return_tokens_as_token_ids: true }),
    );
    for (const entry of result.choices[0]?.logprobs?.content ?? []) {
      expect(entry.token).toMatch(/^token_id:\d+$/);
      expect(entry.top_logprobs.every((alternative) => /^token_id:\d+$/.test(alternative.token))).toBe(true);
    }
  });

  it('honours max_tokens and max_completion_tokens', async () => {
    const result = await engine.chatCompletion(base, ask('x', { max_tokens: 3, n: 4, seed: 5, logprobs: true }));
    for (const choice of result.choices) {
      // A choice that did not end its turn used the whole budget.
      if (choice.finish_reason === 'length') expect(choice.logprobs?.content).toHaveLength(3);
      else expect(choice.logprobs?.content?.at(-1)?.token).toBe('<|end|>');
    }
    expect(result.choices.some((choice) => choice.finish_reason === 'length')).toBe(true);
    expect(result.usage.completion_tokens).toBeLessThanOrEqual(12);
    expect(result.usage.total_tokens).toBe(result.usage.prompt_tokens + result.usage.completion_tokens);
    const newer = await engine.chatCompletion(base, ask('x', { max_completion_tokens: 2, max_tokens: 50, seed: 5 }));
    expect(newer.usage.completion_tokens).toBeLessThanOrEqual(2);
  });

  it('refuses a prompt longer than the context with an input error', async () => {
    await expect(engine.chatCompletion(base, ask('y'.repeat(400)))).rejects.toBeInstanceOf(EngineInputError);
    await expect(engine.chatCompletion({ ...base, baseModel: 'nope' }, ask('y'))).rejects.toBeInstanceOf(
      EngineInputError,
    );
  });

  it('answers 64 concurrent requests with the same outputs as one at a time', async () => {
    const requests = Array.from({ length: 64 }, (_, index) =>
      ask(`word ${index}`, { seed: index, max_tokens: 8, logprobs: true }),
    );
    const together = await Promise.all(requests.map((request) => engine.chatCompletion(base, request)));
    const alone = [];
    for (const request of requests.slice(0, 4)) alone.push(await engine.chatCompletion(base, request));
    expect(together.slice(0, 4).map((result) => result.choices[0]?.message.content)).toEqual(
      alone.map((result) => result.choices[0]?.message.content),
    );
    const logprobsTogether = together[0]?.choices[0]?.logprobs?.content?.map((entry) => entry.logprob) ?? [];
    const logprobsAlone = alone[0]?.choices[0]?.logprobs?.content?.map((entry) => entry.logprob) ?? [];
    logprobsTogether.forEach((value, index) => expect(value).toBeCloseTo(logprobsAlone[index] ?? 0, 4));
  });

  it('rejects an aborted request', async () => {
    const controller = new AbortController();
    const pending = engine.chatCompletion(base, ask('x', { max_tokens: 50 }), { signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toThrow(/aborted/);
  });
});
