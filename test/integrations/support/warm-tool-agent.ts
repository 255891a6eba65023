/**
 * What the tests of agents on their frameworks' defaults share: the city-codes task (one `lookup`
 * tool; "Code of Oslo?"), SFT demonstrations made by running the framework's own agent against an
 * oracle chat endpoint behind a recording `fetch` (so the rows hold exactly the chat completions
 * that agent's Responses or Messages calls become), a `policyloop/agent-chat` model warm-started on
 * them on the real local service, and the checks of a recorded tool loop.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { captureFetch, isChoice, LocalBackend, type SFTRow, TrainableModel, type TrajectoryGroup } from 'policyloop';
import type { Choice } from 'policyloop/schema';
import { CITY_CODES, type CityScenario, cityScenarios, lookupResult } from '../../../examples/tasks/city-codes.js';

export { CITY_CODES, type CityScenario, cityScenarios, lookupResult };

/** The system prompt (instructions) of every framework's city agent. */
export const SYSTEM = 'Look the city up with the tool, then answer with its code.';
/** The question of a scenario. */
export const question = (scenario: CityScenario): string => `Code of ${scenario.city}?`;
/** The tool's description and JSON schema. */
export const LOOKUP: {
  readonly name: 'lookup';
  readonly description: string;
  readonly schema: {
    type: 'object';
    properties: { city: { type: 'string' } };
    required: string[];
    additionalProperties: false;
  };
} = {
  name: 'lookup',
  description: 'The code of a city',
  schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
};

/** An assistant message the oracle answers with. */
type OracleAnswer = Record<string, unknown>;

/** The oracle's answer to the `turn`-th call of `scenario`'s run: a `lookup` call, then the code. */
export function lookupScript(scenario: CityScenario): OracleAnswer[] {
  return [
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: 'call_1',
          type: 'function',
          function: { name: 'lookup', arguments: JSON.stringify({ city: scenario.city }) },
        },
      ],
    },
    { role: 'assistant', content: scenario.code },
  ];
}

/**
 * SFT rows of one scenario: `agent` runs with a recording `fetch` over an oracle chat endpoint
 * that answers its calls with `script` in turn; each call's chat messages plus the oracle's
 * answer is a row (trained on its last assistant turn).
 */
export async function demonstrationRows(
  agent: (fetch: typeof globalThis.fetch) => Promise<unknown>,
  script: readonly OracleAnswer[],
): Promise<SFTRow[]> {
  const rows: SFTRow[] = [];
  const oracle: typeof globalThis.fetch = async (_input, init) => {
    const request = JSON.parse(String(init?.body)) as { messages: unknown[]; tools?: unknown[]; stream?: boolean };
    const answer = script[rows.length] ?? { role: 'assistant', content: 'done' };
    rows.push({
      messages: [...request.messages, answer],
      ...(request.tools ? { tools: request.tools } : {}),
    } as SFTRow);
    const toolCalls = Array.isArray(answer['tool_calls']);
    const choice = { index: 0, message: answer, finish_reason: toolCalls ? 'tool_calls' : 'stop', logprobs: null };
    if (request.stream !== true)
      return Response.json({ id: 'oracle', object: 'chat.completion', created: 0, model: 'oracle', choices: [choice] });
    const chunk = (delta: unknown, finish: string | null) =>
      `data: ${JSON.stringify({ id: 'oracle', object: 'chat.completion.chunk', created: 0, model: 'oracle', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const calls = (answer['tool_calls'] as unknown[] | undefined)?.map((call, index) => ({
      index,
      ...(call as object),
    }));
    const text =
      chunk({ role: 'assistant', content: answer['content'] ?? '' }, null) +
      (calls ? chunk({ tool_calls: calls }, null) : '') +
      chunk({}, choice.finish_reason) +
      'data: [DONE]\n\n';
    return new Response(text, { headers: { 'content-type': 'text/event-stream' } });
  };
  await agent(captureFetch({ fetch: oracle, defaults: { model: 'oracle' } }));
  if (rows.length < script.length)
    throw new Error(`Expected the oracle agent to make ${script.length} calls, got ${rows.length}`);
  return rows;
}

/** A backend with a model warm-started on demonstrations, and how to close them. */
export interface WarmModel {
  readonly backend: LocalBackend;
  readonly model: TrainableModel;
  /** The warm-started step (pin it: later RL steps move the latest). */
  readonly step: number;
  close(): Promise<void>;
}

/**
 * Starts the local service and warm-starts a fresh `agent-chat` model named `name` on `rows`
 * (`passes` passes, one optimizer step each; rows that are the same twice count once).
 */
export async function warmModel(name: string, given: readonly SFTRow[], passes = 40): Promise<WarmModel> {
  const rows = [...new Map(given.map((row) => [JSON.stringify(row), row])).values()];
  const dataDir = await mkdtemp(path.join(tmpdir(), `policyloop-${name}-`));
  const backend = await LocalBackend.start({ dataDir });
  const model = new TrainableModel({ project: 'integrations', name, baseModel: 'policyloop/agent-chat' });
  await model.register(backend);
  const { step } = await model.trainSFT(Array.from({ length: passes }, () => rows).flat(), {
    batchSize: rows.length,
    learningRate: 1e-2,
    assistantTurns: 'last',
  });
  return {
    backend,
    model,
    step,
    async close() {
      await model.close();
      await backend.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The checks of a recorded tool loop: every rollout's main conversation holds the model's own
 * `lookup` call with the asked city as its first Choice, the tool's result (as the framework sent
 * it back) after it, and a second Choice; every Choice has logprobs; nothing went astray into a
 * sub-agent history unless `histories` allows it.
 */
export function expectLookupLoops(groups: readonly TrajectoryGroup[], scenarios: readonly CityScenario[]): void {
  expect(groups).toHaveLength(scenarios.length);
  for (const [groupIndex, group] of groups.entries()) {
    expect(group.exceptions ?? []).toEqual([]);
    for (const trajectory of group.trajectories) {
      const items = trajectory.messages_and_choices;
      const choiceAt = items.flatMap((item, at) => (isChoice(item) ? [at] : []));
      expect(choiceAt.length).toBeGreaterThanOrEqual(2);
      for (const at of choiceAt) expect((items[at] as Choice).logprobs?.content?.length ?? 0).toBeGreaterThan(0);
      expect(trajectory.additional_histories ?? []).toEqual([]);
      const [first, second] = choiceAt as [number, number];
      const call = (items[first] as Choice).message.tool_calls?.[0];
      if (call?.type !== 'function') throw new Error(`Expected a function call first, got ${JSON.stringify(call)}`);
      expect(call.function.name).toBe('lookup');
      const { city } = JSON.parse(call.function.arguments) as { city: unknown };
      expect(city).toBe(scenarios[groupIndex]?.city);
      const between = items.slice(first + 1, second);
      expect(between).toHaveLength(1);
      expect(between[0]).toMatchObject({ role: 'tool', tool_call_id: call.id });
      expect(String((between[0] as { content: unknown }).content)).toContain(lookupResult(String(city)));
    }
  }
}
