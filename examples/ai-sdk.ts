/**
 * An AI SDK agent trained unchanged, on the SDK's default: `provider(id)` calls the Responses API.
 * The provider gets `model.fetch()`, a recording fetch, which turns each Responses call into one
 * chat completion (what the training API serves) and back, so every step of `generateText` lands
 * in the rollout's trajectory as a Choice with its logprobs. (`provider.chat(id)` would call chat
 * completions directly; both train the same way.)
 * Offline, on the local service; the fresh local model has never seen a tool, so it answers in
 * noise, and the reward here is a stand-in (examples/ai-sdk-agent.ts warm-starts an AI SDK agent
 * on `agent-chat` and trains it on a verifiable reward).
 * Run: npx tsx examples/ai-sdk.ts
 */
import { rm } from 'node:fs/promises';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, tool } from 'ai';
import { choicesOf, gatherTrajectoryGroups, LocalBackend, TrainableModel, type TrajectoryInput } from 'policyloop';
import { z } from 'zod';

/** The mean logprob of the sampled tokens. */
function meanLogprob(trajectory: TrajectoryInput): number {
  const logprobs = choicesOf(trajectory).flatMap((choice) =>
    (choice.logprobs?.content ?? []).map((token) => token.logprob),
  );
  return logprobs.reduce((sum, value) => sum + value, 0) / Math.max(1, logprobs.length);
}

const dataDir = '.policyloop/ai-sdk';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
// small-chat reads 512 tokens: room for a short system prompt, one tool schema and a reply.
const model = new TrainableModel({ project: 'examples', name: 'ai-sdk-agent', baseModel: 'policyloop/small-chat' });
await model.register(backend);

const provider = createOpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
const llm = provider(model.inferenceName()); // the default: the Responses API, translated
const tools = {
  weather: tool({
    description: 'Weather of a city',
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => `${city}: 9C`,
  }),
};

const groups = await gatherTrajectoryGroups(
  [{ city: 'Oslo' }, { city: 'Lima' }],
  async ({ city }) => {
    await generateText({
      model: llm,
      system: 'Be brief.',
      prompt: `Weather in ${city}?`,
      tools,
      stopWhen: stepCountIs(3),
      maxOutputTokens: 16,
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
