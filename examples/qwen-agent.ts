/**
 * An agent on a Qwen3 model that learns by RL, offline: a tiny random-weight Qwen3
 * (`writeTinyQwen3`: width 64, 2 layers, the REAL Qwen3 tokenizer, chat template and 151,936-token
 * vocabulary) is served by the local engine and trained by LoRA. The system prompt says where the
 * user lives (Bern); the user asks "What's the weather at home?" (4 phrasings) through the OpenAI
 * client with a `weather` tool (`tasks/weather-call.ts`). Qwen3's template renders the tool into
 * the prompt and the service parses the model's `<tool_call>` text back into `tool_calls`.
 * Reward: 0.5 for calling `weather`, plus 0.5 when its city is the user's home.
 *
 * 1. Greedy evaluation of the random model (reward 0: it writes noise).
 * 2. An SFT warm start that teaches the call's format, not the answer: its demonstrations call
 *    `weather` for Paris or Bern in turn, whatever the question (LoRA rank 64 = the width, on every
 *    linear layer). The model then samples `Paris` mostly and `Bern` now and then.
 * 3. RL, synchronous: each step rolls out the 4 questions x 4 at temperature 0.05 with fixed seeds
 *    and trains one step on the groups (learning rate 2e-3), printing the rollouts' cities and
 *    mean reward and the job's `kl_div` (about 0: the service's logprobs are the model's own at
 *    every temperature). RL learns which city the user wants, from the reward alone.
 *
 * The reward before and after RL is measured on replies no job trains on: 8 a question at the
 * rollout temperature with seeds 9000 up, and the greedy ones. Why temperature 0.05 and why two
 * cities (docs/engine.md, "An agent on the tiny Qwen3 that learns by RL"): this model's tied random
 * head bounds its logits to about ±1.3, so the 23-token call survives sampling only at about 0.05,
 * and at that temperature no hidden state puts much probability on more than two cities.
 * Measured curve: docs/engine.md (Real models): 0.484 after the warm start, 0.875 after 8 RL steps.
 * Run: npx tsx examples/qwen-agent.ts (POLICYLOOP_EXAMPLE_STEPS=<n> for n RL steps, default 8;
 * POLICYLOOP_WARM_EPOCHS=<n> for n SFT steps, default 50).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { gatherTrajectoryGroups, LocalBackend, TrainableModel, type TrajectoryGroup } from 'policyloop';
import { writeTinyQwen3 } from 'policyloop/testing';
import {
  evaluateWeather,
  formatLabels,
  HELD_OUT_WEATHER_QUESTIONS,
  replyLabel,
  weatherAgent,
  weatherDemonstrations,
  weatherReward,
  weatherScenarios,
} from './tasks/weather-call.js';

const wholeNumber = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`Expected ${name} to be a whole number, got ${process.env[name]}`);
  return value;
};
const steps = wholeNumber('POLICYLOOP_EXAMPLE_STEPS', 8);
const warmEpochs = wholeNumber('POLICYLOOP_WARM_EPOCHS', 50);
const temperature = 0.05;
const started = performance.now();
const elapsed = (): string => `${((performance.now() - started) / 1000).toFixed(0)} s`;

const dataDir = path.resolve('.policyloop/qwen-agent');
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const modelDir = await writeTinyQwen3(path.join(dataDir, 'tiny-qwen3')); // seed 0: the same weights every run
const backend = await LocalBackend.start({ dataDir, models: [modelDir] });
const model = new TrainableModel({ project: 'examples', name: 'qwen-weather', baseModel: modelDir });
await model.register(backend);
const client = model.openai();
const scenarios = weatherScenarios();

/** The reward on replies no job trains on: 8 sampled a question (seeds 9000 up), and the greedy ones. */
const evaluate = async (): Promise<string> => {
  const sampled = await evaluateWeather(client, model.inferenceName(), scenarios, { temperature, samples: 8 });
  const greedy = await evaluateWeather(client, model.inferenceName(), scenarios, { temperature: 0 });
  return `sampled reward ${sampled.reward.toFixed(3)} (${formatLabels(sampled.labels)}), greedy reward ${greedy.reward.toFixed(3)}`;
};
const random = await evaluateWeather(client, model.inferenceName(), scenarios, { temperature: 0 });
console.log(`random Qwen3: greedy reward ${random.reward.toFixed(3)}, ${elapsed()}`);

// 1. SFT warm start: `warmEpochs` passes over the 4 questions, one optimizer step each, the city
// alternating between Paris and Bern whatever the question: the format, not the answer.
if (warmEpochs > 0) {
  const warm = await model.trainSFT(weatherDemonstrations(scenarios, warmEpochs), {
    batchSize: scenarios.length,
    learningRate: 5e-3,
    // Rank 64 = the model's width: the adapter can change every linear layer in full (rank 8 had
    // not learned the call's JSON after 40 passes).
    config: { lora_rank: 64, lora_alpha: 64 },
  });
  console.log(`warm start: SFT x ${warmEpochs} (step ${warm.step}): ${await evaluate()}, ${elapsed()}`);
}

// 2. RL: 4 samples per question at temperature 0.05, seeded by step and sample.
const rollOut = (step: number, labels: Record<string, number>): Promise<TrajectoryGroup[]> =>
  gatherTrajectoryGroups(
    scenarios,
    async (scenario, { index }) => {
      const message = await weatherAgent(client, model.inferenceName(), scenario, {
        temperature,
        seed: step * 100 + index,
      });
      labels[replyLabel(message)] = (labels[replyLabel(message)] ?? 0) + 1;
      return { reward: weatherReward(message) };
    },
    { groupSize: 4, concurrency: 16, sampledStep: () => model.getStep() },
  );
for (let index = 1; index <= steps; index += 1) {
  const labels: Record<string, number> = {};
  const groups = await rollOut(index, labels);
  const rewards = groups.flatMap((group) => group.trajectories.map((trajectory) => trajectory.reward));
  const mean = rewards.reduce((sum, reward) => sum + reward, 0) / rewards.length;
  // A batch whose groups all have equal rewards carries no gradient (model.train refuses it).
  const flat = groups.every((group) => group.trajectories.every((t) => t.reward === group.trajectories[0]?.reward));
  // The service returns the model's own (temperature-1) logprobs at temperature 0.05 too, which the
  // trainer recomputes: each job starts at importance ratio 1 (`kl_div` ~1e-7).
  const result = flat ? undefined : await model.train(groups, { learningRate: 2e-3 });
  const kl = result === undefined ? '' : `, kl_div ${(result.metrics['train/kl_div'] ?? Number.NaN).toExponential(1)}`;
  console.log(
    `RL step ${index}/${steps}: rollout reward ${mean.toFixed(3)} (${formatLabels(labels)})${flat ? ' (no gradient: skipped)' : ''}${kl}, ${elapsed()}`,
  );
}
const heldOut = await evaluateWeather(client, model.inferenceName(), weatherScenarios(HELD_OUT_WEATHER_QUESTIONS), {
  temperature,
  samples: 8,
});
console.log(
  `after ${steps} RL steps: ${await evaluate()}; questions never trained on: sampled reward ${heldOut.reward.toFixed(3)} (${formatLabels(heldOut.labels)}), ${elapsed()}`,
);
await model.close();
await backend.close();
