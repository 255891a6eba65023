/**
 * An agent on a Qwen3 model that learns, offline: a tiny random-weight Qwen3 (`writeTinyQwen3`:
 * width 64, 2 layers, the REAL Qwen3 tokenizer, chat template and 151,936-token vocabulary) is
 * served by the local engine and trained by LoRA. The agent asks "Weather in <city>?" through the
 * OpenAI client with a `weather` tool (`tasks/weather-call.ts`); Qwen3's template renders the
 * tool into the prompt and the service parses the model's `<tool_call>` text back into
 * `tool_calls`. Reward: 0.5 for calling `weather`, plus 0.5 for the asked city as its argument.
 *
 * 1. Greedy evaluation of the random model (reward 0: it writes noise).
 * 2. A short SFT warm start on one demonstration per city (LoRA rank 64 = the width, on every
 *    linear layer): the model learns to write the call, with one city for all questions.
 * 3. RL (for the city), synchronous: each step rolls out 4 cities x 4 at temperature 0.05 with
 *    fixed seeds and trains one step on the groups (learning rate 1e-3), printing the rollouts'
 *    mean reward, the job's `kl_div` (about 0: the service's logprobs are the model's own at every
 *    temperature) and the greedy reward. Why 0.05 (docs/engine.md, "An agent on the
 *    tiny Qwen3 that learns"): this model's logits span about ±1.3, so temperature 1 samples
 *    almost uniformly over 151,936 ids.
 *
 * Measured curve: docs/engine.md (Real models): 0 for the random model, 0.625 after the warm
 * start (every reply calls `weather`, with one city for all), 0.625 through 12 RL steps: RL never
 * samples the asked city, so it can only make the sampled calls more reliable ("Does RL add to
 * it?" there). A larger embedding scale (`writeTinyQwen3`'s `embeddingStd`), a wider model, a
 * higher temperature, a higher learning rate or a 60-pass warm start did not change that ("Is it
 * the logit range?" there): the warm start learns one city for all questions, not to copy the
 * asked one.
 * Run: npx tsx examples/qwen-agent.ts (POLICYLOOP_EXAMPLE_STEPS=<n> for n RL steps, default 8;
 * POLICYLOOP_WARM_EPOCHS=<n> for n SFT steps, default 30).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { gatherTrajectoryGroups, LocalBackend, TrainableModel, type TrajectoryGroup } from 'policyloop';
import { writeTinyQwen3 } from 'policyloop/testing';
import { weatherAgent, weatherDemonstration, weatherReward, weatherScenarios } from './tasks/weather-call.js';

const wholeNumber = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`Expected ${name} to be a whole number, got ${process.env[name]}`);
  return value;
};
const steps = wholeNumber('POLICYLOOP_EXAMPLE_STEPS', 8);
const warmEpochs = wholeNumber('POLICYLOOP_WARM_EPOCHS', 30);
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

/** Mean reward of the greedy replies (temperature 0: the same text every run). */
const greedy = async (): Promise<number> => {
  const rewards = await Promise.all(
    scenarios.map(async (scenario) =>
      weatherReward(await weatherAgent(client, model.inferenceName(), scenario, { temperature: 0 }), scenario),
    ),
  );
  return rewards.reduce((sum, reward) => sum + reward, 0) / rewards.length;
};
console.log(`random Qwen3: greedy reward ${(await greedy()).toFixed(3)}, ${elapsed()}`);

// 1. SFT warm start: `warmEpochs` passes over one demonstration per city, one optimizer step each.
const demonstrations = scenarios.map(weatherDemonstration);
if (warmEpochs > 0) {
  const warm = await model.trainSFT(Array.from({ length: warmEpochs }, () => demonstrations).flat(), {
    batchSize: demonstrations.length,
    learningRate: 5e-3,
    // Rank 64 = the model's width: the adapter can change every linear layer in full (rank 8 had
    // not learned the call's JSON after 50 passes; rank 64 writes it after 30).
    config: { lora_rank: 64, lora_alpha: 64 },
  });
  console.log(
    `warm start: SFT x ${warmEpochs} (step ${warm.step}): greedy reward ${(await greedy()).toFixed(3)}, ${elapsed()}`,
  );
}

// 2. RL: 4 samples per city at temperature 0.05, seeded by step and sample.
const rollOut = (step: number): Promise<TrajectoryGroup[]> =>
  gatherTrajectoryGroups(
    scenarios,
    async (scenario, { index }) => {
      const message = await weatherAgent(client, model.inferenceName(), scenario, {
        temperature: 0.05,
        seed: step * 100 + index,
      });
      return { reward: weatherReward(message, scenario) };
    },
    { groupSize: 4, concurrency: 16, policyVersion: () => model.getStep() },
  );
for (let index = 1; index <= steps; index += 1) {
  const groups = await rollOut(index);
  const rewards = groups.flatMap((group) => group.trajectories.map((trajectory) => trajectory.reward));
  const mean = rewards.reduce((sum, reward) => sum + reward, 0) / rewards.length;
  // A batch whose groups all have equal rewards carries no gradient (model.train refuses it).
  const flat = groups.every((group) => group.trajectories.every((t) => t.reward === group.trajectories[0]?.reward));
  // The service returns the model's own (temperature-1) logprobs at temperature 0.05 too, which the
  // trainer recomputes: each job starts at importance ratio 1 (`kl_div` ~1e-6). 1e-3 keeps the warm
  // start's calls; 2e-3 and 5e-3 broke them within a few steps (docs/engine.md).
  const result = flat ? undefined : await model.train(groups, { learningRate: 1e-3 });
  const kl = result === undefined ? '' : `, kl_div ${(result.metrics['train/kl_div'] ?? Number.NaN).toExponential(1)}`;
  console.log(
    `RL step ${index}/${steps}: rollout reward ${mean.toFixed(3)}${flat ? ' (no gradient: skipped)' : ''}${kl}, greedy reward ${(await greedy()).toFixed(3)}, ${elapsed()}`,
  );
}
console.log(`after ${steps} RL steps: greedy reward ${(await greedy()).toFixed(3)}, ${elapsed()}`);
await model.close();
await backend.close();
