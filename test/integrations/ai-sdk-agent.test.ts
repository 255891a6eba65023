/**
 * The model itself drives an AI SDK tool loop, against the real local service: after a short SFT
 * warm start on demonstrations of the SDK's own requests, `policyloop/agent-chat` writes a
 * `lookup` call, the SDK runs the tool and calls the model again with the result, and every call
 * lands in the rollout's trajectory through `model.fetch()`.
 *
 * The rollouts decode greedily (temperature 0: every run writes the same tokens, and the service
 * still reports temperature-1 logprobs), and the reward is the rollout's position in its group,
 * so every group has reward variance whatever the model writes: this test is about the loop and
 * its recording; examples/ai-sdk-agent.ts shows the learning.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import type { LanguageModel } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cityAgent,
  type CityScenario,
  cityScenarios,
  demonstration,
  lookupResult,
} from '../../examples/tasks/city-codes.js';
import { gatherTrajectoryGroups, isChoice, LocalBackend, TrainableModel } from 'policyloop';
import type { Choice } from 'policyloop/schema';

let dataDir: string;
let backend: LocalBackend;
let model: TrainableModel;
let llm: LanguageModel;
const scenarios: CityScenario[] = cityScenarios(2);

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-ai-sdk-agent-'));
  backend = await LocalBackend.start({ dataDir });
  model = new TrainableModel({ project: 'integrations', name: 'city-codes', baseModel: 'policyloop/agent-chat' });
  await model.register(backend);
  const demonstrations = await Promise.all(scenarios.map(demonstration));
  const { step } = await model.trainSFT(Array.from({ length: 40 }, () => demonstrations).flat(), {
    batchSize: demonstrations.length,
    learningRate: 1e-2,
  });
  const provider = createOpenAI({
    baseURL: model.inferenceBaseURL,
    apiKey: model.inferenceApiKey,
    fetch: model.fetch(),
  });
  // Pinned to the warm-started step: the second test samples the same model after the first trained.
  llm = provider.chat(model.inferenceName(step));
}, 120_000);
afterAll(async () => {
  await model?.close();
  await backend?.close();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

describe('an AI SDK agent driven by the local model', () => {
  for (const streaming of [false, true]) {
    it(`calls the tool, gets its result and answers (${streaming ? 'streamText' : 'generateText'}), recorded, then trains`, async () => {
      const groups = await gatherTrajectoryGroups(
        scenarios,
        async (scenario, { index }) => {
          await cityAgent(llm, scenario, { temperature: 0, streaming });
          return { reward: index };
        },
        { groupSize: 2, concurrency: 4 },
      );
      for (const [groupIndex, group] of groups.entries()) {
        expect(group.exceptions ?? []).toEqual([]);
        for (const trajectory of group.trajectories) {
          const items = trajectory.messages_and_choices;
          const choiceAt = items.flatMap((item, at) => (isChoice(item) ? [at] : []));
          expect(choiceAt.length).toBeGreaterThanOrEqual(2);
          for (const at of choiceAt) expect((items[at] as Choice).logprobs?.content?.length ?? 0).toBeGreaterThan(0);
          expect(trajectory.additional_histories ?? []).toEqual([]);

          // The first Choice is the model's own call of `lookup`, with JSON arguments naming the
          // asked city (greedy after the warm start: each token at p > 0.95 in our runs).
          const [first, second] = choiceAt as [number, number];
          const call = (items[first] as Choice).message.tool_calls?.[0];
          expect(call?.type).toBe('function');
          if (call?.type !== 'function') throw new Error('unreachable');
          expect(call.function.name).toBe('lookup');
          const { city } = JSON.parse(call.function.arguments) as { city: unknown };
          expect(city).toBe(scenarios[groupIndex]?.city);

          // Between the two Choices: the tool's result for that call, as the SDK sent it back.
          const between = items.slice(first + 1, second);
          expect(between).toEqual([
            expect.objectContaining({ role: 'tool', tool_call_id: call.id, content: lookupResult(String(city)) }),
          ]);
        }
      }
      const before = await model.getStep();
      const { step } = await model.train(groups);
      expect(step).toBe(before + 1);
    }, 120_000);
  }
});
