/**
 * The engine's two sampling runtimes through its public API: an engine on onnxruntime and one on
 * the tfjs-wasm fallback say which they run on, and answer the same requests (greedy and seeded,
 * n choices, stop tokens, a trained LoRA checkpoint) with the same tokens and logprobs; an
 * unknown runtime is refused with the valid ones.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createEngine } from '../../src/engine/index.js';
import type { Engine, PolicyRef } from '../../src/engine/index.js';
import type { TrajectoryGroup } from 'policyloop';
import type { ChatCompletionRequestBody, ChatCompletionResult } from 'policyloop/schema';
import { standInTextLayer, writeTinyModel } from './support/hf-model.js';

let root: string;
let modelDir: string;
const engines: Partial<Record<'onnxruntime' | 'tfjs-wasm', Engine>> = {};
let base: PolicyRef;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'engine-runtimes-'));
  modelDir = await writeTinyModel(path.join(root, 'tiny-llama'), { architecture: 'LlamaForCausalLM', dtype: 'BF16' });
  for (const runtime of ['onnxruntime', 'tfjs-wasm'] as const)
    engines[runtime] = await createEngine({
      workers: false,
      runtime,
      models: [modelDir],
      env: { HF_HUB_CACHE: path.join(root, 'hub') },
      textLayer: async () => standInTextLayer(),
    });
  base = { baseModel: modelDir, checkpointPath: null, key: modelDir };
});
afterAll(async () => {
  for (const engine of Object.values(engines)) await engine?.close();
  await rm(root, { recursive: true, force: true });
});

const onnx = (): Engine => engines.onnxruntime as Engine;
const tfjs = (): Engine => engines['tfjs-wasm'] as Engine;

const ask = (content: string, extra: Partial<ChatCompletionRequestBody> = {}): ChatCompletionRequestBody =>
  ({ model: modelDir, messages: [{ role: 'user', content }], ...extra }) as ChatCompletionRequestBody;

/** The same choices (text, finish reasons, token strings) with logprobs within 1e-4. */
function expectSameAnswers(ours: ChatCompletionResult, theirs: ChatCompletionResult): void {
  expect(ours.choices.map((choice) => [choice.message.content, choice.finish_reason])).toEqual(
    theirs.choices.map((choice) => [choice.message.content, choice.finish_reason]),
  );
  expect(ours.usage).toEqual(theirs.usage);
  ours.choices.forEach((choice, index) => {
    const expected = theirs.choices[index]?.logprobs?.content ?? [];
    const entries = choice.logprobs?.content ?? [];
    expect(entries.map((entry) => entry.token)).toEqual(expected.map((entry) => entry.token));
    entries.forEach((entry, at) =>
      expect(Math.abs(entry.logprob - (expected[at]?.logprob as number)), `choice ${index} token ${at}`).toBeLessThan(
        1e-4,
      ),
    );
  });
}

describe('the sampling runtime', () => {
  it('is reported by each engine', () => {
    expect(onnx().runtime?.()?.name).toBe('onnxruntime');
    expect(onnx().runtime?.()?.fallbackReason).toBeUndefined();
    expect(onnx().runtime?.().threads).toBeGreaterThanOrEqual(1);
    expect(tfjs().runtime?.()).toMatchObject({ name: 'tfjs-wasm', threads: 1 });
  });

  it('an unknown runtime is refused, naming the valid ones', async () => {
    await expect(createEngine({ runtime: 'cuda' as never })).rejects.toThrow(
      'Expected the engine runtime onnxruntime or tfjs-wasm, got "cuda".',
    );
  });

  it('answers greedy and seeded requests with n choices the same on onnxruntime and tfjs-wasm', async () => {
    for (const request of [
      ask('hello there', { temperature: 0, max_tokens: 12, logprobs: true, top_logprobs: 2 }),
      ask('abc', { n: 6, max_tokens: 10, logprobs: true, seed: 7 }),
      ask('stop early', { n: 4, max_tokens: 16, logprobs: true, seed: 11, stop: ['e'] }),
    ]) {
      const [ours, theirs] = await Promise.all([
        onnx().chatCompletion(base, request),
        tfjs().chatCompletion(base, request),
      ]);
      expect(ours.usage.completion_tokens).toBeGreaterThan(0);
      expectSameAnswers(ours, theirs);
    }
  });

  it('samples a trained LoRA checkpoint the same on both runtimes', async () => {
    const prompt = 'abc';
    const sampled = await tfjs().chatCompletion(base, ask(prompt, { n: 4, max_tokens: 6, logprobs: true, seed: 3 }));
    const outputPath = path.join(root, 'checkpoint');
    await tfjs().train(
      {
        kind: 'rl',
        policy: base,
        outputPath,
        step: 1,
        trajectoryGroups: [
          {
            trajectories: sampled.choices.map((choice) => ({
              messages_and_choices: [{ role: 'user', content: prompt }, choice],
              reward: choice.index,
            })),
          } as TrajectoryGroup,
        ],
        config: { learning_rate: 5e-2, lora_rank: 4, lora_alpha: 8, lora_target_modules: ['q_proj', 'up_proj'] },
      },
      { onEvent: () => undefined },
    );
    const trained: PolicyRef = { baseModel: modelDir, checkpointPath: outputPath, key: 'trained' };
    const request = ask(prompt, { n: 4, max_tokens: 8, logprobs: true, seed: 5 });
    const [ours, theirs, untrained] = await Promise.all([
      onnx().chatCompletion(trained, request),
      tfjs().chatCompletion(trained, request),
      onnx().chatCompletion(base, request),
    ]);
    expectSameAnswers(ours, theirs);
    // The adapter is applied: the trained policy's logprobs are not the base model's.
    const first = (result: ChatCompletionResult): number => result.choices[0]?.logprobs?.content?.[0]?.logprob ?? 0;
    expect(Math.abs(first(ours) - first(untrained))).toBeGreaterThan(1e-4);
  });
});
