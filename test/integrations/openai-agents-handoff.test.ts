/**
 * A real OpenAI Agents SDK agent that hands off, on the local service: the task's triage agent
 * (examples/tasks/seat-booking.ts) hands a seat request to the seat agent, which calls
 * `update_seat` and confirms. None of the agents names a model; one `Runner` with an
 * `OpenAIChatCompletionsModel` runs them all on `model.fetch()`.
 *
 * The model is warm-started on demonstrations (the same agents run against an oracle `fetch`,
 * recorded, and given to `trainSFT` as trajectories: a row per conversation), then decodes
 * greedily, so every run writes the same tokens. The specialist's turns land in
 * `additional_histories`, and every reader sees them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BookingScenario,
  bookingRunner,
  bookingScenarios,
  demonstration,
  runBooking,
} from '../../examples/tasks/seat-booking.js';
import {
  choicesOf,
  exactMatch,
  finalAssistantText,
  gatherTrajectoryGroups,
  isChoice,
  LocalBackend,
  recordTrajectory,
  toolCalledWith,
  toolCallsOf,
  TrainableModel,
  type Trajectory,
} from 'policyloop';
import { toSFTRows } from 'policyloop/training';

let dataDir: string;
let backend: LocalBackend;
let model: TrainableModel;
let client: OpenAI;
let warmStep: number;
const scenarios: BookingScenario[] = bookingScenarios(2);

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-handoff-'));
  backend = await LocalBackend.start({ dataDir });
  model = new TrainableModel({ project: 'integrations', name: 'handoff', baseModel: 'policyloop/agent-chat' });
  await model.register(backend);
  const demonstrations = await Promise.all(scenarios.map(demonstration));
  // Trajectories straight into trainSFT: each run gives the triage row and the specialist's.
  expect(toSFTRows(demonstrations)).toHaveLength(2 * demonstrations.length);
  const { step } = await model.trainSFT(Array.from({ length: 40 }, () => demonstrations).flat(), {
    batchSize: 2 * demonstrations.length,
    learningRate: 1e-2,
  });
  warmStep = step;
  client = new OpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
}, 300_000);
afterAll(async () => {
  await model?.close();
  await backend?.close();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

/** The specialist's Choices: every Choice of the sub-agent history. */
function specialistChoices(trajectory: Trajectory) {
  return (trajectory.additional_histories[0]?.messages_and_choices ?? []).filter(isChoice);
}

describe('an Agents SDK agent that hands off, on the local service', () => {
  it('records the specialist in additional_histories, and the readers and toSFTRows see its tool call and answer', async () => {
    const seat = scenarios[0] as BookingScenario;
    expect(seat.kind).toBe('seat');
    const runner = bookingRunner(client, model.inferenceName(warmStep), { temperature: 0 });
    const { trajectory, result } = await recordTrajectory(() => runBooking(runner, seat));

    // The run: the triage agent's handoff in the main conversation, the seat agent's turns after it.
    const mainCalls = toolCallsOf(trajectory, { mainOnly: true }).map((call) => call.name);
    expect(mainCalls).toEqual(['transfer_to_seat_agent']);
    expect(trajectory.additional_histories).toHaveLength(1);
    const specialist = specialistChoices(trajectory);
    expect(specialist.length).toBeGreaterThanOrEqual(2);
    const call = specialist[0]?.message.tool_calls?.[0];
    expect(call?.type === 'function' ? call.function.name : undefined).toBe('update_seat');

    // The readers read the whole run by default, and the main conversation alone when asked.
    expect(toolCalledWith('update_seat', { seat: seat.value })(trajectory, seat)).toBe(1);
    expect(toolCalledWith('update_seat', undefined, { mainOnly: true })(trajectory, seat)).toBe(0);
    expect(toolCallsOf(trajectory).map((entry) => entry.name)).toEqual(['transfer_to_seat_agent', 'update_seat']);
    expect(choicesOf(trajectory)).toHaveLength(1 + specialist.length);
    const answer = finalAssistantText(trajectory);
    expect(answer).toBe(result);
    expect(answer).toContain(seat.answer);
    expect(exactMatch(result)(trajectory, seat)).toBe(1);
    expect(finalAssistantText(trajectory, { mainOnly: true })).toBe('');

    // SFT keeps the specialist: its own row, with its own system prompt and its own tool.
    const rows = toSFTRows([trajectory]);
    expect(rows).toHaveLength(2);
    expect(rows[0]?.messages[0]).toEqual({
      role: 'system',
      content: 'Hand seat requests to seat_agent, questions to faq_agent.',
    });
    expect(rows[1]?.messages[0]).toEqual({
      role: 'system',
      content: 'Book the seat with update_seat, then confirm it.',
    });
    expect(rows[1]?.tools?.map((entry) => (entry.type === 'function' ? entry.function.name : ''))).toEqual([
      'update_seat',
    ]);
    expect(rows[1]?.messages.at(-1)).toEqual({ role: 'assistant', content: answer });
  }, 120_000);

  it('gathers handoff runs and trains one RL step on them', async () => {
    const runner = bookingRunner(client, model.inferenceName(warmStep), { temperature: 0 });
    const groups = await gatherTrajectoryGroups(
      scenarios,
      async (scenario, { index }) => {
        await runBooking(runner, scenario);
        return { reward: index };
      },
      { groupSize: 2, concurrency: 4 },
    );
    for (const [index, group] of groups.entries()) {
      const scenario = scenarios[index] as BookingScenario;
      expect(group.exceptions ?? []).toEqual([]);
      for (const trajectory of group.trajectories) {
        expect(toolCalledWith(`transfer_to_${scenario.kind}_agent`)(trajectory, scenario)).toBe(1);
        expect(trajectory.additional_histories).toHaveLength(1);
        for (const choice of choicesOf(trajectory)) expect(choice.logprobs?.content?.length ?? 0).toBeGreaterThan(0);
      }
    }
    const before = await model.getStep();
    const { step } = await model.train(groups);
    expect(step).toBe(before + 1);
  }, 120_000);
});
