/**
 * SFT then RL: teach the task's format with supervised rows, improve with RL, then keep only the
 * latest and the best checkpoint by `val/reward`. Uses the demo's task (uppercase a word), with a
 * shorter run than `npm run demo`.
 * Run: npx tsx examples/sft-then-rl.ts
 */
import { rm } from 'node:fs/promises';
import { finalAssistantText, gatherTrajectoryGroups, LocalBackend, TrainableModel } from 'policyloop';
import type { TrajectoryGroup } from 'policyloop';
import { makeScenarios, reward, sftRows } from './tasks/uppercase.js';
import type { UppercaseScenario } from './tasks/uppercase.js';

const dataDir = '.policyloop/sft-then-rl';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run (get-or-create would resume)
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'uppercase', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);
const client = model.openai();
let step = await model.getStep();

const sample = (scenarios: UppercaseScenario[], groupSize: number): Promise<TrajectoryGroup[]> =>
  gatherTrajectoryGroups(
    scenarios,
    async (scenario) => {
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [...scenario.messages],
        max_tokens: 8,
      });
    },
    {
      groupSize,
      concurrency: 64,
      reward: (trajectory, scenario) => reward(scenario, finalAssistantText(trajectory)),
      sampledStep: () => step,
    },
  );
const validate = async (): Promise<number> => {
  const row = await model.log({ groups: await sample(makeScenarios(99, 32), 1), split: 'val', step });
  return row['val/reward'] as number;
};

// 1. SFT from {messages} rows (trajectories work too); the local backend writes them as JSONL.
const examples = sftRows(makeScenarios(1, 256));
({ step } = await model.trainSFT([...examples, ...examples], { batchSize: 32 }));
console.log(`after SFT (step ${step}): val/reward ${(await validate()).toFixed(3)}`);

// 2. RL steps, each followed by validation (the learning rate is the backend's default).
for (let i = 1; i <= 20; i += 1) {
  ({ step } = await model.train(await sample(makeScenarios(1_000 + i, 16), 8)));
  console.log(`step ${step}: val/reward ${(await validate()).toFixed(3)}`);
}

// 3. Retention: keep the latest checkpoint and the best one by val/reward; delete the others.
const { kept, deleted } = await model.pruneCheckpoints({ keepBestBy: 'val/reward', keepLatest: true });
console.log(`kept steps ${kept.join(', ')}; deleted ${deleted.length} checkpoints`);
await model.close();
await backend.close();
