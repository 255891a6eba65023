/**
 * Testing a training script without an engine: the script under test (a capitals quiz trained by
 * `RLTrainer`, with validation and checkpoint retention) runs unchanged against `ScriptedBackend`,
 * the real local service whose engine answers from a script and trains at once. What is checked
 * is the script's own logic: how many steps it trains, what it logs, which checkpoints it keeps.
 * Each step takes milliseconds, so such a test fits a unit-test suite.
 * Run: npx tsx examples/scripted-trainer.ts
 */
import assert from 'node:assert/strict';
import { type Backend, finalAssistantText, RLTrainer, TrainableModel } from 'policyloop';
import { ScriptedBackend } from 'policyloop/testing';

// ---- The training script under test (in a project, its own module, run against LocalBackend
// or HostedBackend; here it takes the backend as an argument so that a test can pass another).

interface Quiz {
  readonly country: string;
  readonly capital: string;
}

const CAPITALS: Record<string, string> = {
  France: 'Paris',
  Japan: 'Tokyo',
  Peru: 'Lima',
  Kenya: 'Nairobi',
  Chile: 'Santiago',
  Ghana: 'Accra',
  Nepal: 'Kathmandu',
  Cuba: 'Havana',
  Mali: 'Bamako',
  Laos: 'Vientiane',
};
const quizzes: Quiz[] = Object.entries(CAPITALS).map(([country, capital]) => ({ country, capital }));

/** Trains the quiz model to `maxSteps`: validation every 2 steps, keeping the best and the latest checkpoint. */
async function trainCapitals(backend: Backend, maxSteps: number) {
  const model = await new TrainableModel({
    project: 'capitals',
    name: 'quiz',
    baseModel: 'policyloop/tiny-chat',
  }).register(backend);
  const client = model.openai();
  const trainer = new RLTrainer<Quiz>({
    model,
    scenarios: quizzes.slice(0, 8),
    rollout: async (quiz) => {
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'user', content: `What is the capital of ${quiz.country}?` }],
        max_tokens: 8,
      });
    },
    reward: (trajectory, quiz) => (finalAssistantText(trajectory) === quiz.capital ? 1 : 0),
    groupSize: 4,
    groupsPerStep: 2,
    maxSteps,
    validation: { scenarios: quizzes.slice(8), every: 2, groupSize: 4 },
    keep: { best: true, latest: true },
    progress: false,
  });
  const rewards: number[] = [];
  trainer.on('step:end', ({ metrics }) => rewards.push(Number((metrics['train/reward'] ?? Number.NaN).toFixed(3))));
  const summary = await trainer.run();
  await model.close();
  return { model, summary, rewards };
}

// ---- The test.

// A "policy" that improves: at step s it gets min(s + 1, 3) of every 4 tries at a question right
// (`repeat` counts the tries at the same question), so every group has something to learn.
const backend = await ScriptedBackend.start({
  sample: ({ body, step, repeat }) => {
    const country = /capital of (\w+)/.exec(String(body.messages.at(-1)?.content))?.[1] ?? '';
    return repeat % 4 < Math.min(step + 1, 3) ? (CAPITALS[country] ?? '') : 'Lyon';
  },
});
const started = performance.now();
const { model, summary, rewards } = await trainCapitals(backend, 4);
const elapsed = performance.now() - started;

assert.equal(summary.step, 4);
assert.deepEqual(
  backend.trainedJobs.map((job) => job.step),
  [0, 1, 2, 3],
);
// The pipeline samples the batch of step s at step s - 1 (maxStepsOffPolicy 1, the default).
assert.deepEqual(rewards, [0.25, 0.25, 0.5, 0.75]);
const validation = (await model.history())
  .filter((row) => typeof row['val/reward'] === 'number')
  .map((row) => [row.training_step, Number(Number(row['val/reward']).toFixed(3))])
  .sort();
assert.deepEqual(validation, [
  [0, 0.25],
  [2, 0.75],
  [4, 0.75],
]);
// The best by val/reward (a tie goes to the later step) is the latest: one checkpoint is left.
const { client } = await backend.connect();
const kept = (await client.checkpoints.list(model.id)).data.map((checkpoint) => checkpoint.step);
assert.deepEqual(kept, [4]);
assert.equal(summary.bestStep, 4);
await backend.close();

console.log(`train/reward by step: ${rewards.map((reward) => reward.toFixed(2)).join(' ')}`);
console.log(`val/reward: ${validation.map(([step, reward]) => `step ${step} ${reward}`).join(', ')}`);
console.log(`kept checkpoints: ${kept.join(', ')}`);
console.log(`trained ${summary.totals.steps} steps on the scripted backend in ${Math.round(elapsed)} ms`);
