/**
 * The OpenAI Agents SDK on its default model, with no rewiring: an agent names its model by a
 * string, and `setDefaultOpenAIClient(model.openai())` makes the SDK's default
 * `OpenAIResponsesModel` call the Responses API on a client that translates each call into a
 * chat completion and records it. On the majors tested (`@openai/agents` 0.14, and 0.20 installed
 * here as `@openai/agents-v0.20`), a warm-started `agent-chat` model drives a tool agent and a
 * handoff, streamed and not; every model call is recorded as a Choice with logprobs, and the
 * groups train. Tracing is off and no request leaves loopback.
 *
 * `@openai/agents` 0.20 depends on `openai` 7 (which declares `engines.node >= 22`); what this test
 * uses of them runs on Node 20, which this package supports, so it runs there too. Its
 * `OpenAIResponsesModel` treats a response cut by `max_output_tokens` (status `incomplete`) as an
 * error, as it does against OpenAI; the warm-started model ends its turns well within the limit.
 */
import * as agents14 from '@openai/agents';
import * as agents20 from '@openai/agents-v0.20';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { gatherTrajectoryGroups, isChoice, type TrajectoryGroup } from 'policyloop';
import type { Choice } from 'policyloop/schema';
import OpenAI from 'openai';
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

/** What the agents need of an Agents SDK major. */
interface Major {
  readonly name: string;
  readonly sdk: typeof agents14;
}

const majors: Major[] = [
  { name: '0.14', sdk: agents14 },
  // The cast gives both majors the same (0.14) types: the calls below exist in both.
  { name: '0.20', sdk: agents20 as unknown as typeof agents14 },
];

const TRIAGE = 'Hand every question to the lookup agent.';

/** The city agent (a `lookup` tool) and a triage agent that hands off to it, both named by a model string. */
function makeAgents(major: Major, model: string) {
  const { Agent, tool } = major.sdk;
  const lookup = tool({
    name: LOOKUP.name,
    description: LOOKUP.description,
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => lookupResult(city),
  });
  const modelSettings = { maxTokens: 24, temperature: 0 };
  const cityAgent = new Agent({ name: 'lookup_agent', instructions: SYSTEM, model, modelSettings, tools: [lookup] });
  const triage = Agent.create({
    name: 'triage_agent',
    instructions: TRIAGE,
    model,
    modelSettings,
    handoffs: [cityAgent],
  });
  return { cityAgent, triage };
}

/** Runs `agent` on the scenario's question with `runner` (the SDK's default `run` when none), streamed or not. */
async function runAgent(
  major: Major,
  agent: agents14.Agent,
  scenario: CityScenario,
  stream: boolean,
  runner?: agents14.Runner,
): Promise<void> {
  const run = runner === undefined ? major.sdk.run : runner.run.bind(runner);
  if (stream) {
    const result = await run(agent, question(scenario), { stream: true, maxTurns: 4 });
    for await (const _event of result) {
      // read the stream as an app does
    }
    await result.completed;
  } else {
    await run(agent, question(scenario), { maxTurns: 4 });
  }
}

/** A runner whose models are made on `client` (the default runner keeps the first client it used). */
function runnerOn(major: Major, client: OpenAI): agents14.Runner {
  const provider = new major.sdk.OpenAIProvider({ openAIClient: client as never });
  return new major.sdk.Runner({ modelProvider: provider, tracingDisabled: true });
}

/** The oracle's answers to a handoff run: the transfer, then the city agent's call and answer. */
function handoffScript(scenario: CityScenario) {
  const transfer = {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'transfer_to_lookup_agent', arguments: '{}' } }],
  };
  return [transfer, ...lookupScript(scenario)];
}

const scenarios = cityScenarios(2);
let warm: WarmModel;
const hosts = new Set<string>();
const realFetch = globalThis.fetch;

beforeAll(async () => {
  const rows = [];
  for (const major of majors) {
    major.sdk.setTracingDisabled(true);
    for (const scenario of scenarios) {
      for (const [which, script] of [
        ['cityAgent', lookupScript(scenario)],
        ['triage', handoffScript(scenario)],
      ] as const) {
        rows.push(
          ...(await demonstrationRows(async (fetch) => {
            const oracle = new OpenAI({ baseURL: 'http://oracle.invalid/v1', apiKey: 'oracle', fetch, maxRetries: 0 });
            await runAgent(major, makeAgents(major, 'oracle')[which], scenario, false, runnerOn(major, oracle));
          }, script)),
        );
      }
    }
  }
  warm = await warmModel('agents-responses', rows, 60);
  // What a user writes once, before the first run: the SDK's default runner keeps this client.
  for (const major of majors) major.sdk.setDefaultOpenAIClient(warm.model.openai() as never);
  // Every request of the process from here on, the SDKs' own (tracing export) included, is seen here.
  globalThis.fetch = (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    hosts.add(new URL(url).hostname);
    return realFetch(input, init);
  };
}, 240_000);
afterAll(async () => {
  globalThis.fetch = realFetch;
  await warm?.close();
});

/** Each group's trajectories hold the triage agent's handoff, then the city agent's loop in its own history. */
function expectHandoffs(groups: readonly TrajectoryGroup[]): void {
  for (const [groupIndex, group] of groups.entries()) {
    expect(group.exceptions ?? []).toEqual([]);
    for (const trajectory of group.trajectories) {
      const main = trajectory.messages_and_choices.filter(isChoice) as Choice[];
      expect(main).toHaveLength(1);
      expect(main[0]?.message.tool_calls?.[0]).toMatchObject({ function: { name: 'transfer_to_lookup_agent' } });
      expect(trajectory.additional_histories).toHaveLength(1);
      const specialist = trajectory.additional_histories[0]?.messages_and_choices ?? [];
      const choices = specialist.filter(isChoice) as Choice[];
      expect(choices.length).toBeGreaterThanOrEqual(2);
      expect(choices[0]?.message.tool_calls?.[0]).toMatchObject({
        function: { name: 'lookup', arguments: JSON.stringify({ city: scenarios[groupIndex]?.city }) },
      });
      for (const choice of [...main, ...choices]) expect(choice.logprobs?.content?.length ?? 0).toBeGreaterThan(0);
    }
  }
}

describe.each(majors)('the OpenAI Agents SDK $name on its default (Responses) model', (major) => {
  for (const stream of [false, true]) {
    const how = stream ? 'streamed' : 'plain';
    it(`runs a tool agent (${how}), every model call recorded, and trains`, async () => {
      const { model, step } = warm;
      const { cityAgent } = makeAgents(major, model.inferenceName(step));
      const groups = await gatherTrajectoryGroups(
        scenarios,
        async (scenario, { index }) => {
          await runAgent(major, cityAgent, scenario, stream);
          return { reward: index };
        },
        { groupSize: 2, concurrency: 4 },
      );
      expectLookupLoops(groups, scenarios);
      const before = await model.getStep();
      expect((await model.train(groups)).step).toBe(before + 1);
      expect([...hosts]).toEqual(['127.0.0.1']);
    }, 120_000);

    it(`runs a handoff (${how}), the specialist's turns in their own history, and trains`, async () => {
      const { model, step } = warm;
      // The same agents on a runner over a plain `openai` client whose fetch records: the other way in.
      const client = new OpenAI({
        baseURL: model.inferenceBaseURL,
        apiKey: model.inferenceApiKey,
        fetch: model.fetch(),
      });
      const runner = runnerOn(major, client);
      const { triage } = makeAgents(major, model.inferenceName(step));
      const groups = await gatherTrajectoryGroups(
        scenarios,
        async (scenario, { index }) => {
          await runAgent(major, triage, scenario, stream, runner);
          return { reward: index };
        },
        { groupSize: 2, concurrency: 4 },
      );
      expectHandoffs(groups);
      const before = await model.getStep();
      expect((await model.train(groups)).step).toBe(before + 1);
      expect([...hosts]).toEqual(['127.0.0.1']);
    }, 120_000);
  }
});
