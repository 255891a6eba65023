/**
 * The OpenAI Agents SDK (0.14) on chat completions (`OpenAIChatCompletionsModel`) with an `openai`
 * client whose `fetch` records: each rollout is an agent run with a tool, then a follow-up run on
 * the SDK's own history; 8 rollouts at once, non-streaming and streaming, recorded and trained on,
 * with tracing off and no request leaving loopback.
 */
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
const everyHost = new Set<string>();
const cities = CITIES.slice(0, 4);
const realFetch = globalThis.fetch;

beforeAll(async () => {
  setTracingDisabled(true);
  // Every request of the process, the SDK's own (tracing export) included, is seen here.
  globalThis.fetch = (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    everyHost.add(new URL(url).hostname);
    return realFetch(input, init);
  };
});
afterAll(async () => {
  globalThis.fetch = realFetch;
});

const weather = tool({
  name: 'weather',
  description: 'Weather of a city',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => weatherOf(city),
});

function agent(): Agent {
  const { model } = setup.current;
  const client = new OpenAI({
    baseURL: model.inferenceBaseURL,
    apiKey: model.inferenceApiKey,
    fetch: captureFetch({ fetch: countingFetch(hosts), defaults: { logprobs: true } }),
  });
  return new Agent({
    name: 'weather',
    instructions: SYSTEM,
    model: new OpenAIChatCompletionsModel(client, model.inferenceName()),
    modelSettings: { maxTokens: MAX_TOKENS },
    tools: [weather],
  });
}

describe('OpenAI Agents SDK through captureFetch', () => {
  for (const stream of [false, true]) {
    // Streamed runs once recorded, now and then, a rollout's first call as a sub-agent history: a
    // fresh model's empty first turn, which the SDK leaves out of the next request. The recorder
    // continues the conversation over it (unit-tested in capture.unit.test.ts); 11 runs in a row
    // of this file passed without a retry.
    const options = { timeout: 300_000 };
    it(
      `records every call of ${stream ? 'streamed' : 'plain'} agent runs, 8 at once, and trains on them`,
      options,
      async () => {
        const weatherAgent = agent();
        const groups = await gatherTrajectoryGroups(
          cities.map((city) => ({ city })),
          async ({ city }) => {
            let history;
            if (stream) {
              const first = await run(weatherAgent, question(city), { stream: true, maxTurns: 3 });
              for await (const _event of first) {
                // read the stream as an app does
              }
              await first.completed;
              const second = await run(weatherAgent, [...first.history, { role: 'user', content: FOLLOW_UP }], {
                stream: true,
                maxTurns: 3,
              });
              await second.completed;
              history = second.history;
            } else {
              const first = await run(weatherAgent, question(city), { maxTurns: 3 });
              const second = await run(weatherAgent, [...first.history, { role: 'user', content: FOLLOW_UP }], {
                maxTurns: 3,
              });
              history = second.history;
            }
            expect(history.length).toBeGreaterThanOrEqual(4);
          },
          { groupSize: 2, concurrency: 8, reward: meanLogprob },
        );
        expectRecorded(groups, cities, stream);
        const { step } = await setup.current.model.train(groups);
        expect(step).toBeGreaterThan(0);
        expect([...hosts]).toEqual(['127.0.0.1']);
        expect([...everyHost]).toEqual(['127.0.0.1']);
      },
    );
  }
});
