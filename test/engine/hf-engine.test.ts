/**
 * Hugging Face base models in the engine: sampling with a KV cache, LoRA RL and SFT jobs whose
 * checkpoints are PEFT adapters, and the clear errors. A tiny random Qwen3-shaped model is written
 * on the fly with a character-level stand-in text layer (the neural side is under test here; the
 * real tokenizer and template are tested with the text layer).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createEngine } from '../../src/engine/index.js';
import type { Engine, EngineTrainingEvent, PolicyRef } from '../../src/engine/index.js';
import { readSafetensors } from '../../src/engine/safetensors.js';
import type { SFTRow, TrajectoryGroup } from 'policyloop';
import type { ChatCompletionRequestBody, Choice } from 'policyloop/schema';
import { standInTextLayer, writeTinyModel } from './support/hf-model.js';

let root: string;
let modelDir: string;
let engine: Engine;
let base: PolicyRef;
let counter = 0;

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'hf-engine-'));
  modelDir = await writeTinyModel(path.join(root, 'tiny-qwen3'));
  engine = await createEngine({
    workers: false,
    models: [modelDir],
    env: { HF_HUB_CACHE: path.join(root, 'hub') },
    textLayer: async () => standInTextLayer(),
  });
  base = { baseModel: modelDir, checkpointPath: null, key: modelDir };
});
afterAll(async () => {
  await engine.close();
  await rm(root, { recursive: true, force: true });
});

const ask = (content: string, extra: Partial<ChatCompletionRequestBody> = {}): ChatCompletionRequestBody =>
  ({ model: modelDir, messages: [{ role: 'user', content }], ...extra }) as ChatCompletionRequestBody;

function output(): string {
  counter += 1;
  return path.join(root, `checkpoint-${counter}`);
}

async function train(job: Parameters<Engine['train']>[0]): Promise<EngineTrainingEvent[]> {
  const events: EngineTrainingEvent[] = [];
  await engine.train(job, { onEvent: (event) => events.push(event) });
  return events;
}

function group(choices: readonly Choice[], prompt: string, reward: (choice: Choice) => number): TrajectoryGroup {
  return {
    trajectories: choices.map((choice) => ({
      messages_and_choices: [{ role: 'user', content: prompt }, choice],
      reward: reward(choice),
    })),
  } as TrajectoryGroup;
}

describe('Hugging Face models in the engine', () => {
  it('lists the folder among the base models', () => {
    expect(engine.baseModels()).toContain(modelDir);
    expect(engine.baseModels()).toContain('policyloop/tiny-chat');
  });

  it('samples n choices with logprobs, reproducibly with a seed, within max_tokens', async () => {
    const request = ask('abc', { n: 3, max_tokens: 6, logprobs: true, top_logprobs: 2, seed: 11, temperature: 1 });
    const first = await engine.chatCompletion(base, request);
    const again = await engine.chatCompletion(base, request);
    expect(first.choices).toHaveLength(3);
    expect(again.choices.map((choice) => choice.message.content)).toEqual(
      first.choices.map((choice) => choice.message.content),
    );
    for (const choice of first.choices) {
      const entries = choice.logprobs?.content ?? [];
      expect(entries.length).toBeGreaterThan(0);
      expect(entries.length).toBeLessThanOrEqual(6);
      for (const entry of entries) {
        expect(entry.logprob).toBeLessThanOrEqual(0);
        expect(entry.top_logprobs).toHaveLength(2);
      }
    }
    expect(first.usage.prompt_tokens).toBe('user:abc\nassistant:'.length);
  });

  it('ends before a stop sequence, leaving it out of content and logprobs', async () => {
    const free = await engine.chatCompletion(base, ask('stop', { temperature: 0, max_tokens: 6, logprobs: true }));
    const content = free.choices[0]?.message.content ?? '';
    expect(content.length).toBeGreaterThanOrEqual(3);
    const stop = content.slice(2, 3);
    const cut = content.indexOf(stop);
    const stopped = await engine.chatCompletion(
      base,
      ask('stop', { temperature: 0, max_tokens: 6, logprobs: true, stop: [stop] }),
    );
    expect(stopped.choices[0]?.message.content).toBe(content.slice(0, cut));
    expect(stopped.choices[0]?.finish_reason).toBe('stop');
    expect(stopped.choices[0]?.logprobs?.content?.map((entry) => entry.token).join('')).toBe(content.slice(0, cut));
  });

  it('greedy decoding through the cache gives the tokens a full forward pass ranks first', async () => {
    const result = await engine.chatCompletion(
      base,
      ask('hello', { temperature: 0, max_tokens: 5, logprobs: true, top_logprobs: 1 }),
    );
    const entries = result.choices[0]?.logprobs?.content ?? [];
    for (const entry of entries) expect(entry.token).toBe(entry.top_logprobs[0]?.token);
  });

  it('trains an RL job into a PEFT adapter whose first kl_div is about 0, and samples from it', async () => {
    const prompt = 'abc';
    const sampled = await engine.chatCompletion(base, ask(prompt, { n: 8, max_tokens: 6, logprobs: true, seed: 3 }));
    const reward = (choice: Choice): number => ((choice.message.content ?? '').match(/[aeiou]/g) ?? []).length;
    const outputPath = output();
    const events = await train({
      kind: 'rl',
      policy: base,
      outputPath,
      step: 1,
      trajectoryGroups: [group(sampled.choices, prompt, reward)],
      config: {
        learning_rate: 1e-2,
        lora_rank: 4,
        lora_alpha: 8,
        lora_target_modules: ['q_proj', 'v_proj', 'down_proj'],
      },
    });
    const step = events.find((event) => event.type === 'gradient_step');
    expect(step?.data['num_trainable_tokens']).toBeGreaterThan(0);
    expect(Math.abs(step?.data['kl_div'] ?? 1)).toBeLessThan(1e-5);
    expect(step?.data['importance_ratio']).toBeCloseTo(1, 4);
    const adapterConfig = JSON.parse(await readFile(path.join(outputPath, 'adapter_config.json'), 'utf8'));
    expect(adapterConfig).toMatchObject({
      peft_type: 'LORA',
      r: 4,
      lora_alpha: 8,
      target_modules: ['q_proj', 'v_proj', 'down_proj'],
    });
    const { tensors } = await readSafetensors(path.join(outputPath, 'adapter_model.safetensors'));
    expect(tensors.get('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight')?.shape).toEqual([4, 32]);
    expect(tensors.get('base_model.model.model.layers.1.mlp.down_proj.lora_B.weight')?.shape).toEqual([32, 4]);
    expect(tensors.size).toBe(2 * 3 * 2);
    const trained: PolicyRef = { baseModel: modelDir, checkpointPath: outputPath, key: 'trained:1' };
    const after = await engine.chatCompletion(trained, ask(prompt, { max_tokens: 4, logprobs: true, seed: 3 }));
    expect(after.choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
    // The next job continues the adapter; its sampling logprobs come from the trained policy.
    const resampled = await engine.chatCompletion(
      trained,
      ask(prompt, { n: 8, max_tokens: 6, logprobs: true, seed: 4 }),
    );
    const next = await train({
      kind: 'rl',
      policy: trained,
      outputPath: output(),
      step: 2,
      trajectoryGroups: [group(resampled.choices, prompt, reward)],
      config: null,
    });
    const nextStep = next.find((event) => event.type === 'gradient_step');
    expect(Math.abs(nextStep?.data['kl_div'] ?? 1)).toBeLessThan(1e-5);
  });

  it('starts an RL job on rollouts sampled at temperature 0.3 with kl_div about 0 and importance ratio 1', async () => {
    // The reported logprobs are the model's own (temperature 1), which the trainer recomputes.
    // Rewards by position: at temperature 0.3 the samples may all be alike.
    const prompt = 'abc';
    const sampled = await engine.chatCompletion(
      base,
      ask(prompt, { n: 8, max_tokens: 6, logprobs: true, seed: 5, temperature: 0.3 }),
    );
    const events = await train({
      kind: 'rl',
      policy: base,
      outputPath: output(),
      step: 1,
      trajectoryGroups: [group(sampled.choices, prompt, (choice) => choice.index)],
      config: { lora_rank: 4, lora_alpha: 8 },
    });
    const step = events.find((event) => event.type === 'gradient_step');
    expect(step?.data['num_trainable_tokens']).toBeGreaterThan(0);
    expect(Math.abs(step?.data['kl_div'] ?? 1)).toBeLessThan(1e-5);
    expect(step?.data['importance_ratio']).toBeCloseTo(1, 4);
  });

  it('RL raises the reward of a fixed preference within a few steps', async () => {
    // Reward: the first character is G or b (~19% for the random model); each step continues the last.
    const good = (choice: Choice): number => (/^[Gb]/.test(choice.message.content ?? '') ? 1 : 0);
    let policy = base;
    const measure = async (p: PolicyRef): Promise<number> => {
      const result = await engine.chatCompletion(p, ask('q', { n: 32, max_tokens: 1, seed: 99 }));
      return result.choices.reduce((sum, choice) => sum + good(choice), 0) / 32;
    };
    const before = await measure(base);
    for (let step = 1; step <= 4; step += 1) {
      const sampled = await engine.chatCompletion(
        policy,
        ask('q', { n: 24, max_tokens: 1, logprobs: true, seed: step }),
      );
      // Once every sample is rewarded alike there is nothing left to learn from.
      if (new Set(sampled.choices.map(good)).size === 1) break;
      const outputPath = output();
      await train({
        kind: 'rl',
        policy,
        outputPath,
        step,
        trajectoryGroups: [group(sampled.choices, 'q', good)],
        config: { learning_rate: 5e-2 },
      });
      policy = { baseModel: modelDir, checkpointPath: outputPath, key: `rl-up:${step}` };
    }
    expect(await measure(policy)).toBeGreaterThan(before + 0.2);
  });

  it('trains an SFT job that makes the taught answer more likely', async () => {
    const rows: SFTRow[] = Array.from({ length: 8 }, () => ({
      messages: [
        { role: 'user' as const, content: 'hi' },
        { role: 'assistant' as const, content: 'ok' },
      ],
    }));
    const logprobOf = async (policy: PolicyRef): Promise<number> => {
      const result = await engine.chatCompletion(
        policy,
        ask('hi', { temperature: 0, max_tokens: 1, logprobs: true, top_logprobs: 20 }),
      );
      const alternatives = result.choices[0]?.logprobs?.content?.[0]?.top_logprobs ?? [];
      return alternatives.find((entry) => entry.token === 'o')?.logprob ?? -20;
    };
    const outputPath = output();
    const events = await train({
      kind: 'sft',
      policy: base,
      outputPath,
      step: 1,
      rows,
      config: { batch_size: 4, learning_rate: 5e-2, assistant_turns: 'all' },
    });
    expect(events.filter((event) => event.type === 'gradient_step')).toHaveLength(2);
    expect(existsSync(path.join(outputPath, 'adapter_model.safetensors'))).toBe(true);
    const after = await logprobOf({ baseModel: modelDir, checkpointPath: outputPath, key: 'sft:1' });
    expect(after).toBeGreaterThan((await logprobOf(base)) + 0.5);
  });
});

describe('clear errors', () => {
  it('names an unsupported architecture', async () => {
    const folder = await writeTinyModel(path.join(root, 'gpt2'), { architecture: 'Qwen3ForCausalLM' });
    const config = JSON.parse(await readFile(path.join(folder, 'config.json'), 'utf8'));
    await writeFile(
      path.join(folder, 'config.json'),
      JSON.stringify({ ...config, architectures: ['GPT2LMHeadModel'] }),
    );
    const other = await createEngine({
      workers: false,
      models: [folder],
      textLayer: async () => standInTextLayer(),
      env: {},
    });
    try {
      // An unsupported folder is not served: it is not listed, and asking for it says so.
      expect(other.baseModels()).not.toContain(folder);
      const { readHfConfig } = await import('../../src/engine/hf/files.js');
      await expect(readHfConfig(folder)).rejects.toThrow(/architecture GPT2LMHeadModel is not supported/);
    } finally {
      await other.close();
    }
  });

  it('names a missing weights file', async () => {
    const folder = await writeTinyModel(path.join(root, 'no-weights'));
    await rm(path.join(folder, 'model.safetensors'));
    const other = await createEngine({
      workers: false,
      models: [folder],
      textLayer: async () => standInTextLayer(),
      env: {},
    });
    try {
      await expect(
        other.chatCompletion({ baseModel: folder, checkpointPath: null, key: folder }, { ...ask('a'), model: folder }),
      ).rejects.toThrow(/has no model\.safetensors/);
    } finally {
      await other.close();
    }
  });

  it('refuses a model whose float32 weights cannot fit the 4 GB wasm heap, before reading them', async () => {
    const folder = path.join(root, 'qwen3-1.7b-shape');
    await writeTinyModel(folder);
    const config = JSON.parse(await readFile(path.join(folder, 'config.json'), 'utf8'));
    const big = {
      ...config,
      num_hidden_layers: 28,
      hidden_size: 2048,
      intermediate_size: 6144,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      vocab_size: 151936,
    };
    await writeFile(path.join(folder, 'config.json'), JSON.stringify(big));
    const other = await createEngine({
      workers: false,
      models: [folder],
      textLayer: async () => standInTextLayer(),
      env: {},
    });
    try {
      await expect(
        other.chatCompletion({ baseModel: folder, checkpointPath: null, key: folder }, { ...ask('a'), model: folder }),
      ).rejects.toThrow(/weights need about 6\.9 GB of the wasm backend's heap/);
    } finally {
      await other.close();
    }
  });

  it('says where it looked for a model that is not there and how to download it', async () => {
    const id = 'Qwen/Qwen3-0.6B';
    await expect(
      engine.chatCompletion({ baseModel: id, checkpointPath: null, key: id }, { ...ask('a'), model: id }),
    ).rejects.toThrow(/not found.*models--Qwen--Qwen3-0\.6B.*huggingface-cli download Qwen\/Qwen3-0\.6B/s);
  });
});
