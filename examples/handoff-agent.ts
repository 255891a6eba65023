/**
 * An OpenAI Agents SDK agent that hands off, trained: a triage agent hands seat requests to a seat
 * agent and questions to an FAQ agent, each with its own tool (the task and its agents are in
 * `tasks/seat-booking.ts`; none of them names a model). One `Runner` with the SDK's default model,
 * `OpenAIResponsesModel` (the Responses API), over a client on `model.fetch()` runs them all on
 * `policyloop/agent-chat`, on the local service: the recording fetch turns each Responses call into
 * one chat completion (what the training API serves) and back. The specialist's turns land in `additional_histories`, and every reader
 * (`toolCallsOf`, `finalAssistantText`) reads them.
 *
 * 1. A warm start: one demonstration per scenario (the same agents run against an oracle `fetch`,
 *    recorded), given to `trainSFT` as trajectories: each run is two rows, the triage agent's and
 *    the specialist's, each with its own system prompt and tools. `POLICYLOOP_WARM_EPOCHS` passes.
 * 2. RL with `RLTrainer`: 8 scenarios x 8 rollouts a step, sampling one step ahead
 *    (`maxStepsOffPolicy: 1`), the learning rate decaying linearly, a rollout that throws costing
 *    that rollout only. Each step prints the mean success of its rollouts.
 *
 * Measured curve: docs/recipes.md ("A handoff agent").
 * Run: npx tsx examples/handoff-agent.ts (POLICYLOOP_EXAMPLE_STEPS=<n> for n RL steps, default 15;
 * POLICYLOOP_WARM_EPOCHS=<n> for the warm start's passes, default 60; POLICYLOOP_EXAMPLE_SCENARIOS=<n>
 * for the number of scenarios, default 8).
 */
import { rm } from 'node:fs/promises';
import OpenAI from 'openai';
import { LocalBackend, linearDecay, RLTrainer, TrainableModel } from 'policyloop';
import {
  type BookingScenario,
  bookingReward,
  bookingRunner,
  bookingScenarios,
  responsesDemonstration,
  runBooking,
} from './tasks/seat-booking.js';

function wholeNumber(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`Expected ${name} to be a whole number, got ${process.env[name]}`);
  return value;
}
const steps = wholeNumber('POLICYLOOP_EXAMPLE_STEPS', 15);
const epochs = wholeNumber('POLICYLOOP_WARM_EPOCHS', 60);
const scenarioCount = wholeNumber('POLICYLOOP_EXAMPLE_SCENARIOS', 8);
const started = performance.now();
const elapsed = (): string => `${((performance.now() - started) / 1000).toFixed(0)} s`;

const dataDir = '.policyloop/handoff-agent';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'handoff', baseModel: 'policyloop/agent-chat' });
await model.register(backend);
const scenarios = bookingScenarios(scenarioCount);

// 1. Warm start: the demonstrations are recorded runs (on the Responses API, as the rollouts);
// trainSFT makes a row of each conversation.
const demonstrations = await Promise.all(scenarios.map(responsesDemonstration));
const warm = await model.trainSFT(Array.from({ length: epochs }, () => demonstrations).flat(), {
  batchSize: 2 * demonstrations.length,
});
console.log(`warm start: SFT on ${demonstrations.length} handoff runs x ${epochs} (step ${warm.step}), ${elapsed()}`);

// 2. RL. `model.inferenceName()` is pinned, inside the trainer, to the step each rollout samples.
const client = new OpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
const runner = bookingRunner(client, model.inferenceName(), { api: 'responses' });
const maxSteps = warm.step + steps;
const trainer = new RLTrainer<BookingScenario>({
  model,
  scenarios,
  rollout: async (scenario) => {
    await runBooking(runner, scenario);
  },
  reward: bookingReward,
  groupSize: 8,
  groupsPerStep: scenarios.length,
  maxSteps,
  maxStepsOffPolicy: 1,
  learningRate: linearDecay({ initial: 5e-3, final: 1.5e-3 }),
  gather: { concurrency: 32 },
  progress: false,
});
const value = (metrics: Readonly<Record<string, number>>, name: string): string =>
  (metrics[name] ?? Number.NaN).toFixed(3);
trainer.on('step:end', ({ step, sampledStep, metrics }) => {
  console.log(
    `RL step ${step - warm.step + 1}/${steps} (step ${step}, sampled at ${sampledStep}): ` +
      `success ${value(metrics, 'train/success')}, handoff ${value(metrics, 'train/handoff')}, ` +
      `right call ${value(metrics, 'train/right_call')}, failed rollouts ${metrics['rollouts/failed']}, ${elapsed()}`,
  );
});
const summary = await trainer.run();
console.log(
  `trained to step ${summary.step} (${summary.totals.steps} RL steps, ${summary.totals.failedRollouts} failed rollouts, ` +
    `${summary.totals.skippedBatches} skipped batches), ${elapsed()}`,
);
await model.close();
await backend.close();
