/**
 * The Vercel AI SDK on its default model, `provider(id)` (the Responses API), with no rewiring:
 * `model.fetch()` translates each step into a chat completion. On the majors the peer range
 * allows and tests (`ai` 6 with `@ai-sdk/openai` 3, and `ai` 7 with `@ai-sdk/openai` 4, installed
 * here as `ai-v7` and `@ai-sdk/openai-v4`), a warm-started `agent-chat` model drives a tool loop
 * over several steps (`generateText` and `streamText`), every step is recorded as a Choice with
 * logprobs in one conversation, and the groups train.
 *
 * `ai` 7 and `@ai-sdk/openai` 4 declare `engines.node >= 22`; what this test uses of them runs on
 * Node 20, which this package supports, so it runs there too.
 */
import { createOpenAI as createOpenAI3 } from '@ai-sdk/openai';
import { createOpenAI as createOpenAI4 } from '@ai-sdk/openai-v4';
import * as ai6 from 'ai';
import * as ai7 from 'ai-v7';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatherTrajectoryGroups } from 'policyloop';
import {
  type CityScenario,
  cityScenarios,
  demonstrationRows,
  expectLookupLoops,
  LOOKUP,
  lookupResult,
  lookupScript,
  question,
  SYSTEM,
  type WarmModel,
  warmModel,
} from './support/warm-tool-agent.js';

/** What the agent needs of an AI SDK major. */
interface Major {
  readonly name: string;
  readonly ai: typeof ai6;
  readonly createOpenAI: typeof createOpenAI3;
}

const majors: Major[] = [
  { name: 'ai 6 and @ai-sdk/openai 3', ai: ai6, createOpenAI: createOpenAI3 },
  // The cast gives both majors the same (v6) types: the calls below exist in both.
  {
    name: 'ai 7 and @ai-sdk/openai 4',
    ai: ai7 as unknown as typeof ai6,
    createOpenAI: createOpenAI4 as unknown as typeof createOpenAI3,
  },
];

/** The city agent on `provider(id)`, the AI SDK's default (Responses) model. */
async function cityAgent(
  major: Major,
  endpoint: { baseURL: string; apiKey: string; fetch: typeof globalThis.fetch; model: string },
  scenario: CityScenario,
  streaming: boolean,
): Promise<void> {
  const { ai } = major;
  const provider = major.createOpenAI({ baseURL: endpoint.baseURL, apiKey: endpoint.apiKey, fetch: endpoint.fetch });
  const lookup = ai.tool({
    description: LOOKUP.description,
    inputSchema: ai.jsonSchema<{ city: string }>(LOOKUP.schema),
    execute: async ({ city }) => lookupResult(city),
  });
  const request = {
    model: provider(endpoint.model),
    system: SYSTEM,
    prompt: question(scenario),
    tools: { lookup },
    stopWhen: ai.stepCountIs(3),
    maxOutputTokens: 24,
    temperature: 0,
  };
  if (streaming) await ai.streamText(request).text;
  else await ai.generateText(request);
}

const scenarios = cityScenarios(2);
let warm: WarmModel;

beforeAll(async () => {
  const rows = [];
  for (const major of majors)
    for (const scenario of scenarios)
      rows.push(
        ...(await demonstrationRows(
          (fetch) =>
            cityAgent(
              major,
              { baseURL: 'http://oracle.invalid/v1', apiKey: 'oracle', fetch, model: 'oracle' },
              scenario,
              false,
            ),
          lookupScript(scenario),
        )),
      );
  warm = await warmModel('ai-sdk-responses', rows);
}, 180_000);
afterAll(async () => {
  await warm?.close();
});

describe.each(majors)('the AI SDK ($name) on provider(id), the Responses API', (major) => {
  for (const streaming of [false, true]) {
    it(`runs a tool loop (${streaming ? 'streamText' : 'generateText'}), recorded step by step, and trains`, async () => {
      const { model, step } = warm;
      const endpoint = {
        baseURL: model.inferenceBaseURL,
        apiKey: model.inferenceApiKey,
        fetch: model.fetch(),
        model: model.inferenceName(step),
      };
      const groups = await gatherTrajectoryGroups(
        scenarios,
        async (scenario, { index }) => {
          await cityAgent(major, endpoint, scenario, streaming);
          return { reward: index };
        },
        { groupSize: 2, concurrency: 4 },
      );
      expectLookupLoops(groups, scenarios);
      const before = await model.getStep();
      expect((await model.train(groups)).step).toBe(before + 1);
    }, 120_000);
  }
});
