/**
 * A LangGraph ReAct agent trained unchanged: `ChatOpenAI` gets the model's URL, key and a recording
 * `fetch` (`configuration: { baseURL, fetch }`), so every model call of the graph lands in the
 * rollout's trajectory. Offline, on the local service; the fresh local model answers in noise, and
 * the reward is a stand-in.
 * Run: npx tsx examples/langchain.ts
 */
import { rm } from 'node:fs/promises';
import { HumanMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { ChatOpenAI } from '@langchain/openai';
import { choicesOf, gatherTrajectoryGroups, LocalBackend, TrainableModel, type TrajectoryInput } from 'policyloop';
import { z } from 'zod';

/** The mean logprob of the sampled tokens. */
function meanLogprob(trajectory: TrajectoryInput): number {
  const logprobs = choicesOf(trajectory).flatMap((choice) =>
    (choice.logprobs?.content ?? []).map((token) => token.logprob),
  );
  return logprobs.reduce((sum, value) => sum + value, 0) / Math.max(1, logprobs.length);
}

const dataDir = '.policyloop/langchain';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
// small-chat reads 512 tokens: room for a short system prompt, one tool schema and a reply.
const model = new TrainableModel({ project: 'examples', name: 'langgraph-agent', baseModel: 'policyloop/small-chat' });
await model.register(backend);

const llm = new ChatOpenAI({
  model: model.inferenceName(),
  apiKey: model.inferenceApiKey,
  maxTokens: 16,
  configuration: { baseURL: model.inferenceBaseURL, fetch: model.fetch() },
});
const weather = tool(async ({ city }: { city: string }) => `${city}: 9C`, {
  name: 'weather',
  description: 'Weather of a city',
  schema: z.object({ city: z.string() }),
});
const agent = createReactAgent({ llm, tools: [weather], prompt: 'Be brief.' });

const groups = await gatherTrajectoryGroups(
  [{ city: 'Oslo' }, { city: 'Lima' }],
  async ({ city }) => {
    await agent.invoke({ messages: [new HumanMessage(`Weather in ${city}?`)] }, { recursionLimit: 6 });
  },
  // A stand-in reward (the model's confidence in its reply): use a real, verifiable one in your agent.
  { groupSize: 2, reward: meanLogprob },
);
for (const group of groups) {
  const calls = group.trajectories.map((trajectory) => choicesOf(trajectory).length);
  console.log(`recorded ${calls.join(', ')} chat completions per rollout, with logprobs`);
}
const { step } = await model.train(groups);
console.log(`trained to step ${step}; history in ${model.files.history}`);
await model.close();
await backend.close();
