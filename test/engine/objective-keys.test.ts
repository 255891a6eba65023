/**
 * Each algorithmic key of `experimental_config` acts in a real training job of the local engine
 * (the built-in tiny model) and shows in the step's metrics where it acts. The loss formulas
 * themselves are checked against ART's code in art-loss-parity.test.ts; here: the wiring (the
 * reference policy's pass, sequence ids, learning-rate factors, advantage balance, refusals).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_LEARNING_RATE, createEngine } from '../../src/engine/index.js';
import type { Engine, PolicyRef } from '../../src/engine/index.js';
import type { TrajectoryGroup } from 'policyloop';
import type { ChatCompletionRequestBody, Choice, ExperimentalTrainingConfig } from 'policyloop/schema';

const BASE = 'policyloop/tiny-chat';
const base: PolicyRef = { baseModel: BASE, checkpointPath: null, key: BASE };

let engine: Engine;
let directory: string;
let counter = 0;
/** Groups sampled from the base model, rewarded by position (every group trains). */
let groups: TrajectoryGroup[];
/** The same groups as if sampled by a policy that gave each token e^-2 of today's probability. */
let stale: TrajectoryGroup[];

beforeAll(async () => {
  engine = await createEngine();
  directory = await mkdtemp(path.join(os.tmpdir(), 'engine-objective-'));
  const prompts = ['abcd', 'efgh'];
  const results = await Promise.all(
    prompts.map((content) =>
      engine.chatCompletion(base, {
        model: BASE,
        messages: [{ role: 'user', content }],
        n: 4,
        max_tokens: 6,
        logprobs: true,
      } as ChatCompletionRequestBody),
    ),
  );
  groups = results.map((result, index) => ({
    trajectories: result.choices.map((choice: Choice, choiceIndex: number) => ({
      messages_and_choices: [{ role: 'user' as const, content: prompts[index] as string }, choice],
      reward: choiceIndex,
      additional_histories: [],
      metrics: {},
      metadata: {},
      logs: [],
    })),
  }));
  stale = shifted(groups, -2);
});
afterAll(async () => {
  await engine.close();
  await rm(directory, { recursive: true, force: true });
});

function shifted(source: TrajectoryGroup[], by: number): TrajectoryGroup[] {
  return source.map((group) => ({
    trajectories: group.trajectories.map((trajectory) => ({
      ...trajectory,
      messages_and_choices: trajectory.messages_and_choices.map((item) =>
        'role' in item
          ? item
          : {
              ...item,
              logprobs: {
                content: item.logprobs?.content?.map((entry) => ({ ...entry, logprob: entry.logprob + by })) ?? null,
              },
            },
      ),
    })),
  }));
}

async function train(
  config: ExperimentalTrainingConfig | null,
  options: {
    policy?: PolicyRef;
    trajectoryGroups?: TrajectoryGroup[];
    klReference?: { checkpointPath: string | null };
  } = {},
): Promise<{ metrics: Record<string, number>; outputPath: string }> {
  counter += 1;
  const outputPath = path.join(directory, `checkpoint-${counter}`);
  const result = await engine.train(
    {
      kind: 'rl',
      policy: options.policy ?? base,
      outputPath,
      step: 1,
      trajectoryGroups: options.trajectoryGroups ?? groups,
      config,
      klReference: options.klReference,
    },
    { onEvent: () => undefined },
  );
  return { metrics: { ...result.metrics }, outputPath };
}

describe('experimental_config keys on the local engine', () => {
  it('KL penalty: kl_ref is 0 against the policy itself and positive against another step; absent without the key', async () => {
    const plain = await train({ learning_rate: 0.05 });
    expect(plain.metrics['kl_ref']).toBeUndefined();
    const fromBase = await train({ kl_penalty_coef: 0.5 });
    expect(Math.abs(fromBase.metrics['kl_ref'] as number)).toBeLessThan(1e-5);
    const trained: PolicyRef = { baseModel: BASE, checkpointPath: plain.outputPath, key: 'objective:trained' };
    const againstBase = await train({ kl_penalty_coef: 0.5 }, { policy: trained });
    // Tokens sampled from the base: the estimate log π − log π_base is not 0 (negative here, the
    // base gave its own samples more probability).
    expect(Math.abs(againstBase.metrics['kl_ref'] as number)).toBeGreaterThan(1e-4);
    const againstItself = await train(
      { kl_penalty_coef: 0.5 },
      { policy: trained, klReference: { checkpointPath: plain.outputPath } },
    );
    expect(Math.abs(againstItself.metrics['kl_ref'] as number)).toBeLessThan(1e-5);
    // kl_ref_adapter_path names the reference when the service resolved none.
    const byPath = await train({ kl_penalty_coef: 0.5, kl_ref_adapter_path: plain.outputPath }, { policy: trained });
    expect(Math.abs(byPath.metrics['kl_ref'] as number)).toBeLessThan(1e-5);
    // The penalty moves the advantages (their mean stays 0 with the source's mean subtracted).
    expect(againstBase.metrics['loss']).not.toBe((await train(null, { policy: trained })).metrics['loss']);
  });

  it('importance_sampling_level sequence reports the sequence-level ratios', async () => {
    const token = await train(null, { trajectoryGroups: stale });
    expect(token.metrics['sequence_importance_ratio']).toBeUndefined();
    for (const level of ['sequence', 'average', 'geometric_average'] as const) {
      const { metrics } = await train({ importance_sampling_level: level }, { trajectoryGroups: stale });
      expect(metrics['sequence_importance_ratio']).toBeCloseTo(Math.exp(2), 3);
      expect(metrics['importance_ratio']).toBeCloseTo(Math.exp(2), 3);
    }
  });

  it('the ratio cap, the ratio mask and truncated importance sampling report where they act', async () => {
    const capped = await train({ max_negative_advantage_importance_sampling_weight: 2 }, { trajectoryGroups: stale });
    expect(capped.metrics['capped_fraction']).toBe(1);
    const masked = await train({ mask_prob_ratio: true }, { trajectoryGroups: stale });
    expect(masked.metrics['masked_fraction']).toBe(1); // e^2 > 1 + epsilon_high (4)
    expect(masked.metrics['loss']).toBe(0); // CISPO with epsilon 1: weight clip(0, 0, 5) = 0
    const kept = await train({ mask_prob_ratio: true });
    expect(kept.metrics['masked_fraction']).toBe(0);
    const truncated = await train({ truncated_importance_sampling: 1.5 }, { trajectoryGroups: stale });
    expect(truncated.metrics['tis_truncated_fraction']).toBe(1);
    expect(truncated.metrics['tis_weight']).toBeCloseTo(1.5, 6);
    const light = await train({ truncated_importance_sampling: 10 }, { trajectoryGroups: stale });
    expect(light.metrics['tis_truncated_fraction']).toBe(0);
    expect(light.metrics['tis_weight']).toBeCloseTo(Math.exp(2), 3);
  });

  it('advantage_balance and kimi_k2_tau move the mean advantage', async () => {
    const plain = await train(null);
    expect(Math.abs(plain.metrics['advantage'] as number)).toBeLessThan(0.35);
    const positive = await train({ advantage_balance: 1 });
    expect(positive.metrics['advantage_balance']).toBe(1);
    expect(positive.metrics['advantage']).toBeGreaterThan(0.3);
    const negative = await train({ advantage_balance: -1 });
    expect(negative.metrics['advantage']).toBeLessThan(-0.3);
    // With the sampled logprobs e^-2 below today's, −τ·(log π − log π_old) = −2τ per token.
    const tau = await train({ kimi_k2_tau: 0.5 }, { trajectoryGroups: stale });
    const untouched = await train(null, { trajectoryGroups: stale });
    expect((tau.metrics['advantage'] as number) - (untouched.metrics['advantage'] as number)).toBeCloseTo(-1, 3);
  });

  it('scales the learning rate by the reward std and by the trained sequences to a power', async () => {
    const plain = await train(null);
    expect(plain.metrics['learning_rate']).toBe(DEFAULT_LEARNING_RATE);
    expect(plain.metrics['learning_rate_multiplier']).toBeUndefined();
    const byStd = await train({ scale_learning_rate_by_reward_std_dev: true, learning_rate: 0.01 });
    expect(byStd.metrics['learning_rate']).toBeCloseTo(0.01 * (plain.metrics['reward_std_dev'] as number), 9);
    const byCount = await train({ num_trajectories_learning_rate_multiplier_power: 0.5, learning_rate: 0.01 });
    expect(byCount.metrics['learning_rate_multiplier']).toBeCloseTo(Math.sqrt(8), 9);
    expect(byCount.metrics['learning_rate']).toBeCloseTo(0.01 * Math.sqrt(8), 9);
  });

  it('fails a job whose keys make no sense, before training', async () => {
    await expect(train({ advantage_balance: 2 })).rejects.toThrow(/advantage_balance must be in \[-1, 1\], got 2/);
    await expect(train({ kl_penalty_coef: -1 })).rejects.toThrow(/kl_penalty_coef must be 0 or more/);
  });
});
