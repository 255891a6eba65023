/**
 * The Qwen3 agent task: "What's the weather at home?". The user's home city is stated once, in a
 * fixed system prompt; the agent is offered one tool, `weather`, in the OpenAI `tools` format, and
 * must answer with a call of it naming the user's home. The service renders the system prompt and
 * the tool with Qwen3's own chat template and parses the model's `<tool_call>` text back into
 * `message.tool_calls`, so the reward reads what the client got.
 *
 * Verifiable, in two halves: 0.5 when the reply calls `weather` (with JSON arguments), plus 0.5
 * when its `city` argument is {@link HOME_CITY} (1 in all).
 *
 * The warm start does not know the answer: its demonstrations are calls of `weather` for the
 * cities of {@link WEATHER_CITIES}, drawn independently of the question (logs of a bot that had not
 * read the system prompt), so they teach the call's format and leave the city to chance. Which
 * city the user wants is what RL learns, from the reward alone.
 *
 * @example
 * const rows = weatherDemonstrations(weatherScenarios(), 50);
 * await model.trainSFT(rows);
 * const message = await weatherAgent(model.openai(), model.inferenceName(), weatherScenarios()[0], { temperature: 0.05 });
 * weatherReward(message); // 1 once learned
 */
import type OpenAI from 'openai';
import type { SFTRow } from 'policyloop';

/** The user's home: the `city` argument the reward asks for. */
export const HOME_CITY = 'Bern';

/**
 * The cities the warm start's demonstrations name (each one Qwen3 token after `"`). Two, because
 * the tiny Qwen3's tied random head can put most of the probability on two cities at once, not on
 * more (docs/engine.md, "An agent on the tiny Qwen3 that learns by RL").
 */
export const WEATHER_CITIES: readonly string[] = ['Paris', HOME_CITY];

/** The system prompt of every conversation: where the user lives. */
export const WEATHER_SYSTEM_PROMPT = `You are a weather assistant. The user lives in ${HOME_CITY}.`;

/** The questions RL trains on. */
export const WEATHER_QUESTIONS: readonly string[] = [
  "What's the weather at home?",
  'Is it raining at home?',
  'How cold is it at home?',
  'Weather at home, please.',
];

/** Questions no job trains on, for a held-out evaluation. */
export const HELD_OUT_WEATHER_QUESTIONS: readonly string[] = [
  'Is it sunny at home today?',
  'Do I need a coat at home?',
];

/** One question of the task. */
export interface WeatherScenario {
  /** The user's question. */
  readonly question: string;
}

/** The questions as scenarios: {@link WEATHER_QUESTIONS} unless others are given. */
export function weatherScenarios(questions: readonly string[] = WEATHER_QUESTIONS): WeatherScenario[] {
  return questions.map((question) => ({ question }));
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

/** The conversation the agent sends for `scenario`: the system prompt, then the question. */
export function weatherMessages(scenario: WeatherScenario): OpenAI.ChatCompletionMessageParam[] {
  return [
    { role: 'system', content: WEATHER_SYSTEM_PROMPT },
    { role: 'user', content: scenario.question },
  ];
}

/** How {@link weatherAgent} samples. */
export interface WeatherAgentOptions {
  /** Sampling temperature (0: greedy). */
  readonly temperature: number;
  /** Seed of the sampler, for rollouts that repeat run after run. @default none */
  readonly seed?: number | undefined;
  /**
   * The most tokens of the reply: the right one is 23 tokens (Qwen3's empty `<think>` block, the
   * `<tool_call>` block, `<|im_end|>`).
   * @default 28
   */
  readonly maxTokens?: number | undefined;
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

/** The `city` argument of the reply's `weather` call; undefined when there is no such call. */
export function calledCity(message: Pick<OpenAI.ChatCompletionMessage, 'tool_calls'> | undefined): unknown {
  const call = message?.tool_calls?.[0];
  if (call?.type !== 'function' || call.function.name !== 'weather') return undefined;
  try {
    return (JSON.parse(call.function.arguments) as { city?: unknown } | null)?.city ?? null;
  } catch {
    return null;
  }
}

/** The reward of a reply: 0.5 for calling `weather`, plus 0.5 when its `city` is {@link HOME_CITY}. */
export function weatherReward(message: Pick<OpenAI.ChatCompletionMessage, 'tool_calls'> | undefined): number {
  const city = calledCity(message);
  if (city === undefined) return 0;
  return city === HOME_CITY ? 1 : 0.5;
}

/**
 * What a reply called, for counting: the city when it is one of {@link WEATHER_CITIES}, `other`
 * for a `weather` call with any other (or no) city, `no call` when the reply has no `weather` call.
 */
export function replyLabel(message: Pick<OpenAI.ChatCompletionMessage, 'tool_calls'> | undefined): string {
  const city = calledCity(message);
  if (city === undefined) return 'no call';
  return typeof city === 'string' && WEATHER_CITIES.includes(city) ? city : 'other';
}

/** How {@link evaluateWeather} samples. */
export interface WeatherEvaluationOptions {
  /** Sampling temperature (0: greedy, one reply a question is enough). */
  readonly temperature: number;
  /** Replies per question. @default 1 */
  readonly samples?: number | undefined;
  /** Reply k to question i is sampled with seed `seed + 100 * i + k`. @default 9000 */
  readonly seed?: number | undefined;
}

/** What {@link evaluateWeather} measured. */
export interface WeatherEvaluation {
  /** Mean reward of the replies. */
  readonly reward: number;
  /** How many replies named each city, `other` or `no call` ({@link replyLabel}). */
  readonly labels: Readonly<Record<string, number>>;
  /** The replies, question by question. */
  readonly replies: readonly OpenAI.ChatCompletionMessage[];
}

/**
 * Runs the agent `samples` times on every scenario with fixed seeds (9000 up by default, apart
 * from any rollout seeds a training loop uses, so no job has trained on these replies) and
 * measures the mean reward.
 */
export async function evaluateWeather(
  client: OpenAI,
  model: string,
  scenarios: readonly WeatherScenario[],
  options: WeatherEvaluationOptions,
): Promise<WeatherEvaluation> {
  const samples = options.samples ?? 1;
  const seed = options.seed ?? 9000;
  if (!Number.isInteger(samples) || samples < 1)
    throw new Error(`Expected samples to be a positive whole number, got ${samples}.`);
  const replies = await Promise.all(
    scenarios.flatMap((scenario, index) =>
      Array.from({ length: samples }, (_, k) =>
        weatherAgent(client, model, scenario, { temperature: options.temperature, seed: seed + 100 * index + k }),
      ),
    ),
  );
  const labels: Record<string, number> = {};
  for (const reply of replies) {
    const label = replyLabel(reply);
    labels[label] = (labels[label] ?? 0) + 1;
  }
  const reward = replies.reduce((sum, reply) => sum + weatherReward(reply), 0) / replies.length;
  return { reward, labels, replies };
}

/** The counts of {@link WeatherEvaluation.labels} as text: `Bern 27, Paris 0, other 1, no call 4`. */
export function formatLabels(labels: Readonly<Record<string, number>>): string {
  return [...WEATHER_CITIES, 'other', 'no call'].map((label) => `${label} ${labels[label] ?? 0}`).join(', ');
}

/** An SFT demonstration: `scenario`'s question, then a call of `weather` for `city`. */
export function weatherDemonstration(scenario: WeatherScenario, city: string): SFTRow {
  return {
    messages: [
      ...weatherMessages(scenario),
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'weather', arguments: JSON.stringify({ city }) } },
        ],
      },
    ],
    tools: [...WEATHER_TOOLS],
  } as SFTRow;
}

/**
 * The warm start's rows: `passes` passes over every scenario, each row calling one of
 * {@link WEATHER_CITIES} (`cities` to name others), in turn, so every question is seen with every
 * city and the city carries no information about the question.
 */
export function weatherDemonstrations(
  scenarios: readonly WeatherScenario[],
  passes: number,
  cities: readonly string[] = WEATHER_CITIES,
): SFTRow[] {
  const rows: SFTRow[] = [];
  for (let pass = 0; pass < passes; pass += 1)
    scenarios.forEach((scenario, index) => {
      rows.push(weatherDemonstration(scenario, cities[(pass + index) % cities.length] as string));
    });
  return rows;
}
