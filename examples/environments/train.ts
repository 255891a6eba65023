/**
 * Trains a model on an environment with `RLTrainer`: the environment gives the tasks (its dataset,
 * epoch after epoch), the rollout (its default agent loop, with its tools), the rubric and the
 * validation tasks (its evalDataset, at the start and every 10 steps). Every rubric function's
 * mean is in each step's history row (`train/characters`, `train/exact`, ...).
 * Trained on its own (no argument), the uppercase environment first gets the demo's SFT warm start
 * (256 demonstrations, 2 epochs), so that RL starts from a model that sometimes answers right; the
 * script ends with the `policyloop eval` command that compares the base model and the trained one
 * in one table (pass@k of each).
 * Run: npx tsx examples/environments/train.ts [environment] [base model]
 *   environment: a file or package, loaded with loadEnvironment (default: ./uppercase.ts, imported)
 *   base model:  default policyloop/tiny-chat (policyloop/agent-chat fits tools and longer prompts)
 *   POLICYLOOP_EXAMPLE_STEPS=<n> for n RL steps (default 60 after the warm start, else 30).
 */
import { rm } from 'node:fs/promises';
import { LocalBackend, loadEnvironment, NoLearningSignalError, RLTrainer, TrainableModel } from 'policyloop';
import type { Environment } from 'policyloop';
import { makeScenarios, sftRows } from '../tasks/uppercase.js';
import uppercase from './uppercase.js';

const [id, baseModel = 'policyloop/tiny-chat'] = process.argv.slice(2);
const steps = Number(process.env['POLICYLOOP_EXAMPLE_STEPS'] ?? (id === undefined ? 60 : 30));
if (!Number.isInteger(steps) || steps < 1) {
  throw new Error(
    `Expected POLICYLOOP_EXAMPLE_STEPS to be a whole number, got ${process.env['POLICYLOOP_EXAMPLE_STEPS']}`,
  );
}

/** The reward, each rubric function's mean and the loop's turns of one split: `reward 0.412, characters 0.312, ...`. */
function rubricLine<T>(environment: Environment<T>, metrics: Readonly<Record<string, number>>, split: string): string {
  const rubric = typeof environment.spec.reward === 'object' ? Object.keys(environment.spec.reward) : [];
  return ['reward', ...rubric, 'num_turns', 'tool_calls']
    .filter((name) => metrics[`${split}/${name}`] !== undefined)
    .map((name) => `${name} ${metrics[`${split}/${name}`]?.toFixed(3)}`)
    .join(', ');
}

async function train<T>(environment: Environment<T>, warmStart: boolean): Promise<void> {
  const dataDir = '.policyloop/environments';
  await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
  const backend = await LocalBackend.start({ dataDir });
  const model = new TrainableModel({ project: 'environments', name: environment.name, baseModel });
  await model.register(backend);
  let start = 0;
  if (warmStart) {
    // The demo's warm start: demonstrations of the task, so that RL has right answers to reinforce.
    const rows = [...sftRows(makeScenarios(1, 256)), ...sftRows(makeScenarios(1, 256))];
    ({ step: start } = await model.trainSFT(rows, { batchSize: 32, learningRate: 5e-3 }));
    console.log(`SFT warm start: step ${start}`);
  }
  const trainer = new RLTrainer({
    model,
    environment,
    groupSize: 8,
    // The demo's recipe after a warm start (16 words a step); 4 otherwise (tool loops are longer).
    groupsPerStep: warmStart ? 16 : 4,
    maxSteps: start + steps,
    progress: false,
  });
  trainer.on('validation:end', ({ step, metrics }) =>
    console.log(`validation at step ${step}: ${rubricLine(environment, metrics, 'val')}`),
  );
  trainer.on('step:end', ({ step, metrics }) =>
    console.log(`step ${step + 1}: ${rubricLine(environment, metrics, 'train')}`),
  );
  try {
    const summary = await trainer.run();
    console.log(`trained ${environment.name} to step ${summary.step}; history in ${model.files.history}`);
    const file = id ?? 'examples/environments/uppercase.ts';
    console.log(
      `compare: npx policyloop eval ${file} --data-dir ${dataDir} --model ${baseModel} ` +
        `--model environments/${environment.name}:step${summary.step} -n 16 -r 4${warmStart ? ' --threshold 1' : ''}`,
    );
  } catch (error) {
    // An untrained model that never earns a reward gives nothing to learn from: say so and stop.
    if (!(error instanceof NoLearningSignalError)) throw error;
    console.log(`no learning signal on ${environment.name}: ${error.message}`);
  } finally {
    await model.close();
    await backend.close();
  }
}

// By name (a file path or an installed package), or the module imported as any other.
if (id === undefined) await train(uppercase, true);
else await train(await loadEnvironment(id), false);
