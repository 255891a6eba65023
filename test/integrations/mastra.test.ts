/**
 * Mastra (0.24) with an AI SDK v5 model (`@ai-sdk/openai@2`, installed here as `@ai-sdk/openai-v2`)
 * whose `fetch` records: each rollout is an agent turn with a tool, then a follow-up turn; 8
 * rollouts at once, non-streaming and streaming, on `provider.chat(id)` and on `provider(id)` (the
 * Responses API, translated by the fetch), recorded and trained on.
 */
import { createOpenAI } from '@ai-sdk/openai-v2';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { captureFetch, gatherTrajectoryGroups } from 'policyloop';
import {
  CITIES,
  countingFetch,
  expectRecorded,
  FOLLOW_UP,
  MAX_TOKENS,
  meanLogprob,
  question,
  SYSTEM,
  useToolModel,
  weatherOf,
} from './tool-model.js';

const setup = useToolModel();
const hosts = new Set<string>();
const cities = CITIES.slice(0, 4);

const weather = createTool({
  id: 'weather',
  description: 'Weather of a city',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ context }) => weatherOf(context.city),
});

/** The agent on `provider.chat(id)` (chat completions) or `provider(id)` (the provider's default, the Responses API). */
function agent(responses: boolean): Agent {
  const { model } = setup.current;
  const provider = createOpenAI({
    baseURL: model.inferenceBaseURL,
    apiKey: model.inferenceApiKey,
    fetch: captureFetch({ fetch: countingFetch(hosts), defaults: { logprobs: true } }),
  });
  // `provider(id)` calls the Responses API, which the fetch translates; `provider.chat(id)` chat completions.
  return new Agent({
    name: 'weather',
    instructions: SYSTEM,
    model: responses ? provider(model.inferenceName()) : provider.chat(model.inferenceName()),
    tools: { weather },
  });
}

describe('Mastra through captureFetch', () => {
  for (const [streaming, responses] of [
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ] as const) {
    const how = `${streaming ? 'streamed' : 'plain'} agent turns${responses ? ' on provider(id), the Responses API' : ''}`;
    it(`records every call of ${how}, 8 at once, and trains on them`, async () => {
      const weatherAgent = agent(responses);
      // Mastra sends `temperature: 0` unless told: RL samples at temperature 1.
      const options = { maxSteps: 3, modelSettings: { maxOutputTokens: MAX_TOKENS, temperature: 1 } };
      const turn = async (messages: Parameters<Agent['generate']>[0]): Promise<string> => {
        if (!streaming) return (await weatherAgent.generate(messages, options)).text;
        const output = await weatherAgent.stream(messages, options);
        return output.text;
      };
      const groups = await gatherTrajectoryGroups(
        cities.map((city) => ({ city })),
        async ({ city }) => {
          const answer = await turn([{ role: 'user', content: question(city) }]);
          await turn([
            { role: 'user', content: question(city) },
            { role: 'assistant', content: answer },
            { role: 'user', content: FOLLOW_UP },
          ]);
        },
        { groupSize: 2, concurrency: 8, reward: meanLogprob },
      );
      expectRecorded(groups, cities, streaming);
      const { step } = await setup.current.model.train(groups);
      expect(step).toBeGreaterThan(0);
      expect([...hosts]).toEqual(['127.0.0.1']);
    }, 300_000);
  }
});
