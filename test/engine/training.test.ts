import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  DEFAULT_LEARNING_RATE,
  DEFAULT_SFT_LEARNING_RATE,
  VOCABULARY_SIZE,
  createEngine,
} from '../../src/engine/index.js';
import type { Engine, EngineTrainingEvent, PolicyRef } from '../../src/engine/index.js';
import { Trajectory } from 'policyloop';
import type { SFTRow, TrajectoryGroup } from 'policyloop';
import type { ChatCompletionRequestBody, Choice } from 'policyloop/schema';
import { capitalsReward, makeScenarios } from '../../examples/tasks/uppercase.js';

const BASE = 'policyloop/tiny-chat';
/** Metrics every RL gradient_step event carries. */
const RL_STEP_METRICS = [
  'loss',
  'grad_norm',
  'entropy',
  'learning_rate',
  'num_trajectories',
  'num_trainable_tokens',
  'num_groups_trainable',
];
const base: PolicyRef = { baseModel: BASE, checkpointPath: null, key: BASE };

let engine: Engine;
let directory: string;
let counter = 0;
beforeAll(async () => {
  engine = await createEngine();
  directory = await mkdtemp(path.join(os.tmpdir(), 'engine-training-'));
});
afterAll(async () => {
  await engine.close();
  await rm(directory, { recursive: true, force: true });
});

function output(): { outputPath: string; key: string } {
  counter += 1;
  return { outputPath: path.join(directory, `checkpoint-${counter}`), key: `test:${counter}` };
}

const ask = (content: string, extra: Partial<ChatCompletionRequestBody> = {}): ChatCompletionRequestBody =>
  ({ model: BASE, messages: [{ role: 'user', content }], ...extra }) as ChatCompletionRequestBody;

const weatherTool = { type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object' } } };
const taught: SFTRow[] = [
  {
    messages: [
      { role: 'user', content: 'capital of France?' },
      { role: 'assistant', content: 'Paris' },
    ],
  },
  {
    messages: [
      { role: 'user', content: 'two plus two?' },
      { role: 'assistant', content: 'four' },
    ],
  },
  {
    messages: [
      { role: 'user', content: 'say hello world' },
      { role: 'assistant', content: 'HELLO WORLD' },
    ],
  },
  {
    messages: [
      { role: 'user', content: 'weather in Oslo?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
        ],
      },
    ],
    tools: [weatherTool],
  },
];

async function train(
  job: Parameters<Engine['train']>[0],
): Promise<{ events: EngineTrainingEvent[]; metrics: Record<string, number> }> {
  const events: EngineTrainingEvent[] = [];
  const result = await engine.train(job, { onEvent: (event) => events.push(event) });
  return { events, metrics: { ...result.metrics } };
}

async function rlGroups(
  policy: PolicyRef,
  prompts: string[],
  groupSize: number,
  score: (text: string, index: number) => number,
  extra: Partial<ChatCompletionRequestBody> = {},
): Promise<{ groups: TrajectoryGroup[]; mean: number }> {
  const results = await Promise.all(
    prompts.map((content) =>
      engine.chatCompletion(policy, ask(content, { n: groupSize, max_tokens: 6, logprobs: true, ...extra })),
    ),
  );
  let total = 0;
  const groups = results.map((result, index) => ({
    trajectories: result.choices.map((choice: Choice, choiceIndex: number) => {
      const reward = score(choice.message.content ?? '', choiceIndex);
      total += reward;
      return {
        messages_and_choices: [{ role: 'user' as const, content: prompts[index] as string }, choice],
        reward,
        additional_histories: [],
        metrics: {},
        metadata: {},
        logs: [],
      };
    }),
  }));
  return { groups, mean: total / (prompts.length * groupSize) };
}

describe('SFT', () => {
  let taughtPolicy: PolicyRef;

  it('makes the model reproduce the taught answers, tool calls included', async () => {
    const { outputPath, key } = output();
    const rows = Array.from({ length: 60 }, () => taught).flat();
    const { events } = await train({
      kind: 'sft',
      policy: base,
      outputPath,
      step: 1,
      rows,
      config: { batch_size: 8, learning_rate: 5e-3, assistant_turns: 'all' },
    });
    expect(events[0]).toEqual({ type: 'training_started', data: { num_sequences: 30 } });
    const steps = events.filter((event) => event.type === 'gradient_step');
    expect(steps).toHaveLength(30);
    for (const name of RL_STEP_METRICS) {
      expect(typeof steps[0]?.data[name]).toBe('number');
    }
    taughtPolicy = { baseModel: BASE, checkpointPath: outputPath, key };
    const answers = await Promise.all(
      ['capital of France?', 'two plus two?', 'say hello world'].map((question) =>
        engine.chatCompletion(taughtPolicy, ask(question, { temperature: 0, max_tokens: 20 })),
      ),
    );
    expect(answers.map((answer) => answer.choices[0]?.message.content)).toEqual(['Paris', 'four', 'HELLO WORLD']);
    expect(answers.every((answer) => answer.choices[0]?.finish_reason === 'stop')).toBe(true);

    const call = await engine.chatCompletion(taughtPolicy, {
      ...ask('weather in Oslo?', { temperature: 0, max_tokens: 60 }),
      tools: [weatherTool],
    });
    const choice = call.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.message.content).toBeNull();
    expect(choice?.message.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^call_/),
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
      },
    ]);
    // tool_choice "none": the same text form is left as content.
    const none = await engine.chatCompletion(taughtPolicy, {
      ...ask('weather in Oslo?', { temperature: 0, max_tokens: 60 }),
      tools: [weatherTool],
      tool_choice: 'none',
    });
    expect(none.choices[0]?.finish_reason).toBe('stop');
    expect(none.choices[0]?.message.tool_calls).toBeUndefined();
    expect(none.choices[0]?.message.content).toBe(
      '<|tool_call|>{"name":"get_weather","arguments":{"city":"Oslo"}}<|/tool_call|>',
    );
  });

  it('samples tokens as often as softmax(logprob / T) of the reported logprobs says', async () => {
    const temperature = 2;
    const result = await engine.chatCompletion(
      taughtPolicy,
      ask('two plus two?', {
        temperature,
        max_tokens: 1,
        n: 128,
        seed: 7,
        logprobs: true,
        top_logprobs: VOCABULARY_SIZE,
      }),
    );
    const first = result.choices[0]?.logprobs?.content?.[0];
    const top = first?.top_logprobs[0];
    expect(top).toBeDefined();
    // The logprobs are the model's own (temperature 1); tokens are drawn at temperature 2.
    const tempered = (first?.top_logprobs ?? []).reduce(
      (sum, alternative) => sum + Math.exp(alternative.logprob / temperature),
      0,
    );
    const expected = Math.exp((top?.logprob ?? 0) / temperature) / tempered;
    expect(expected).toBeLessThan(Math.exp(top?.logprob ?? 0));
    const observed =
      result.choices.filter((choice) => choice.logprobs?.content?.[0]?.token === top?.token).length / 128;
    // Binomial standard deviation at n = 128 is at most 0.045.
    expect(Math.abs(observed - expected)).toBeLessThan(0.15);
    for (const choice of result.choices) {
      const entry = choice.logprobs?.content?.[0];
      const listed = first?.top_logprobs.find((alternative) => alternative.token === entry?.token);
      expect(entry?.logprob).toBeCloseTo(listed?.logprob ?? Number.NaN, 6);
    }
  });

  it('stops before a stop sequence and leaves it out of the content', async () => {
    const result = await engine.chatCompletion(
      taughtPolicy,
      ask('say hello world', { temperature: 0, max_tokens: 20, stop: ['WOR', 'zzz'], logprobs: true }),
    );
    expect(result.choices[0]?.message.content).toBe('HELLO ');
    expect(result.choices[0]?.finish_reason).toBe('stop');
    expect(result.choices[0]?.logprobs?.content?.map((entry) => entry.token).join('')).toBe('HELLO ');
  });

  it('writes a safetensors checkpoint with its metadata', async () => {
    const bytes = await readFile(path.join(taughtPolicy.checkpointPath as string, 'model.safetensors'));
    const headerLength = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8')) as Record<
      string,
      { dtype: string; shape: number[]; data_offsets: [number, number] }
    >;
    expect(header['token_embedding']).toMatchObject({ dtype: 'F32', shape: [266, 64] });
    const end = Math.max(
      ...Object.entries(header)
        .filter(([name]) => name !== '__metadata__')
        .map(([, entry]) => entry.data_offsets[1]),
    );
    expect(bytes.length).toBe(8 + headerLength + end);
    const metadata = JSON.parse(
      await readFile(path.join(taughtPolicy.checkpointPath as string, 'metadata.json'), 'utf8'),
    );
    expect(metadata).toMatchObject({ base_model: BASE, step: 1, kind: 'sft', training_config: { batch_size: 8 } });
  });

  it('sizes batches "auto" (16 rows) and uses DEFAULT_SFT_LEARNING_RATE when learning_rate is null; refuses a batch_size below 1', async () => {
    const rows = Array.from({ length: 9 }, () => taught.slice(0, 4)).flat();
    const { events } = await train({
      kind: 'sft',
      policy: base,
      ...output(),
      step: 1,
      rows,
      config: { batch_size: 'auto', learning_rate: null, assistant_turns: 'all' },
    });
    expect(events[0]).toEqual({ type: 'training_started', data: { num_sequences: 3 } });
    const steps = events.flatMap((event) => (event.type === 'gradient_step' ? [event.data] : []));
    expect(steps.map((data) => data['num_trajectories'])).toEqual([16, 16, 4]);
    expect(steps.every((data) => data['learning_rate'] === DEFAULT_SFT_LEARNING_RATE)).toBe(true);
    await expect(
      engine.train(
        { kind: 'sft', policy: base, ...output(), step: 1, rows, config: { batch_size: 0, assistant_turns: 'all' } },
        { onEvent: () => undefined },
      ),
    ).rejects.toThrow('config.batch_size must be a positive integer or "auto", got 0.');
  });

  it('lowers the loss on a fixed batch, step after step', async () => {
    const rows = Array.from({ length: 8 }, () => taught.slice(0, 2)).flat();
    const { events } = await train({
      kind: 'sft',
      policy: base,
      ...output(),
      step: 1,
      rows,
      config: {
        batch_size: 2,
        learning_rate: [3e-3, 3e-3, 3e-3, 3e-3, 3e-3, 3e-3, 3e-3, 1e-3],
        assistant_turns: 'last',
      },
    });
    const losses = events.flatMap((event) => (event.type === 'gradient_step' ? [event.data['loss'] as number] : []));
    expect(losses).toHaveLength(8);
    expect(losses.at(-1)).toBeLessThan((losses[0] as number) * 0.7);
    const rates = events.flatMap((event) => (event.type === 'gradient_step' ? [event.data['learning_rate']] : []));
    expect(rates.at(-1)).toBe(1e-3);
  });
});

describe('RL', () => {
  it('raises the mean reward of a fresh model by at least 0.3', async () => {
    let policy = base;
    const means: number[] = [];
    for (let step = 1; step <= 16; step += 1) {
      const prompts = makeScenarios(step, 8).map((scenario) => scenario.word);
      const { groups, mean } = await rlGroups(policy, prompts, 8, capitalsReward);
      means.push(mean);
      const { outputPath, key } = output();
      await train({ kind: 'rl', policy, outputPath, step, trajectoryGroups: groups, config: null });
      policy = { baseModel: BASE, checkpointPath: outputPath, key };
    }
    const first = (means[0]! + means[1]!) / 2;
    const last = (means.at(-1)! + means.at(-2)!) / 2;
    expect(last - first).toBeGreaterThanOrEqual(0.3);
  });

  it.each([0.3, 1])(
    'trains on tokens sampled at temperature %s with importance ratio 1 and kl_div 0 (sampler and trainer agree)',
    async (temperature) => {
      // Rewards by position, not by sampled text: four samples of the same length would leave
      // nothing to train on.
      const { groups } = await rlGroups(base, ['abcd', 'efgh'], 4, (_text, index) => index / 4, { temperature });
      const { events, metrics } = await train({
        kind: 'rl',
        policy: base,
        ...output(),
        step: 1,
        trajectoryGroups: groups,
        config: { loss_fn: 'ppo', epsilon: 0.2, kl_penalty_coef: 0.1 },
      });
      expect(events.map((event) => event.type)).toEqual(['training_started', 'gradient_step']);
      expect(metrics['importance_ratio']).toBeCloseTo(1, 4);
      expect(Math.abs(metrics['kl_div'] ?? 1)).toBeLessThan(1e-5);
      expect(metrics['clip_fraction']).toBe(0);
      expect(metrics['num_trajectories']).toBe(8);
      expect(metrics['num_groups_submitted']).toBe(2);
    },
  );

  it('weighs tokens by the importance ratio against the logprobs carried in the Choices', async () => {
    const { groups } = await rlGroups(base, ['abcd', 'efgh'], 4, (text) => text.length / 6);
    // Pretend the tokens were sampled by a policy that gave them e^-2 of today's probability.
    const stale = groups.map((group) => ({
      trajectories: group.trajectories.map((trajectory, index) => ({
        ...trajectory,
        reward: index,
        messages_and_choices: trajectory.messages_and_choices.map((item) =>
          'role' in item
            ? item
            : {
                ...item,
                logprobs: {
                  content: item.logprobs?.content?.map((entry) => ({ ...entry, logprob: entry.logprob - 2 })) ?? null,
                },
              },
        ),
      })),
    }));
    const cispo = await train({
      kind: 'rl',
      policy: base,
      ...output(),
      step: 1,
      trajectoryGroups: stale,
      config: null,
    });
    expect(cispo.metrics['importance_ratio']).toBeCloseTo(Math.exp(2), 3);
    expect(cispo.metrics['clip_fraction']).toBe(1); // e^2 > 1 + epsilon_high (4)
    const relaxed = await train({
      kind: 'rl',
      policy: base,
      ...output(),
      step: 1,
      trajectoryGroups: stale,
      config: { epsilon_high: 10 },
    });
    expect(relaxed.metrics['clip_fraction']).toBe(0);
    const ppo = await train({
      kind: 'rl',
      policy: base,
      ...output(),
      step: 1,
      trajectoryGroups: stale,
      config: { loss_fn: 'ppo' },
    });
    expect(ppo.metrics['clip_fraction']).toBe(1);
    const widePpo = await train({
      kind: 'rl',
      policy: base,
      ...output(),
      step: 1,
      trajectoryGroups: stale,
      config: { ppo: true, epsilon: 0.2, epsilon_high: 10 },
    });
    expect(widePpo.metrics['clip_fraction']).toBe(0);
    // Ratios below 1 - epsilon are clipped too (here e^-2 < 1 - 0.5).
    const fresh = stale.map((group) => ({
      trajectories: group.trajectories.map((trajectory) => ({
        ...trajectory,
        messages_and_choices: trajectory.messages_and_choices.map((item) =>
          'role' in item
            ? item
            : {
                ...item,
                logprobs: {
                  content: item.logprobs?.content?.map((entry) => ({ ...entry, logprob: entry.logprob + 4 })) ?? null,
                },
              },
        ),
      })),
    }));
    const low = await train({
      kind: 'rl',
      policy: base,
      ...output(),
      step: 1,
      trajectoryGroups: fresh,
      config: { loss_fn: 'ppo', epsilon: 0.5 },
    });
    expect(low.metrics['importance_ratio']).toBeCloseTo(Math.exp(-2), 3);
    expect(low.metrics['clip_fraction']).toBe(1);
  });

  it('reports every gradient_step number, and uses DEFAULT_LEARNING_RATE when learning_rate is null or absent', async () => {
    const sampled = await rlGroups(base, ['abcd', 'efgh'], 4, () => 0);
    const groups = sampled.groups.map((group) => ({
      trajectories: group.trajectories.map((trajectory, index) => ({ ...trajectory, reward: index })),
    }));
    for (const config of [null, {}, { learning_rate: null }]) {
      const { events } = await train({
        kind: 'rl',
        policy: base,
        ...output(),
        step: 1,
        trajectoryGroups: groups,
        config,
      });
      const step = events.find((event) => event.type === 'gradient_step');
      for (const name of RL_STEP_METRICS) {
        expect(Number.isFinite(step?.data[name]), name).toBe(true);
      }
      expect(step?.data['learning_rate']).toBe(DEFAULT_LEARNING_RATE);
      expect(step?.data['num_trajectories']).toBe(8);
      expect(step?.data['num_groups_trainable']).toBe(2);
      expect(step?.data['grad_norm']).toBeGreaterThan(0);
      // Near-uniform fresh model: entropy close to ln(266) nats per token.
      expect(step?.data['entropy']).toBeGreaterThan(4);
      expect(step?.data['entropy']).toBeLessThan(Math.log(266) + 1e-6);
    }
    const { metrics } = await train({
      kind: 'rl',
      policy: base,
      ...output(),
      step: 1,
      trajectoryGroups: groups,
      config: { learning_rate: 1e-4 },
    });
    expect(metrics['learning_rate']).toBe(1e-4);
  });

  it('fails a job with 0 trainable tokens (equal rewards, or no Choice) and writes no checkpoint', async () => {
    const { groups } = await rlGroups(base, ['abcd', 'efgh'], 4, () => 0.5);
    const noChoice = [{ trajectories: [{ reward: 1 }, { reward: 0 }].map((t) => Trajectory.parse(t)) }];
    for (const [trajectoryGroups, message] of [
      [groups, /0 trainable tokens: the rewards within each group are all equal \(8 trajectories in 2 groups\)/],
      [noChoice, /0 trainable tokens: no trajectory has a Choice .* among the 2 trajectories in 1 groups/],
    ] as const) {
      const { outputPath } = output();
      const events: EngineTrainingEvent[] = [];
      await expect(
        engine.train(
          { kind: 'rl', policy: base, outputPath, step: 1, trajectoryGroups, config: { learning_rate: 0.1 } },
          { onEvent: (event) => events.push(event) },
        ),
      ).rejects.toThrow(message);
      expect(events).toEqual([]);
      expect(existsSync(path.join(outputPath, 'metadata.json'))).toBe(false);
    }
  });

  it('fails a Choice without logprobs unless allow_training_without_logprobs', async () => {
    const { groups } = await rlGroups(base, ['abcd'], 2, (text) => text.length);
    const stripped = groups.map((group) => ({
      trajectories: group.trajectories.map((trajectory, index) => ({
        ...trajectory,
        reward: index,
        messages_and_choices: trajectory.messages_and_choices.map((item) =>
          'role' in item ? item : { ...item, logprobs: null },
        ),
      })),
    }));
    await expect(
      engine.train(
        { kind: 'rl', policy: base, ...output(), step: 1, trajectoryGroups: stripped, config: null },
        { onEvent: () => undefined },
      ),
    ).rejects.toThrow(/without logprobs/);
    const { metrics } = await train({
      kind: 'rl',
      policy: base,
      ...output(),
      step: 1,
      trajectoryGroups: stripped,
      config: { allow_training_without_logprobs: true },
    });
    expect(metrics['num_trainable_tokens']).toBeGreaterThan(0);
  });
});

describe('training thread', () => {
  const shortRows = Array.from({ length: 200 }, () => taught.slice(0, 2)).flat();

  it('keeps answering completions while a job trains', async () => {
    const order: string[] = [];
    let started: () => void = () => undefined;
    const firstStep = new Promise<void>((resolve) => (started = resolve));
    const job = engine
      .train(
        {
          kind: 'sft',
          policy: base,
          ...output(),
          step: 1,
          rows: shortRows,
          config: { batch_size: 8, assistant_turns: 'all' },
        },
        { onEvent: (event) => event.type === 'gradient_step' && started() },
      )
      .then(() => order.push('training'));
    await firstStep;
    await engine.chatCompletion(base, ask('hello', { max_tokens: 4 })).then(() => order.push('completion'));
    await job;
    expect(order).toEqual(['completion', 'training']);
  });

  it('cancels a job when its signal aborts', async () => {
    const controller = new AbortController();
    const job = engine.train(
      {
        kind: 'sft',
        policy: base,
        ...output(),
        step: 1,
        rows: shortRows,
        config: { batch_size: 8, assistant_turns: 'all' },
      },
      { onEvent: () => controller.abort(), signal: controller.signal },
    );
    await expect(job).rejects.toThrow(/cancelled/);
  });
});
