/**
 * An OpenAI Agents SDK agent trained unchanged, on the SDK's defaults: the agent names its model by
 * a string, and the SDK's default model (`OpenAIResponsesModel`) calls the Responses API through
 * the default client, here `model.openai()`, a recording client that turns each Responses call into
 * one chat completion (what the training API serves) and back. Every model call of `run` lands in
 * the rollout's trajectory. Tracing is off (it would export to OpenAI).
 * `setDefaultOpenAIClient` type-checks when your `openai` is the major your `@openai/agents` uses
 * (0.14: `openai` 6; 0.20 and later: `openai` 7); see docs/integrations.md. Offline, on the local service; the fresh local model answers in noise, and the reward
 * is a stand-in.
 * Run: npx tsx examples/openai-agents.ts
 */
import { rm } from 'node:fs/promises';
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, tool } from '@openai/agents';
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
setDefaultOpenAIClient(model.openai()); // before the first run: the default runner keeps its first client
const agent = new Agent({
  name: 'weather',
  instructions: 'Be brief.',
  model: model.inferenceName(),
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
