/**
 * An agent on `@anthropic-ai/sdk` (Anthropic's Messages API), with no rewiring: the client gets
 * `model.anthropicBaseURL` and `model.fetch()`, which translates each `messages.create` into a
 * chat completion and records it. A warm-started `agent-chat` model drives a tool loop over several
 * turns (`tool_use`, then the `tool_result`, then the answer), streamed (`messages.stream`) and
 * not; every turn is recorded as a Choice with logprobs in one conversation, and the groups train.
 */
import Anthropic from '@anthropic-ai/sdk';
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

const lookupTool: Anthropic.Tool = {
  name: LOOKUP.name,
  description: LOOKUP.description,
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

/** The agent: up to 3 turns, running `lookup` for each `tool_use` and sending its `tool_result` back. */
async function cityAgent(client: Anthropic, model: string, scenario: CityScenario, stream: boolean): Promise<string> {
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: question(scenario) }];
  for (let turn = 0; turn < 3; turn += 1) {
    const params = { model, system: SYSTEM, max_tokens: 24, tools: [lookupTool], messages };
    const message = stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
    messages.push({ role: 'assistant', content: message.content });
    const uses = message.content.filter((block): block is Anthropic.ToolUseBlock => block.type === 'tool_use');
    if (message.stop_reason !== 'tool_use' || uses.length === 0)
      return message.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
    messages.push({
      role: 'user',
      content: uses.map((use) => ({
        type: 'tool_result' as const,
        tool_use_id: use.id,
        content: lookupResult(String((use.input as { city?: unknown }).city)),
      })),
    });
  }
  return '';
}

const scenarios = cityScenarios(2);
let warm: WarmModel;

beforeAll(async () => {
  const rows = [];
  for (const scenario of scenarios)
    rows.push(
      ...(await demonstrationRows(
        (fetch) =>
          cityAgent(
            new Anthropic({ baseURL: 'http://oracle.invalid', apiKey: 'oracle', fetch }),
            'oracle',
            scenario,
            false,
          ),
        lookupScript(scenario),
      )),
    );
  warm = await warmModel('anthropic-messages', rows);
}, 180_000);
afterAll(async () => {
  await warm?.close();
});

describe('@anthropic-ai/sdk through model.anthropicBaseURL and model.fetch()', () => {
  for (const stream of [false, true]) {
    it(`runs a tool loop with messages.${stream ? 'stream' : 'create'}, every turn recorded, and trains`, async () => {
      const { model, step } = warm;
      // Greedy (the same tokens every run): a default of the recording fetch, as any chat parameter.
      const client = new Anthropic({
        baseURL: model.anthropicBaseURL,
        apiKey: model.inferenceApiKey,
        fetch: model.fetch({ defaults: { temperature: 0 } }),
      });
      const answers: string[] = [];
      const groups = await gatherTrajectoryGroups(
        scenarios,
        async (scenario, { index }) => {
          answers.push(await cityAgent(client, model.inferenceName(step), scenario, stream));
          return { reward: index };
        },
        { groupSize: 2, concurrency: 4 },
      );
      expectLookupLoops(groups, scenarios);
      expect(answers).toHaveLength(4);
      const before = await model.getStep();
      expect((await model.train(groups)).step).toBe(before + 1);
    }, 120_000);
  }
});
