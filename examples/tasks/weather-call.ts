/**
 * The Qwen3 agent task: "Weather in <city>?". The agent is offered one tool, `weather`, in the
 * OpenAI `tools` format; the model must answer with a call of it naming the asked city. The
 * service renders the tool into the prompt with Qwen3's own chat template and parses the model's
 * `<tool_call>` text back into `message.tool_calls`, so the reward reads what the client got.
 *
 * Verifiable, in two halves: 0.5 when the reply calls `weather`, plus 0.5 when its `city`
 * argument is the asked city (1 in all: the right tool with the right argument).
 *
 * @example
 * const rows = weatherScenarios().map(weatherDemonstration);
 * await model.trainSFT(rows);
 * const message = await weatherAgent(model.openai(), model.inferenceName(), weatherScenarios()[0], { temperature: 0 });
 * weatherReward(message, weatherScenarios()[0]); // 1 once learned
 */
import type OpenAI from 'openai';
import type { SFTRow } from 'policyloop';

/** The cities asked about (each a single Qwen3 token after `"`). */
export const WEATHER_CITIES: readonly string[] = ['Oslo', 'Lima', 'Rome', 'Paris'];

/** One question of the task. */
export interface WeatherScenario {
  /** The city asked about: the `city` argument the call must carry. */
  readonly city: string;
}

/** The first `count` cities of {@link WEATHER_CITIES} as scenarios (default: all 4). */
export function weatherScenarios(count: number = WEATHER_CITIES.length): WeatherScenario[] {
  return WEATHER_CITIES.slice(0, count).map((city) => ({ city }));
}

/** The agent's one tool, as the OpenAI client sends it. */
export const WEATHER_TOOLS = [
  {
    type: 'function',
    function: {
      name: 'weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
] as const satisfies OpenAI.ChatCompletionTool[];

/** The conversation the agent sends for `scenario`. */
export function weatherMessages(scenario: WeatherScenario): OpenAI.ChatCompletionMessageParam[] {
  return [{ role: 'user', content: `Weather in ${scenario.city}?` }];
}

/** How {@link weatherAgent} samples. */
export interface WeatherAgentOptions {
  /** Sampling temperature (0: greedy). */
  readonly temperature: number;
  /** Seed of the sampler, for rollouts that repeat run after run. @default none */
  readonly seed?: number;
  /**
   * The most tokens of the reply: the right one is 23 tokens (Qwen3's empty `<think>` block, the
   * `<tool_call>` block, `<|im_end|>`).
   * @default 28
   */
  readonly maxTokens?: number;
}

/**
 * The agent: one chat completion with the `weather` tool offered; resolves with the assistant
 * message (its `tool_calls` parsed by the service from the model's `<tool_call>` text).
 */
export async function weatherAgent(
  client: OpenAI,
  model: string,
  scenario: WeatherScenario,
  options: WeatherAgentOptions,
): Promise<OpenAI.ChatCompletionMessage> {
  const completion = await client.chat.completions.create({
    model,
    messages: weatherMessages(scenario),
    tools: [...WEATHER_TOOLS],
    max_tokens: options.maxTokens ?? 28,
    temperature: options.temperature,
    ...(options.seed === undefined ? {} : { seed: options.seed }),
  });
  const message = completion.choices[0]?.message;
  if (message === undefined) throw new Error('Expected one choice in the completion, got none.');
  return message;
}

/** The reward of a reply: 0.5 for calling `weather`, plus 0.5 when its `city` is the asked one. */
export function weatherReward(
  message: Pick<OpenAI.ChatCompletionMessage, 'tool_calls'> | undefined,
  scenario: WeatherScenario,
): number {
  const call = message?.tool_calls?.[0];
  if (call?.type !== 'function' || call.function.name !== 'weather') return 0;
  let city: unknown;
  try {
    city = (JSON.parse(call.function.arguments) as { city?: unknown } | null)?.city;
  } catch {
    return 0.5;
  }
  return city === scenario.city ? 1 : 0.5;
}

/** An SFT demonstration of `scenario`: the question, then the right call. */
export function weatherDemonstration(scenario: WeatherScenario): SFTRow {
  return {
    messages: [
      ...weatherMessages(scenario),
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_1',
            type: 'function',
            function: { name: 'weather', arguments: JSON.stringify({ city: scenario.city }) },
          },
        ],
      },
    ],
    tools: [...WEATHER_TOOLS],
  } as SFTRow;
}
