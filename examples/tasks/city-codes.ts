/**
 * The AI SDK agent task: "what is the code of <city>?". The agent has one tool, `lookup`, which
 * returns a city's code; it must call the tool with the right city, then answer with the code it
 * got back. Verifiable: the answer is right when it contains the city's code (the reward is in
 * examples/ai-sdk-agent.ts).
 *
 * The agent is plain AI SDK code (`generateText` with tools and `stopWhen`); what it runs on is
 * the caller's `LanguageModel`. The same agent, run against an oracle `fetch`, yields the SFT
 * demonstrations of a warm start, so they hold exactly what the SDK sends (its system message,
 * its JSON schemas with `$schema` and `additionalProperties`, its tool-call ids and tool messages).
 *
 * @example
 * const rows = await Promise.all(cityScenarios().map(demonstration));
 * await model.trainSFT(rows);
 * await cityAgent(provider(model.inferenceName()), cityScenarios()[0]);
 */
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, type LanguageModel, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import { captureFetch, type SFTRow } from 'policyloop';

/** The lookup table behind the tool: every city's code. */
export const CITY_CODES: Readonly<Record<string, string>> = {
  Oslo: 'K7Q',
  Lima: 'B2X',
  Rome: 'M4T',
  Kyiv: 'Z9D',
  Pune: 'H3W',
  Baku: 'R8F',
  Doha: 'C5N',
  Riga: 'V6J',
};

/** One question of the task. */
export interface CityScenario {
  /** The city asked about (the argument `lookup` must get). */
  readonly city: string;
  /** Its code (what the final answer must contain). */
  readonly code: string;
}

/** The first `count` cities of {@link CITY_CODES} as scenarios (default: all 8). */
export function cityScenarios(count: number = Object.keys(CITY_CODES).length): CityScenario[] {
  return Object.entries(CITY_CODES)
    .slice(0, count)
    .map(([city, code]) => ({ city, code }));
}

/** The agent's system prompt. */
export const SYSTEM = 'Look the city up with the tool, then answer with its code.';

/** What `lookup` answers for `city`. */
export const lookupResult = (city: string): string => `${city}: ${CITY_CODES[city] ?? 'unknown'}`;

/** The agent's one tool. */
export const tools = {
  lookup: tool({
    description: 'The code of a city',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => lookupResult(city),
  }),
};

/** How {@link cityAgent} calls the model. */
export interface CityAgentOptions {
  /**
   * Stream the steps (`streamText`) instead of `generateText`.
   * @default false
   */
  readonly streaming?: boolean;
  /**
   * Sampling temperature; unset sends none (the service samples at 1, what RL needs).
   * @default undefined
   */
  readonly temperature?: number;
  /**
   * The most tokens of one step (a call of `lookup` is 13 tokens on `agent-chat`; without a limit
   * the service lets a reply run to the end of the context).
   * @default 24
   */
  readonly maxOutputTokens?: number;
}

/**
 * The agent: asks for the code of `scenario.city` with the `lookup` tool, in a loop of up to 3
 * steps (each step one chat completion), and resolves with the final text.
 */
export async function cityAgent(
  llm: LanguageModel,
  scenario: CityScenario,
  options: CityAgentOptions = {},
): Promise<string> {
  const request = {
    model: llm,
    system: SYSTEM,
    prompt: `Code of ${scenario.city}?`,
    tools,
    stopWhen: stepCountIs(3),
    maxOutputTokens: options.maxOutputTokens ?? 24,
    ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
  };
  if (options.streaming === true) return await streamText(request).text;
  return (await generateText(request)).text;
}

interface RecordedRequest {
  readonly messages: SFTRow['messages'];
  readonly tools?: SFTRow['tools'];
}

/**
 * An SFT demonstration of `scenario`: the agent runs against an oracle `fetch` that answers its
 * first call with the right `lookup` call and its second with the code; the row is the SDK's
 * second request (system, question, the call, the tool's result) plus the oracle's answer, so
 * both assistant turns are learned. The agent calls chat completions (`provider.chat(id)`);
 * {@link responsesDemonstration} makes the same on the SDK's default, the Responses API.
 */
export function demonstration(scenario: CityScenario): Promise<SFTRow> {
  return demonstrationOn(scenario, 'chat');
}

/**
 * {@link demonstration} with the agent on the provider's default, `provider(id)`: its Responses
 * calls go through a recording fetch that turns them into chat completions, so the oracle (and the
 * row) see exactly what the training service sees when the agent trains on `provider(id)`.
 */
export function responsesDemonstration(scenario: CityScenario): Promise<SFTRow> {
  return demonstrationOn(scenario, 'responses');
}

/** A demonstration of `scenario` with the agent on `api`. */
async function demonstrationOn(scenario: CityScenario, api: 'chat' | 'responses'): Promise<SFTRow> {
  const call = {
    role: 'assistant',
    content: null,
    tool_calls: [
      {
        id: 'call_1',
        type: 'function',
        function: { name: 'lookup', arguments: JSON.stringify({ city: scenario.city }) },
      },
    ],
  };
  const answer = { role: 'assistant', content: scenario.code };
  const requests: RecordedRequest[] = [];
  const oracle: typeof fetch = async (_input, init) => {
    requests.push(JSON.parse(String(init?.body)) as RecordedRequest);
    const first = requests.length === 1;
    return Response.json({
      id: `demo-${requests.length}`,
      object: 'chat.completion',
      created: 0,
      model: 'oracle',
      choices: [{ index: 0, message: first ? call : answer, finish_reason: first ? 'tool_calls' : 'stop' }],
    });
  };
  if (api === 'responses') {
    // The recording fetch translates the SDK's Responses calls into the chat completions the oracle answers.
    const provider = createOpenAI({
      baseURL: 'http://oracle.invalid/v1',
      apiKey: 'oracle',
      fetch: captureFetch({ fetch: oracle }),
    });
    await cityAgent(provider('oracle'), scenario);
  } else {
    const provider = createOpenAI({ baseURL: 'http://oracle.invalid/v1', apiKey: 'oracle', fetch: oracle });
    await cityAgent(provider.chat('oracle'), scenario);
  }
  const last = requests[1];
  if (requests.length !== 2 || last === undefined)
    throw new Error(`Expected the oracle agent to make 2 calls, got ${requests.length}.`);
  return { messages: [...last.messages, answer], ...(last.tools === undefined ? {} : { tools: last.tools }) } as SFTRow;
}
