/**
 * An agent on the Anthropic SDK trained unchanged: a `messages.create` tool loop, as written for
 * Claude. The client gets `model.anthropicBaseURL` and `model.fetch()`, a recording fetch that turns
 * each Messages API call into one chat completion (what the training API serves) and the answer
 * back into a Message (`tool_use` blocks included), so every turn of the loop lands in the
 * rollout's trajectory as a Choice with its logprobs. Offline, on the local service; the fresh
 * local model has never seen a tool, so it answers in noise, and the reward here is a stand-in.
 * Run: npx tsx examples/anthropic.ts
 */
import { rm } from 'node:fs/promises';
import Anthropic from '@anthropic-ai/sdk';
import { choicesOf, gatherTrajectoryGroups, LocalBackend, TrainableModel, type TrajectoryInput } from 'policyloop';

/** The mean logprob of the sampled tokens. */
function meanLogprob(trajectory: TrajectoryInput): number {
  const logprobs = choicesOf(trajectory).flatMap((choice) =>
    (choice.logprobs?.content ?? []).map((token) => token.logprob),
  );
  return logprobs.reduce((sum, value) => sum + value, 0) / Math.max(1, logprobs.length);
}

const dataDir = '.policyloop/anthropic';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
// small-chat reads 512 tokens: room for a short system prompt, one tool schema and a reply.
const model = new TrainableModel({ project: 'examples', name: 'anthropic-agent', baseModel: 'policyloop/small-chat' });
await model.register(backend);

const anthropic = new Anthropic({
  baseURL: model.anthropicBaseURL, // the SDK appends /v1/messages
  apiKey: model.inferenceApiKey,
  fetch: model.fetch(),
});
const tools: Anthropic.Tool[] = [
  {
    name: 'weather',
    description: 'Weather of a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
];
/** Runs the tool calls of a message: a `tool_result` block for each `tool_use` block. */
function runTools(content: Anthropic.ContentBlock[]): Anthropic.ToolResultBlockParam[] {
  return content.flatMap((block) =>
    block.type === 'tool_use'
      ? [
          {
            type: 'tool_result' as const,
            tool_use_id: block.id,
            content: `${(block.input as { city?: string }).city}: 9C`,
          },
        ]
      : [],
  );
}

const groups = await gatherTrajectoryGroups(
  [{ city: 'Oslo' }, { city: 'Lima' }],
  async ({ city }) => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: `Weather in ${city}?` }];
    for (let turn = 0; turn < 3; turn += 1) {
      const message = await anthropic.messages.create({
        model: model.inferenceName(),
        system: 'Be brief.',
        max_tokens: 16,
        tools,
        messages,
      });
      messages.push({ role: 'assistant', content: message.content });
      if (message.stop_reason !== 'tool_use') break;
      messages.push({ role: 'user', content: runTools(message.content) });
    }
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
