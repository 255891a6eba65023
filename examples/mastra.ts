/**
 * A Mastra agent trained unchanged: its model is an AI SDK v5 provider (`@ai-sdk/openai@2`; this
 * repository installs it as `@ai-sdk/openai-v2`) whose `fetch` records, on the provider's default
 * `provider(id)`: the Responses API, which the recording fetch turns into chat completions (what
 * the training API serves) and back. Mastra sends `temperature: 0` unless told: RL samples at 1. Offline, on the local service; the fresh local model answers in noise, and
 * the reward is a stand-in.
 * Run: npx tsx examples/mastra.ts
 */
import { rm } from 'node:fs/promises';
import { createOpenAI } from '@ai-sdk/openai-v2';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { choicesOf, gatherTrajectoryGroups, LocalBackend, TrainableModel, type TrajectoryInput } from 'policyloop';
import { z } from 'zod';

/** The mean logprob of the sampled tokens. */
function meanLogprob(trajectory: TrajectoryInput): number {
  const logprobs = choicesOf(trajectory).flatMap((choice) =>
    (choice.logprobs?.content ?? []).map((token) => token.logprob),
  );
  return logprobs.reduce((sum, value) => sum + value, 0) / Math.max(1, logprobs.length);
}

const dataDir = '.policyloop/mastra';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
// small-chat reads 512 tokens: room for a short system prompt, one tool schema and a reply.
const model = new TrainableModel({ project: 'examples', name: 'mastra-agent', baseModel: 'policyloop/small-chat' });
await model.register(backend);

const provider = createOpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
const agent = new Agent({
  name: 'weather',
  instructions: 'Be brief.',
  model: provider(model.inferenceName()), // the default: the Responses API, translated
  tools: {
    weather: createTool({
      id: 'weather',
      description: 'Weather of a city',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ context }) => `${context.city}: 9C`,
    }),
  },
});

const groups = await gatherTrajectoryGroups(
  [{ city: 'Oslo' }, { city: 'Lima' }],
  async ({ city }) => {
    await agent.generate(`Weather in ${city}?`, {
      maxSteps: 3,
      modelSettings: { maxOutputTokens: 16, temperature: 1 },
    });
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
