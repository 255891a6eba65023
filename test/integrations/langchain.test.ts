/**
 * LangChain.js (`@langchain/openai` 1.5, LangGraph 1.7) with `ChatOpenAI({ configuration: { fetch } })`:
 * each rollout is a LangGraph ReAct agent run with a tool, then a follow-up run on the graph's own
 * messages; 8 rollouts at once, non-streaming and streaming, on chat completions and on the
 * Responses API (`useResponsesApi: true`, translated by the fetch), recorded and trained on. Structured
 * output (`withStructuredOutput`, which goes through `chat.completions.parse`) is recorded too.
 */
import { HumanMessage, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { ChatOpenAI } from '@langchain/openai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { captureFetch, gatherTrajectoryGroups, recordTrajectory } from 'policyloop';
import {
  CITIES,
  choicesIn,
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
const cities = CITIES.slice(0, 4);

const weather = tool(async ({ city }: { city: string }) => weatherOf(city), {
  name: 'weather',
  description: 'Weather of a city',
  schema: z.object({ city: z.string() }),
});

/** `ChatOpenAI` on chat completions (its default), or on the Responses API (`useResponsesApi: true`), translated. */
function chat(useResponsesApi = false): ChatOpenAI {
  const { model } = setup.current;
  return new ChatOpenAI({
    model: model.inferenceName(),
    apiKey: model.inferenceApiKey,
    maxTokens: MAX_TOKENS,
    maxRetries: 0,
    useResponsesApi,
    configuration: {
      baseURL: model.inferenceBaseURL,
      fetch: captureFetch({ fetch: countingFetch(hosts), defaults: { logprobs: true } }),
    },
  });
}

describe('LangChain.js through captureFetch', () => {
  for (const [streaming, responses] of [
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ] as const) {
    const how = `${streaming ? 'streaming' : 'plain'} LangGraph agents${responses ? ' on the Responses API' : ''}`;
    it(`records every call of ${how}, 8 at once, and trains on them`, async () => {
      const agent = createReactAgent({ llm: chat(responses), tools: [weather], prompt: SYSTEM });
      // Streaming through the graph's `.stream()`: the model streams its tokens (SSE). (With
      // `streaming: true` and `invoke`, LangChain estimates token usage with tiktoken, which
      // downloads its encoding from the internet.)
      const runAgent = async (messages: BaseMessage[]): Promise<BaseMessage[]> => {
        if (!streaming) return (await agent.invoke({ messages }, { recursionLimit: 6 })).messages;
        let last: BaseMessage[] = messages;
        const stream = await agent.stream({ messages }, { recursionLimit: 6, streamMode: ['messages', 'values'] });
        for await (const [mode, chunk] of stream) {
          if (mode === 'values') last = (chunk as { messages: BaseMessage[] }).messages;
        }
        return last;
      };
      const groups = await gatherTrajectoryGroups(
        cities.map((city) => ({ city })),
        async ({ city }) => {
          const first = await runAgent([new HumanMessage(question(city))]);
          await runAgent([...first, new HumanMessage(FOLLOW_UP)]);
        },
        { groupSize: 2, concurrency: 8, reward: meanLogprob },
      );
      expectRecorded(groups, cities, streaming);
      const { step } = await setup.current.model.train(groups);
      expect(step).toBeGreaterThan(0);
      expect([...hosts]).toEqual(['127.0.0.1']);
    }, 300_000);
  }

  it('records structured output, which goes through chat.completions.parse', async () => {
    const structured = chat().withStructuredOutput(z.object({ city: z.string() }), { name: 'answer' });
    // The fresh model writes no valid JSON within the token limit: the SDK's parse fails after
    // the response came, so the Choice is recorded all the same.
    const { result, trajectory } = await recordTrajectory(() =>
      structured.invoke(question('Oslo')).then(
        () => 'parsed',
        (error: unknown) => (error instanceof Error ? error.message : String(error)),
      ),
    );
    expect(result).toMatch(/parsed|length limit|JSON|parse/i);
    const choices = choicesIn(trajectory);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
    expect(JSON.stringify(trajectory.messages_and_choices)).toContain(question('Oslo'));
  }, 120_000);
});
