/**
 * A prompted baseline through the same recording paths as the trained model: its `fetch()` (as an
 * agent framework calls it) and its `openai()` client record completions from its endpoint, here
 * the local service's base model, into the rollout that made them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PromptedModel, recordTrajectory } from 'policyloop';
import { isChoice } from 'policyloop/schema';
import { startTestService, type TestService } from 'policyloop/testing';

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(async () => {
  await service?.close();
});

describe('PromptedModel', () => {
  it('fetch() fills model and logprobs and records the Choice, as a framework provider would call it', async () => {
    const baseline = new PromptedModel({
      project: 'baselines',
      name: 'base',
      model: service.baseModel,
      baseURL: service.baseURL,
      apiKey: service.apiKey,
    });
    expect(baseline.inferenceBaseURL).toBe(service.baseURL);
    const recordingFetch = baseline.fetch();
    const { result, trajectory } = await recordTrajectory(async () => {
      // What a provider sends: its own body, without logprobs, with the endpoint from the handle.
      const response = await recordingFetch(`${baseline.inferenceBaseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${baseline.inferenceApiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 3 }),
      });
      return (await response.json()) as { model: string; choices: { logprobs: { content: unknown[] } | null }[] };
    });
    expect(result.model).toBe(service.baseModel);
    expect(result.choices[0]?.logprobs?.content.length).toBeGreaterThan(0);
    const choices = (trajectory.messages_and_choices ?? []).filter(isChoice);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
  });
});
