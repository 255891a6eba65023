/**
 * An OpenAI Agents SDK agent trained unchanged: its model is `OpenAIChatCompletionsModel` (chat
 * completions, which the training API serves) over an `openai` client whose `fetch` records, so
 * every model call of `run` lands in the rollout's trajectory. Tracing is off (it would export to
 * OpenAI). Offline, on the local service; the fresh local model answers in noise, and the reward
 * is a stand-in.
 * Run: npx tsx examples/openai-agents.ts
 */
import { rm } from 'node:fs/promises';
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { choicesOf, gatherTrajectoryGroups, LocalBackend, TrainableModel, type TrajectoryInput } from 'policyloop';
import { z } from 'zod';

/** The mean logprob of the sampled tokens. */
function meanLogprob(trajectory: TrajectoryInput): number {
  const logprobs = choicesOf(trajectory).flatMap((choice) =>
    (choice.logprobs?.content ?? []).map((token) => token.logprob),
  );
  return logprobs.reduce((sum, value) => sum + value, 0) / Math.max(1, logprobs.length);
}

const dataDir = '.policyloop/openai-agents';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
// small-chat reads 512 tokens: room for a short system prompt, one tool schema and a reply.
const model = new TrainableModel({ project: 'examples', name: 'agents-sdk-agent', baseModel: 'policyloop/small-chat' });
await model.register(backend);

setTracingDisabled(true);
const client = new OpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
const agent = new Agent({
  name: 'weather',
  instructions: 'Be brief.',
  model: new OpenAIChatCompletionsModel(client, model.inferenceName()),
  modelSettings: { maxTokens: 16 },
  tools: [
    tool({
      name: 'weather',
      description: 'Weather of a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => `${city}: 9C`,
    }),
  ],
});

const groups = await gatherTrajectoryGroups(
  [{ city: 'Oslo' }, { city: 'Lima' }],
  async ({ city }) => {
    await run(agent, `Weather in ${city}?`, { maxTurns: 3 });
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
