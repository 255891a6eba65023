/**
 * An AI SDK agent that learns: the model itself drives a `generateText` tool loop (it calls
 * `lookup`, the SDK runs the tool and calls the model again with the result, the model answers),
 * on the local service with `policyloop/agent-chat` (BPE, 4,096-token context). The task and its
 * agent are in `tasks/city-codes.ts`; the verifiable reward is below: success = `lookup` called
 * with the asked city and the final answer holding the city's code.
 *
 * The agent runs on the SDK's default, `provider(id)`: the Responses API, which the recording
 * `model.fetch()` turns into chat completions (what the training API serves) and back.
 *
 * 1. A short SFT warm start on 6 demonstrations, produced by running the same agent against an
 *    oracle `fetch`, so they look exactly like what the SDK sends. Short on purpose: the model
 *    learns the shape of a tool call, but success stays low.
 * 2. RL, synchronous: each step rolls out 6 cities x 16 through the recording `model.fetch()`,
 *    rewards them and trains one step on the groups, printing the mean success of all rollouts.
 *    A plain loop, to print each step as it goes; `RLTrainer` runs the same rollout function
 *    with sampling ahead (it pins `model.fetch()` requests to the step each rollout is stamped with).
 *
 * Measured curve: docs/integrations.md ("An AI SDK agent that learns").
 * Run: npx tsx examples/ai-sdk-agent.ts (POLICYLOOP_EXAMPLE_STEPS=<n> for n RL steps, default 60).
 */
import { rm } from 'node:fs/promises';
import { createOpenAI } from '@ai-sdk/openai';
import {
  combineRewards,
  finalAssistantText,
  gatherTrajectoryGroups,
  LocalBackend,
  toolCalledWith,
  TrainableModel,
  type Trajectory,
  type TrajectoryGroup,
} from 'policyloop';
import { type CityScenario, cityAgent, cityScenarios, responsesDemonstration } from './tasks/city-codes.js';

const steps = Number(process.env['POLICYLOOP_EXAMPLE_STEPS'] ?? 60);
if (!Number.isInteger(steps) || steps < 0)
  throw new Error(
    `Expected POLICYLOOP_EXAMPLE_STEPS to be a whole number, got ${process.env['POLICYLOOP_EXAMPLE_STEPS']}`,
  );
const started = performance.now();
const elapsed = (): string => `${((performance.now() - started) / 1000).toFixed(0)} s`;

const dataDir = '.policyloop/ai-sdk-agent';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'city-codes', baseModel: 'policyloop/agent-chat' });
await model.register(backend);
// `provider(id)`, the SDK's default: the Responses API, turned into chat completions and recorded
// by `model.fetch()` inside each rollout.
const provider = createOpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
const llm = provider(model.inferenceName());
const scenarios = cityScenarios(6);

// 1. SFT warm start: 30 passes over one demonstration per city, one optimizer step each. The
// demonstrations are made on the Responses API too, so they hold what the rollouts will send.
const demonstrations = await Promise.all(scenarios.map(responsesDemonstration));
const epochs = 30;
const warm = await model.trainSFT(Array.from({ length: epochs }, () => demonstrations).flat(), {
  batchSize: demonstrations.length,
});
console.log(`warm start: SFT on ${demonstrations.length} demonstrations x ${epochs} (step ${warm.step}), ${elapsed()}`);

// 2. RL: the model drives the agent; every call lands in the rollout's trajectory.
// The reward: `success` (lookup called with the city and the code in the final answer: 1, else 0)
// plus a quarter of `right_call` (the first half of the task, rewarded while the whole is rare).
const calledLookup = toolCalledWith<CityScenario>('lookup', (args, scenario) => {
  return (args as { city?: unknown } | null)?.city === scenario.city;
});
const reward = combineRewards<CityScenario>({
  success: async (trajectory, scenario) =>
    (await calledLookup(trajectory, scenario)) === 1 && finalAssistantText(trajectory).includes(scenario.code) ? 1 : 0,
  right_call: { fn: calledLookup, weight: 0.25 },
});
const rollOut = (): Promise<TrajectoryGroup[]> =>
  gatherTrajectoryGroups(
    scenarios,
    async (scenario: CityScenario) => {
      await cityAgent(llm, scenario);
    },
    {
      groupSize: 16,
      concurrency: 96,
      reward,
      sampledStep: () => model.getStep(),
    },
  );
const mean = (groups: readonly TrajectoryGroup[], value: (trajectory: Trajectory) => number): number => {
  const values = groups.flatMap((group) => group.trajectories.map(value));
  return values.reduce((sum, item) => sum + item, 0) / values.length;
};
const success = (trajectory: Trajectory): number => Number(trajectory.metrics['success']);
for (let index = 1; index <= steps; index += 1) {
  const groups = await rollOut();
  const rewards = `success ${mean(groups, success).toFixed(3)}, reward ${mean(groups, (t) => t.reward).toFixed(3)}`;
  // A batch whose groups all have equal rewards carries no gradient (model.train refuses it).
  const flat = groups.every((group) => group.trajectories.every((t) => t.reward === group.trajectories[0]?.reward));
  // The learning rate decays linearly from the engine's default 5e-3 to 1.5e-3: steadier late steps.
  if (!flat) await model.train(groups, { learningRate: 5e-3 * (1 - (0.7 * (index - 1)) / steps) });
  console.log(`RL step ${index}/${steps}: ${rewards}${flat ? ' (no gradient: skipped)' : ''}, ${elapsed()}`);
}
const final = await rollOut();
console.log(`after ${steps} RL steps: success ${mean(final, success).toFixed(3)}, ${elapsed()}`);
await model.close();
await backend.close();
