/**
 * The Vercel AI SDK (v6) through a recording fetch: each rollout is an agent turn with a tool
 * offered (`generateText` / `streamText` with `stopWhen`), then a follow-up turn that sends the
 * SDK's own response messages back; 8 rollouts at once, recorded and trained on, against the real
 * local service.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, type LanguageModel, type ModelMessage, stepCountIs, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { captureFetch, gatherTrajectoryGroups, recordTrajectory } from 'policyloop';
import {
  CITIES,
  choicesIn,
  countingFetch,
  expectRecorded,
  FOLLOW_UP,
  MAX_TOKENS,
  question,
  SYSTEM,
  meanLogprob,
  useToolModel,
  weatherOf,
} from './tool-model.js';

const setup = useToolModel();
const hosts = new Set<string>();
const cities = CITIES.slice(0, 4);

const tools = {
  weather: tool({
    description: 'Weather of a city',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => weatherOf(city),
  }),
};

function chatModel(): LanguageModel {
  const { model } = setup.current;
  // `provider.chat(id)`: chat completions (`provider(id)` would call the Responses API).
  const provider = createOpenAI({
    baseURL: model.inferenceBaseURL,
    apiKey: model.inferenceApiKey,
    fetch: captureFetch({ fetch: countingFetch(hosts), defaults: { logprobs: true, model: model.inferenceName() } }),
  });
  return provider.chat(model.inferenceName());
}

/** One agent turn with the tool (a loop of up to 3 steps), returning the SDK's response messages. */
async function turn(llm: LanguageModel, messages: ModelMessage[], streaming: boolean): Promise<ModelMessage[]> {
  const request = {
    model: llm,
    system: SYSTEM,
    messages,
    tools,
    stopWhen: stepCountIs(3),
    maxOutputTokens: MAX_TOKENS,
  };
  if (!streaming) return (await generateText(request)).response.messages;
  const result = streamText(request);
  return (await result.response).messages;
}

describe('Vercel AI SDK through captureFetch', () => {
  for (const streaming of [false, true]) {
    it(`records every call of ${streaming ? 'streamText' : 'generateText'} agents, 8 at once, and trains on them`, async () => {
      const llm = chatModel();
      const groups = await gatherTrajectoryGroups(
        cities.map((city) => ({ city })),
        async ({ city }) => {
          const history: ModelMessage[] = [{ role: 'user', content: question(city) }];
          history.push(...(await turn(llm, history, streaming)));
          history.push({ role: 'user', content: FOLLOW_UP });
          await turn(llm, history, streaming);
        },
        { groupSize: 2, concurrency: 8, reward: meanLogprob },
      );
      expectRecorded(groups, cities, streaming);
      const { step } = await setup.current.model.train(groups);
      expect(step).toBeGreaterThan(0);
      expect([...hosts]).toEqual(['127.0.0.1']);
    }, 300_000);
  }

  it('restores the logprobs the SDK drops for ids that look like reasoning models; model.fetch() fills the model', async () => {
    const { model } = setup.current;
    const sent: Record<string, unknown>[] = [];
    const spy: typeof fetch = async (input, init) => {
      sent.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
      return fetch(input, init);
    };
    // The SDK leaves `logprobs` out for an `o1`-like id (the defaults put it back, and `model`
    // replaces the id); the openai-compatible provider with model.fetch() gets both filled in.
    const openai = createOpenAI({
      baseURL: model.inferenceBaseURL,
      apiKey: model.inferenceApiKey,
      fetch: captureFetch({ fetch: spy, defaults: { logprobs: true } }),
    });
    const compatible = createOpenAICompatible({
      name: 'policyloop',
      baseURL: model.inferenceBaseURL,
      apiKey: model.inferenceApiKey,
      fetch: model.fetch(),
    });
    const { trajectory } = await recordTrajectory(async () => {
      await generateText({
        model: openai.chat('o1-mini'),
        prompt: question('Oslo'),
        maxOutputTokens: MAX_TOKENS,
        providerOptions: { openai: { logprobs: true } },
      }).catch(() => undefined); // the service knows no `o1-mini`: a 404, recorded as nothing
      await generateText({ model: compatible.chatModel(''), prompt: question('Lima'), maxOutputTokens: MAX_TOKENS });
    });
    expect(sent[0]).toMatchObject({ model: 'o1-mini', logprobs: true });
    const choices = choicesIn(trajectory);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
    expect(JSON.stringify(trajectory.messages_and_choices)).toContain(question('Lima'));
  }, 120_000);
});
