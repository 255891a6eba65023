/**
 * SFT then RL: teach the answer format with a few supervised rows, then improve with RL, then
 * keep only the latest and the best checkpoint by `val/reward`.
 * Run: npx tsx examples/sft-then-rl.ts
 */
import { exactMatch } from '../src/rewards/index.js';
import { gatherTrajectoryGroups } from '../src/rollout/index.js';
import type { TrajectoryGroup } from '../src/schema/index.js';
import { LocalBackend, TrainableModel } from '../src/training/index.js';

interface Scenario {
  a: number;
  b: number;
}
const question = ({ a, b }: Scenario) => `${a}+${b}=`;
const answer = ({ a, b }: Scenario) => String(a + b);
const scenarios: Scenario[] = Array.from({ length: 12 }, (_, index) => ({ a: index % 4, b: (index * 7) % 5 }));
const [train, val] = [scenarios.slice(0, 8), scenarios.slice(8)];

const backend = await LocalBackend.start({ dataDir: '.policyloop/sft-then-rl' });
const model = await new TrainableModel({ project: 'examples', name: 'adder', baseModel: 'policyloop/tiny-chat' }).register(backend);
const client = model.openai();

const sample = (items: Scenario[], groupSize: number): Promise<TrajectoryGroup[]> =>
  gatherTrajectoryGroups(
    items,
    async (scenario) => {
      await client.chat.completions.create({ model: model.inferenceName(), messages: [{ role: 'user', content: question(scenario) }], max_tokens: 4 });
    },
    { groupSize, reward: exactMatch<Scenario>(answer), policyVersion: () => model.getStep() },
  );

// 1. SFT from {messages} rows (trajectories work too); the local backend writes them as JSONL.
await model.trainSFT(
  train.map((scenario) => ({ messages: [{ role: 'user' as const, content: question(scenario) }, { role: 'assistant' as const, content: answer(scenario) }] })),
  { batchSize: 4 },
);
console.log('after SFT, val/reward', (await model.log(await sample(val, 2), { split: 'val' }))['val/reward']);

// 2. RL steps, evaluating after each one.
for (let i = 0; i < 3; i += 1) {
  const { step } = await model.train(await sample(train, 8));
  const row = await model.log(await sample(val, 2), { split: 'val' });
  console.log(`step ${step}: val/reward ${row['val/reward']}`);
}

// 3. Retention: keep the latest checkpoint and the best one by val/reward.
console.log(await model.pruneCheckpoints({ keepBestBy: 'val/reward', keepLatest: true }));
await model.close();
await backend.close();
