/**
 * An agent on the tiny Qwen3 (random weights, the REAL Qwen3 tokenizer, chat template and
 * 151,936-token vocabulary) learns by RL through the local service, offline. The system prompt says
 * the user lives in Bern; the agent asks "What's the weather at home?" (4 phrasings) through the
 * OpenAI client with a `weather` tool (examples/tasks/weather-call.ts); Qwen3's template renders
 * the tool into the prompt, and the service parses the model's `<tool_call>` text back into
 * `tool_calls`. Reward: 0.5 for calling `weather`, 0.5 more for the user's home.
 *
 * The SFT warm start teaches the call's format with Paris and Bern in turn, whatever the question,
 * so the answer is left to RL: the reward on replies no job trains on (8 a question at the rollout
 * temperature, seeds 9000 up) must rise by at least 0.3 from the warm start to the end of RL.
 *
 * Deterministic: the model's weights are seeded (seed 0: the two cities are the pair its random
 * head separates best; another seed learns less), rollouts and evaluation replies are seeded
 * (temperature 0.05, see docs/engine.md "An agent on the tiny Qwen3 that learns by RL").
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  calledCity,
  evaluateWeather,
  HOME_CITY,
  replyLabel,
  WEATHER_TOOLS,
  weatherAgent,
  weatherDemonstrations,
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
const temperature = 0.05;

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

/** The mean reward of 8 replies a question at the rollout temperature that no job trains on. */
const heldOutReward = async (): Promise<number> =>
  (await evaluateWeather(client, model.inferenceName(), scenarios, { temperature, samples: 8 })).reward;

describe('an agent on the tiny Qwen3 with the real tokenizer', () => {
  it('learns by RL which city the user means: the reward rises by at least 0.3 across the RL steps', async () => {
    const random = await evaluateWeather(client, model.inferenceName(), scenarios, { temperature: 0 });
    // The random model writes no tool call at all.
    expect(random.replies.every((reply) => (reply.tool_calls ?? []).length === 0)).toBe(true);

    // The warm start: the call's format, with Paris and Bern in turn whatever the question.
    await model.trainSFT(weatherDemonstrations(scenarios, 50), {
      batchSize: scenarios.length,
      learningRate: 5e-3,
      config: { lora_rank: 64, lora_alpha: 64 },
    });
    const warm = await heldOutReward();

    let trained = 0;
    const sampledTokens = new Set<string>();
    const sampledLabels = new Set<string>();
    for (let step = 1; step <= 8; step += 1) {
      const groups = await gatherTrajectoryGroups(
        scenarios,
        async (scenario, { index }) => {
          const reply = await weatherAgent(client, model.inferenceName(), scenario, {
            temperature,
            seed: step * 100 + index,
          });
          sampledLabels.add(replyLabel(reply));
          return { reward: weatherReward(reply) };
        },
        { groupSize: 4, concurrency: 16, sampledStep: () => model.getStep() },
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
        const result = await model.train(groups, { learningRate: 2e-3 });
        // The logprobs the service returned at temperature 0.05 are the model's own (temperature 1),
        // which the trainer recomputes: each job starts on-policy, ratio 1 (docs/engine.md).
        expect(Math.abs(result.metrics['train/kl_div'] ?? 1)).toBeLessThan(1e-4);
        expect(result.metrics['train/importance_ratio']).toBeCloseTo(1, 3);
        trained += 1;
      }
    }

    // RL alone raised the reward on replies it never trained on.
    const after = await heldOutReward();
    expect(after - warm).toBeGreaterThanOrEqual(0.3);
    // The rollouts explored: both cities were sampled, so the reward could tell them apart.
    expect(sampledLabels).toContain('Paris');
    expect(sampledLabels).toContain(HOME_CITY);
    expect(trained).toBeGreaterThan(0);
    // Greedy, every question now gets a call of the offered tool for the user's home, parsed from
    // Qwen3's `<tool_call>` text.
    const greedy = await evaluateWeather(client, model.inferenceName(), scenarios, { temperature: 0 });
    for (const reply of greedy.replies) {
      const call = reply.tool_calls?.[0];
      expect(call?.type === 'function' ? call.function.name : undefined).toBe(WEATHER_TOOLS[0].function.name);
      expect(calledCity(reply)).toBe(HOME_CITY);
    }
    expect(sampledTokens).toContain('<tool_call>');
    expect(sampledTokens).toContain('</tool_call>');
  }, 900_000);
});
