/**
 * Quickstart: a rollout, a reward, and a few RL steps against the local service (offline).
 * The task: answer in capital letters. The reward (the share of capitals in the reply) is
 * verifiable, and a fresh tiny model climbs it within a few steps.
 * Run: npx tsx examples/quickstart.ts
 */
import { rm } from 'node:fs/promises';
import { finalAssistantText, gatherTrajectoryGroups, LocalBackend, TrainableModel } from 'policyloop';
import type { RewardFn } from 'policyloop';

const scenarios = ['cat', 'dog', 'sun', 'map', 'owl', 'bee', 'fig', 'ink'];

/** The share of the reply's characters that are capital letters A-Z. */
const capitals: RewardFn<string> = (trajectory) => {
  const text = finalAssistantText(trajectory);
  return text.length === 0 ? 0 : (text.match(/[A-Z]/g)?.length ?? 0) / text.length;
};

// The local service starts in-process; its store, checkpoints and history go under dataDir.
const dataDir = '.policyloop/quickstart';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run (get-or-create would resume)
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'quickstart', name: 'capitals', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);
const client = model.openai(); // logprobs on; every call inside a rollout is captured

for (let i = 0; i < 12; i += 1) {
  const groups = await gatherTrajectoryGroups(
    scenarios,
    async (word) => {
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'user', content: word }],
        max_tokens: 8,
      });
    },
    { groupSize: 8, concurrency: 64, reward: capitals, policyVersion: () => model.getStep() },
  );
  const row = await model.log(groups, { split: 'train', send: false }); // train() would log them too
  const { step } = await model.train(groups, { log: false });
  console.log(`step ${step}: mean reward of the groups it trained on ${Number(row['train/reward']).toFixed(3)}`);
}

console.log(`history: ${model.files.history}`);
await model.close();
await backend.close();
