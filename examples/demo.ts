/**
 * The README's main job (`npm run demo`): a full loop against the local service, offline.
 * Starts the service in-process, registers a model on the tiny base policy, measures the held-out
 * `val/reward` of the base model, does a short SFT warm start, then runs RL steps on the
 * "uppercase this word" task (verifiable reward: the fraction of characters right), printing one
 * line per step and logging `val/reward` after each. The recipe is the engine's (docs/engine.md).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { finalAssistantText, gatherTrajectoryGroups, LocalBackend, TrainableModel } from 'policyloop';
import type { TrajectoryGroup } from 'policyloop';
import { makeScenarios, reward, sftRows } from './tasks/uppercase.js';
import type { UppercaseScenario } from './tasks/uppercase.js';

const RECIPE = {
  sftExamples: 256,
  sftEpochs: 2,
  sftBatchSize: 32,
  sftLearningRate: 5e-3,
  rlSteps: Number(process.env['DEMO_RL_STEPS'] ?? 60),
  promptsPerStep: 16,
  groupSize: 8,
  maxTokens: 8,
  valSize: 64,
  /** Stop RL early rather than overrun the 5-minute promise on a slow machine. */
  timeBudgetSeconds: 270,
};
const DATA_DIR = path.resolve(process.env['POLICYLOOP_DEMO_DIR'] ?? '.policyloop/demo');

const started = performance.now();
const seconds = (): string => ((performance.now() - started) / 1000).toFixed(1).padStart(6);
const format = (value: number | undefined): string => (value === undefined ? '  -  ' : value.toFixed(3));

await rm(DATA_DIR, { recursive: true, force: true }); // a fresh run every time
const backend = await LocalBackend.start({ dataDir: DATA_DIR });
// A failure prints one clear line and still shuts the service down (no stack dump for users).
process.on('uncaughtException', (error) => {
  console.error(`demo failed: ${error instanceof Error ? error.message : String(error)}`);
  void backend.close().finally(() => process.exit(1));
});
const model = new TrainableModel({ project: 'demo', name: 'uppercase', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);
console.log(`watch it train: ${await backend.dashboardURL()}`);
const client = model.openai();
let step = 0; // the policy version the rollouts sample from

/**
 * Samples `groupSize` completions per scenario at temperature 1. Every request has its own seed
 * (from `seedBase`, the scenario and the sample), so a run is reproducible and validation always
 * draws the same samples from a given policy.
 */
function sample(
  scenarios: readonly UppercaseScenario[],
  groupSize: number,
  seedBase: number,
): Promise<TrajectoryGroup[]> {
  return gatherTrajectoryGroups(
    scenarios,
    async (scenario, { groupIndex, index }) => {
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [...scenario.messages],
        max_tokens: RECIPE.maxTokens,
        temperature: 1,
        seed: seedBase + groupIndex * groupSize + index,
      });
    },
    {
      groupSize,
      concurrency: 128, // the engine batches concurrent requests into shared forward passes
      reward: (trajectory, scenario) => reward(scenario, finalAssistantText(trajectory)),
      sampledStep: () => step,
    },
  );
}

const valScenarios = makeScenarios(99, RECIPE.valSize);
async function validate(): Promise<number | undefined> {
  const row = await model.log({ groups: await sample(valScenarios, 1, 1_000), split: 'val', step });
  return row['val/reward'] as number | undefined;
}

console.log('policyloop demo: uppercase a word; reward = fraction of characters right');
console.log(
  ['step'.padStart(5), 'phase'.padEnd(5), 'train'.padStart(5), 'val'.padStart(5), 'time s'.padStart(6)].join('  '),
);
const line = (phase: string, train: number | undefined, val: number | undefined): void =>
  console.log(`${String(step).padStart(5)}  ${phase.padEnd(5)}  ${format(train)}  ${format(val)}  ${seconds()}`);

const baseVal = await validate();
line('base', undefined, baseVal);

const examples = makeScenarios(1, RECIPE.sftExamples);
const rows = Array.from({ length: RECIPE.sftEpochs }, () => sftRows(examples)).flat();
({ step } = await model.trainSFT(rows, {
  batchSize: RECIPE.sftBatchSize,
  learningRate: RECIPE.sftLearningRate,
}));
const sftVal = await validate();
line('sft', undefined, sftVal);

let lastVal = sftVal;
for (let index = 1; index <= RECIPE.rlSteps; index += 1) {
  if ((performance.now() - started) / 1000 > RECIPE.timeBudgetSeconds) {
    console.log(`time budget of ${RECIPE.timeBudgetSeconds} s reached: stopping RL early`);
    break;
  }
  const groups = await sample(makeScenarios(1_000 + index, RECIPE.promptsPerStep), RECIPE.groupSize, 1_000_000 * index);
  const trainReward = mean(groups.flatMap((group) => group.trajectories.map((trajectory) => trajectory.reward)));
  // The learning rate is the local backend's default: the engine's tuned value.
  ({ step } = await model.train(groups));
  lastVal = await validate();
  line('rl', trainReward, lastVal);
}

await model.close();
const gain = (lastVal ?? 0) - (sftVal ?? 0);
console.log(
  `\nval/reward: base ${format(baseVal)} -> after SFT ${format(sftVal)} -> after RL ${format(lastVal)} ` +
    `(RL adds ${gain.toFixed(3)}) in ${seconds().trim()} s`,
);
console.log(`history:     ${model.files.history}`);
console.log(`checkpoints: ${path.join(DATA_DIR, 'weights', model.id)} (latest: ${model.inferenceName()}:step${step})`);
console.log(
  `dashboard:   npx policyloop serve --data-dir ${path.relative(process.cwd(), DATA_DIR) || '.'} (then open the address it prints)`,
);
await backend.close();

function mean(values: readonly number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);
}
