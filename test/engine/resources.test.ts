/**
 * Resources of the engine: weights loaded lazily and cached by key within a bound, no tfjs tensor
 * left behind by completions or training jobs, batching visible as shared kernels, training on
 * the worker thread (no kernel on the calling thread), and close() freeing everything.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TINY_CHAT, createEngine } from '../../src/engine/index.js';
import type { Engine, EngineTrainingJob, PolicyRef } from '../../src/engine/index.js';
import { loadTensorFlow } from '../../src/engine/backend.js';
import type { TensorFlow } from '../../src/engine/tensorflow.js';
import { parameterSpecs } from '../../src/engine/weights.js';
import type { TrajectoryGroup } from 'policyloop';
import type { ChatCompletionRequestBody } from 'policyloop/schema';

const base: PolicyRef = { baseModel: TINY_CHAT.id, checkpointPath: null, key: TINY_CHAT.id };
const PARAMETER_TENSORS = parameterSpecs(TINY_CHAT).length;
const ask = (content: string, extra: Partial<ChatCompletionRequestBody> = {}): ChatCompletionRequestBody =>
  ({ model: base.baseModel, messages: [{ role: 'user', content }], ...extra }) as ChatCompletionRequestBody;

let tf: TensorFlow;
let directory: string;
let counter = 0;
beforeAll(async () => {
  tf = await loadTensorFlow();
  directory = await mkdtemp(path.join(os.tmpdir(), 'engine-resources-'));
});
afterAll(async () => {
  await rm(directory, { recursive: true, force: true });
});
const outputPath = (): string => path.join(directory, `checkpoint-${(counter += 1)}`);

async function rlJob(engine: Engine): Promise<EngineTrainingJob> {
  const result = await engine.chatCompletion(base, ask('abcd', { n: 4, max_tokens: 12, logprobs: true, seed: 3 }));
  const trajectoryGroups = [
    {
      trajectories: result.choices.map((choice, index) => ({
        messages_and_choices: [{ role: 'user', content: 'abcd' }, choice],
        reward: index,
      })),
    },
  ] as unknown as TrajectoryGroup[];
  return { kind: 'rl', policy: base, outputPath: outputPath(), step: 1, trajectoryGroups, config: null };
}

const sftJob = (rowCount = 6): EngineTrainingJob => ({
  kind: 'sft',
  policy: base,
  outputPath: outputPath(),
  step: 1,
  rows: Array.from({ length: rowCount }, (_, index) => ({
    messages: [
      { role: 'user', content: `q${index}` },
      { role: 'assistant', content: `a${index}` },
    ],
  })),
  config: { batch_size: 2, assistant_turns: 'all' },
});

describe('engine resources (training on the calling thread, so its tensors are counted here)', () => {
  let engine: Engine;
  let baseline: number;
  beforeAll(async () => {
    baseline = tf.memory().numTensors;
    engine = await createEngine({ workers: false, cacheSize: 2 });
  });
  afterAll(async () => {
    await engine.close();
  });

  it('loads weights lazily, on the first completion for a key', async () => {
    expect(tf.memory().numTensors).toBe(baseline);
    await engine.chatCompletion(base, ask('hi', { max_tokens: 2 }));
    expect(tf.memory().numTensors).toBe(baseline + PARAMETER_TENSORS);
  });

  it('leaves no tensor behind after 50 completions (n, logprobs, stop sequences, aborts) and an RL and an SFT job', async () => {
    const before = tf.memory().numTensors;
    for (let round = 0; round < 5; round += 1) {
      const controller = new AbortController();
      const requests = Array.from({ length: 10 }, (_, index) =>
        engine.chatCompletion(
          base,
          ask(`w${round}${index}`, {
            max_tokens: 40,
            n: 1 + (index % 3),
            logprobs: true,
            top_logprobs: 2,
            stop: ['e'],
            seed: index,
          }),
          index === 9 ? { signal: controller.signal } : {},
        ),
      );
      setTimeout(() => controller.abort(), 5);
      await Promise.allSettled(requests);
    }
    expect(tf.memory().numTensors).toBe(before);
    await engine.train(await rlJob(engine), { onEvent: () => undefined });
    await engine.train(sftJob(), { onEvent: () => undefined });
    expect(tf.memory().numTensors).toBe(before);
  });

  it('keeps at most cacheSize policies loaded, by key', async () => {
    for (const key of ['a', 'b', 'c', 'd']) await engine.chatCompletion({ ...base, key }, ask('hi', { max_tokens: 1 }));
    expect(tf.memory().numTensors).toBe(baseline + 2 * PARAMETER_TENSORS);
    // The same key again is served from the cache: nothing is loaded.
    await engine.chatCompletion({ ...base, key: 'd' }, ask('hi', { max_tokens: 1 }));
    expect(tf.memory().numTensors).toBe(baseline + 2 * PARAMETER_TENSORS);
  });

  it('runs the training job on the calling thread when workers is false (the control of the worker test below)', async () => {
    const job = await rlJob(engine);
    const profile = await tf.profile(async () => {
      await engine.train(job, { onEvent: () => undefined });
    });
    expect(profile.kernels.length).toBeGreaterThan(100);
  });
});

describe('batching and the training thread', () => {
  it('shares kernels between concurrent requests (one forward pass for many sequences)', async () => {
    const engine = await createEngine({ workers: false });
    try {
      await engine.chatCompletion(base, ask('warm', { max_tokens: 1 }));
      const request = (seed: number): ChatCompletionRequestBody =>
        ask(`prompt ${seed}`, { max_tokens: 8, seed, logprobs: true });
      const alone = await tf.profile(async () => {
        await engine.chatCompletion(base, request(1));
      });
      const together = await tf.profile(async () => {
        await Promise.all(Array.from({ length: 16 }, (_, index) => engine.chatCompletion(base, request(index + 1))));
      });
      // Sixteen requests one after the other would run sixteen times the kernels.
      expect(alone.kernels.length).toBeGreaterThan(50);
      expect(together.kernels.length).toBeLessThan(alone.kernels.length * 1.5);
    } finally {
      await engine.close();
    }
  });

  it('trains off the calling thread: no kernel runs and no tensor is made here during a job', async () => {
    const engine = await createEngine();
    try {
      const job = await rlJob(engine);
      const before = tf.memory().numTensors;
      const profile = await tf.profile(async () => {
        await engine.train(job, { onEvent: () => undefined });
      });
      expect(profile.kernels).toEqual([]);
      expect(tf.memory().numTensors).toBe(before);
    } finally {
      await engine.close();
    }
  });

  it('close() shuts the worker down: a running job fails saying so, and close frees every tensor', async () => {
    const before = tf.memory().numTensors;
    const engine = await createEngine();
    await engine.chatCompletion(base, ask('hi', { max_tokens: 1 }));
    let started: () => void = () => undefined;
    const training = new Promise<void>((resolve) => (started = resolve));
    const job = engine.train(sftJob(400), { onEvent: () => started() });
    const jobOutcome = job.then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await training;
    // Mid-generation when close() comes (before it, the message differs but the weights must be
    // freed either way, and not under a running batch). Greedy: the seeded base model then always
    // writes all 240 tokens (at temperature 1 it may stop after ~20 and finish before close()).
    const inFlight = engine.chatCompletion(base, ask('long', { max_tokens: 240, temperature: 0 })).then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 30));
    await engine.close();
    expect(await jobOutcome).toEqual(new Error('The engine was closed while the training job ran.'));
    expect(String(await inFlight)).toMatch(/^Error: The engine was closed (before|while) the completion ran\.$/);
    expect(tf.memory().numTensors).toBe(before);
    await expect(engine.chatCompletion(base, ask('x'))).rejects.toThrow('The engine is closed.');
    await expect(engine.train(sftJob(), { onEvent: () => undefined })).rejects.toThrow('The engine is closed.');
  });
});
