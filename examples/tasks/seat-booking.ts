/**
 * The handoff task, shaped like the OpenAI Agents SDK's customer-service example: a triage agent
 * hands off to a seat-booking agent or an FAQ agent, each with its own instructions and its own
 * tool. None of the agents names a model: a `Runner` whose `model` is an
 * `OpenAIChatCompletionsModel` runs all of them on the caller's client and model name.
 *
 * After a handoff the specialist's turns are a conversation of their own (another system prompt,
 * other tools), recorded in the trajectory's `additional_histories`; the trajectory readers
 * (`toolCalledWith`, `finalAssistantText`) read the whole run.
 *
 * Verifiable: a run succeeds when it hands off to the right agent, the specialist calls its tool
 * with the asked seat or topic, and the final answer holds the seat or the topic's answer.
 *
 * @example
 * const trajectories = await Promise.all(bookingScenarios().map(demonstration));
 * await model.trainSFT(trajectories); // each conversation of each run is a row
 * await runBooking(bookingRunner(client, model.inferenceName()), bookingScenarios()[0]);
 */
import {
  Agent,
  OpenAIChatCompletionsModel,
  OpenAIResponsesModel,
  Runner,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import {
  captureFetch,
  combineRewards,
  finalAssistantText,
  recordTrajectory,
  toolCallsOf,
  type Trajectory,
} from 'policyloop';

/** What the FAQ tool knows. */
export const FAQ: Readonly<Record<string, string>> = {
  wifi: 'Wifi is free.',
  bags: 'One bag is free.',
  food: 'Snacks are free.',
  pets: 'Small pets may fly.',
};

/** One request of the task: a seat change or a question. */
export interface BookingScenario {
  /** Which specialist should take it. */
  readonly kind: 'seat' | 'faq';
  /** The seat (`12A`) or the topic (`wifi`): the argument the specialist's tool must get. */
  readonly value: string;
  /** What the final answer must contain: the seat, or the topic's answer. */
  readonly answer: string;
  /** The customer's message. */
  readonly request: string;
}

const SEATS = ['12A', '3C', '27F', '9B'];

/** `count` scenarios, seat changes and questions alternating (default 8: every seat and topic). */
export function bookingScenarios(count = 8): BookingScenario[] {
  const topics = Object.keys(FAQ);
  return Array.from({ length: count }, (_unused, index) => {
    const half = Math.floor(index / 2);
    if (index % 2 === 0) {
      const seat = SEATS[half % SEATS.length] as string;
      return { kind: 'seat', value: seat, answer: seat, request: `Seat ${seat} please.` };
    }
    const topic = topics[half % topics.length] as string;
    return { kind: 'faq', value: topic, answer: FAQ[topic] as string, request: `Question: ${topic}?` };
  });
}

/** The tool of the seat agent. */
export const updateSeat = tool({
  name: 'update_seat',
  description: 'Move the customer to a seat',
  parameters: z.object({ seat: z.string() }),
  execute: async ({ seat }) => `Seat ${seat} booked.`,
});

/** The tool of the FAQ agent. */
export const faqLookup = tool({
  name: 'faq_lookup',
  description: 'Answer a question',
  parameters: z.object({ topic: z.string() }),
  execute: async ({ topic }) => FAQ[topic] ?? 'Unknown.',
});

/** The seat-booking specialist (no model: the runner's). */
export const seatAgent = new Agent({
  name: 'seat_agent',
  handoffDescription: 'Changes seats',
  instructions: 'Book the seat with update_seat, then confirm it.',
  tools: [updateSeat],
});

/** The FAQ specialist (no model: the runner's). */
export const faqAgent = new Agent({
  name: 'faq_agent',
  handoffDescription: 'Answers questions',
  instructions: 'Look the topic up with faq_lookup, then answer.',
  tools: [faqLookup],
});

/** The triage agent, where every run starts (no model: the runner's). */
export const triageAgent = Agent.create({
  name: 'triage_agent',
  instructions: 'Hand seat requests to seat_agent, questions to faq_agent.',
  handoffs: [seatAgent, faqAgent],
});

/** How {@link bookingRunner} samples. */
export interface BookingRunnerOptions {
  /** Sampling temperature; unset sends none (the service samples at 1, what RL needs). */
  readonly temperature?: number;
  /**
   * The most tokens of one model call.
   * @default 24
   */
  readonly maxTokens?: number;
  /**
   * `responses`: the SDK's default model, `OpenAIResponsesModel` (the Responses API, which a
   * recording client turns into chat completions); `chat_completions`: `OpenAIChatCompletionsModel`.
   * @default 'chat_completions'
   */
  readonly api?: 'chat_completions' | 'responses';
}

/**
 * A `Runner` that runs every agent of the task on `client` and `modelName` (through chat
 * completions, or the Responses API with `api: 'responses'`): the agents name no model, the
 * runner's `model` covers them all. A tool name the
 * model gets wrong goes back to it as a tool error (`toolNotFoundBehavior`) instead of throwing.
 */
export function bookingRunner(client: OpenAI, modelName: string, options: BookingRunnerOptions = {}): Runner {
  setTracingDisabled(true);
  return new Runner({
    model:
      options.api === 'responses'
        ? new OpenAIResponsesModel(client, modelName)
        : new OpenAIChatCompletionsModel(client, modelName),
    modelSettings: {
      maxTokens: options.maxTokens ?? 24,
      ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
    },
    toolNotFoundBehavior: 'return_error_to_model',
    tracingDisabled: true,
  });
}

/** One run of the task: triage, handoff, the specialist's tool call and answer (at most 5 calls). */
export async function runBooking(runner: Runner, scenario: BookingScenario): Promise<string> {
  const result = await runner.run(triageAgent, scenario.request, { maxTurns: 5 });
  return String(result.finalOutput ?? '');
}

/** The tool names of a chat-completions request. */
function toolNames(body: { tools?: { function?: { name?: string } }[] }): string[] {
  return (body.tools ?? []).map((entry) => entry.function?.name ?? '');
}

/**
 * A demonstration of `scenario`: the task's agents run against an oracle `fetch` that hands off to
 * the right specialist, calls its tool with the right argument and answers with the result, all
 * recorded as the SDK sent it. The trajectory holds the triage conversation and the specialist's
 * in `additional_histories`; `model.trainSFT([trajectory])` learns both, each with its own system
 * prompt and tools. The agents run through chat completions; {@link responsesDemonstration} makes
 * the same on the SDK's default model, the Responses API.
 */
export function demonstration(scenario: BookingScenario): Promise<Trajectory> {
  return demonstrationOn(scenario, 'chat_completions');
}

/**
 * {@link demonstration} with the agents on the SDK's default model, `OpenAIResponsesModel`: a
 * recording client turns its Responses calls into the chat completions the oracle answers, so the
 * trajectory holds what the training service sees when the agents train on the default.
 */
export function responsesDemonstration(scenario: BookingScenario): Promise<Trajectory> {
  return demonstrationOn(scenario, 'responses');
}

/** A demonstration of `scenario` with the agents on `api`. */
async function demonstrationOn(scenario: BookingScenario, api: 'chat_completions' | 'responses'): Promise<Trajectory> {
  let calls = 0;
  const oracle: typeof fetch = async (_input, init) => {
    calls += 1;
    const body = JSON.parse(String(init?.body)) as {
      messages: { role: string; content?: unknown }[];
      tools?: { function?: { name?: string } }[];
    };
    const names = toolNames(body);
    const called = JSON.stringify(body.messages).includes(
      `"name":"${scenario.kind === 'seat' ? 'update_seat' : 'faq_lookup'}"`,
    );
    const specialistTool = scenario.kind === 'seat' ? 'update_seat' : 'faq_lookup';
    let message: Record<string, unknown>;
    if (names.includes(`transfer_to_${scenario.kind}_agent`)) {
      message = toolCall(`transfer_to_${scenario.kind}_agent`, {});
    } else if (names.includes(specialistTool) && !called) {
      message = toolCall(
        specialistTool,
        scenario.kind === 'seat' ? { seat: scenario.value } : { topic: scenario.value },
      );
    } else {
      message = {
        role: 'assistant',
        content: scenario.kind === 'seat' ? `Booked ${scenario.answer}.` : scenario.answer,
      };
    }
    return Response.json({
      id: `demo-${calls}`,
      object: 'chat.completion',
      created: 0,
      model: 'oracle',
      choices: [{ index: 0, message, finish_reason: 'tool_calls' in message ? 'tool_calls' : 'stop' }],
    });
  };
  const client = new OpenAI({
    baseURL: 'http://oracle.invalid/v1',
    apiKey: 'oracle',
    fetch: captureFetch({ fetch: oracle }),
  });
  const { trajectory } = await recordTrajectory(() => runBooking(bookingRunner(client, 'oracle', { api }), scenario));
  if (calls !== 3) throw new Error(`Expected the oracle run to make 3 calls, got ${calls}.`);
  return trajectory;
}

function toolCall(name: string, args: Record<string, unknown>): Record<string, unknown> {
  return {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: `call_${name}`, type: 'function', function: { name, arguments: JSON.stringify(args) } }],
  };
}

/** Whether the run (its specialist, after the handoff) made the right tool call for `scenario`. */
function rightCall(trajectory: Trajectory, scenario: BookingScenario): boolean {
  const name = scenario.kind === 'seat' ? 'update_seat' : 'faq_lookup';
  const key = scenario.kind === 'seat' ? 'seat' : 'topic';
  return toolCallsOf(trajectory).some(
    (call) => call.name === name && (call.arguments as Record<string, unknown> | null)?.[key] === scenario.value,
  );
}

/**
 * The task's reward: `success` (handed off to the right agent, the right tool call, the answer in
 * the final text: 1, else 0) plus a quarter of `handoff` (the right handoff alone) and a quarter
 * of `right_call`, which pay for the first parts while the whole is rare.
 */
export const bookingReward = combineRewards<BookingScenario>({
  success: (trajectory, scenario) =>
    handedOff(trajectory, scenario) &&
    rightCall(trajectory, scenario) &&
    finalAssistantText(trajectory).includes(scenario.answer)
      ? 1
      : 0,
  handoff: { fn: (trajectory, scenario) => (handedOff(trajectory, scenario) ? 1 : 0), weight: 0.25 },
  right_call: { fn: (trajectory, scenario) => (rightCall(trajectory, scenario) ? 1 : 0), weight: 0.25 },
});

function handedOff(trajectory: Trajectory, scenario: BookingScenario): boolean {
  return toolCallsOf(trajectory).some((call) => call.name === `transfer_to_${scenario.kind}_agent`);
}
