/**
 * Quickstart: a rollout, a reward, and a few RL steps against the local service (offline).
 * The task: answer in capital letters. The reward (the share of capitals in the reply) is
 * verifiable, and a fresh tiny model climbs it within a few steps.
 * Run: npx tsx examples/quickstart.ts
 */
import { rm } from 'node:fs/promises';
import { finalAssistantText, LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
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

const trainer = new RLTrainer({
  model,
  scenarios,
  // Inside the trainer, requests for model.inferenceName() go to the step the rollout samples from.
  rollout: async (word: string) => {
    await client.chat.completions.create({
      model: model.inferenceName(),
      messages: [{ role: 'user', content: word }],
      max_tokens: 8,
    });
  },
  reward: capitals,
  groupSize: 8,
  groupsPerStep: 8,
  maxSteps: 12,
  maxStepsOffPolicy: 1, // the next step's rollouts run while a step trains
  gather: { concurrency: 64 },
  progress: false, // this script prints its own line per step
});
trainer.on('step:end', ({ step, metrics }) => {
  const reward = metrics['train/reward'] ?? Number.NaN;
  console.log(`step ${step + 1}: mean reward of the groups it trained on ${reward.toFixed(3)}`);
});
const summary = await trainer.run();

console.log(`trained to step ${summary.step} (${summary.totals.rollouts} rollouts, ${summary.totals.tokens} tokens)`);
console.log(`history: ${model.files.history}`);
await model.close();
await backend.close();
