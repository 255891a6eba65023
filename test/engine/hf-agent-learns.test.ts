/**
 * An agent on the tiny Qwen3 (random weights, the REAL Qwen3 tokenizer, chat template and
 * 151,936-token vocabulary) learns through the local service, offline: it asks "Weather in
 * <city>?" through the OpenAI client with a `weather` tool (examples/tasks/weather-call.ts),
 * Qwen3's template renders the tool into the prompt, and the service parses the model's
 * `<tool_call>` text back into `tool_calls`. The reward (0.5 for calling `weather`, 0.5 more for
 * the asked city) is measured greedily over the 4 cities before training and after an SFT warm
 * start (LoRA rank 64) and RL steps, and must rise by at least 0.3.
 *
 * Deterministic: the model's weights are seeded, evaluation is greedy, RL rollouts are seeded
 * (temperature 0.05, see docs/engine.md "An agent on the tiny Qwen3 that learns").
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  WEATHER_TOOLS,
  weatherAgent,
  weatherDemonstration,
  weatherReward,
  weatherScenarios,
} from '../../examples/tasks/weather-call.js';
import { gatherTrajectoryGroups, isChoice, LocalBackend, TrainableModel } from 'policyloop';
import { writeTinyQwen3 } from 'policyloop/testing';

let directory: string;
let backend: LocalBackend;
let model: TrainableModel;
let client: OpenAI;
const scenarios = weatherScenarios();

beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'hf-agent-learns-'));
  const modelDir = await writeTinyQwen3(path.join(directory, 'tiny-qwen3'));
  backend = await LocalBackend.start({ dataDir: path.join(directory, 'data'), models: [modelDir] });
  model = new TrainableModel({ project: 'hf', name: 'weather', baseModel: modelDir });
  await model.register(backend);
  client = model.openai();
}, 120_000);
afterAll(async () => {
  await model?.close();
  await backend?.close();
  if (directory !== undefined) await rm(directory, { recursive: true, force: true });
});

/** The greedy replies to every scenario, and their mean reward. */
async function greedy(): Promise<{ replies: OpenAI.ChatCompletionMessage[]; reward: number }> {
  const replies = await Promise.all(
    scenarios.map((scenario) => weatherAgent(client, model.inferenceName(), scenario, { temperature: 0 })),
  );
  const rewards = replies.map((reply, index) => weatherReward(reply, scenarios[index] as (typeof scenarios)[0]));
  return { replies, reward: rewards.reduce((sum, reward) => sum + reward, 0) / rewards.length };
}

describe('an agent on the tiny Qwen3 with the real tokenizer', () => {
  it('learns to call its tool: the reward rises by at least 0.3 after SFT and RL', async () => {
    const before = await greedy();
    // The random model writes no tool call at all.
    expect(before.replies.every((reply) => (reply.tool_calls ?? []).length === 0)).toBe(true);

    const demonstrations = scenarios.map(weatherDemonstration);
    await model.trainSFT(Array.from({ length: 30 }, () => demonstrations).flat(), {
      batchSize: demonstrations.length,
      learningRate: 5e-3,
      config: { lora_rank: 64, lora_alpha: 64 },
    });

    let trained = 0;
    const sampledTokens = new Set<string>();
    for (let step = 1; step <= 3; step += 1) {
      const groups = await gatherTrajectoryGroups(
        scenarios,
        async (scenario, { index }) => {
          const reply = await weatherAgent(client, model.inferenceName(), scenario, {
            temperature: 0.05,
            seed: step * 100 + index,
          });
          return { reward: weatherReward(reply, scenario) };
        },
        { groupSize: 4, concurrency: 16, policyVersion: () => model.getStep() },
      );
      // Every rollout is the client's one completion, its tokens Qwen3's own.
      for (const group of groups) {
        expect(group.exceptions ?? []).toEqual([]);
        for (const trajectory of group.trajectories) {
          const choices = trajectory.messages_and_choices.filter(isChoice);
          expect(choices).toHaveLength(1);
          for (const entry of choices[0]?.logprobs?.content ?? []) sampledTokens.add(entry.token);
        }
      }
      const flat = groups.every((group) => group.trajectories.every((t) => t.reward === group.trajectories[0]?.reward));
      if (!flat) {
        // See examples/qwen-agent.ts for the learning rate.
        const result = await model.train(groups, { learningRate: 1e-3 });
        // The logprobs the service returned at temperature 0.05 are the model's own (temperature 1),
        // which the trainer recomputes: each job starts on-policy, ratio 1 (docs/engine.md).
        expect(Math.abs(result.metrics['train/kl_div'] ?? 1)).toBeLessThan(1e-4);
        expect(result.metrics['train/importance_ratio']).toBeCloseTo(1, 3);
        trained += 1;
      }
    }

    const after = await greedy();
    expect(after.reward - before.reward).toBeGreaterThanOrEqual(0.3);
    // The calls came back parsed from Qwen3's `<tool_call>` text, for the tool the request offered.
    const call = after.replies[0]?.tool_calls?.[0];
    expect(call?.type === 'function' ? call.function.name : undefined).toBe(WEATHER_TOOLS[0].function.name);
    // The rollouts differed (RL trained), and the model wrote Qwen3's own tool-call tokens.
    expect(trained).toBeGreaterThan(0);
    expect(sampledTokens).toContain('<tool_call>');
    expect(sampledTokens).toContain('</tool_call>');
  }, 600_000);
});
