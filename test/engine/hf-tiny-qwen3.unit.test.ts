/**
 * The tiny random-weight Qwen3 model folder: transformers' config and tensor names for the
 * architecture, the real Qwen3 text layer, and the same bytes for the same seed.
 */
import { readFile, rm, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadTextLayer } from '../../src/text/text-layer.js';
import { writeTinyQwen3 } from 'policyloop/testing';
import { decodeSafetensors } from '../../src/engine/safetensors.js';

let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'tiny-qwen3-test-'));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const fixture = JSON.parse(await readFile('test/fixtures/reference/chat-templates.json', 'utf8')) as {
  cases: { name: string; messages: never[]; tools: never[] | null; add_generation_prompt: boolean; ids?: number[] }[];
};

describe('writeTinyQwen3', () => {
  it('writes a Qwen3ForCausalLM folder with transformers’ tensor names and shapes (GQA, q/k norms, tied embeddings)', async () => {
    const dir = await writeTinyQwen3(path.join(root, 'default'));
    const config = JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8'));
    expect(config).toMatchObject({
      architectures: ['Qwen3ForCausalLM'],
      model_type: 'qwen3',
      hidden_size: 64,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 16,
      intermediate_size: 128,
      vocab_size: 151936,
      tie_word_embeddings: true,
    });
    const { tensors, metadata } = decodeSafetensors(await readFile(path.join(dir, 'model.safetensors')));
    expect(metadata).toEqual({ format: 'pt' });
    const shapes = Object.fromEntries([...tensors].map(([name, tensor]) => [name, tensor.shape]));
    expect(Object.keys(shapes)).toHaveLength(1 + 2 * 11 + 1);
    expect(shapes).toMatchObject({
      'model.embed_tokens.weight': [151936, 64],
      'model.layers.1.self_attn.q_proj.weight': [64, 64],
      'model.layers.1.self_attn.k_proj.weight': [32, 64],
      'model.layers.1.self_attn.v_proj.weight': [32, 64],
      'model.layers.1.self_attn.o_proj.weight': [64, 64],
      'model.layers.1.self_attn.q_norm.weight': [16],
      'model.layers.1.self_attn.k_norm.weight': [16],
      'model.layers.1.mlp.gate_proj.weight': [128, 64],
      'model.layers.1.mlp.up_proj.weight': [128, 64],
      'model.layers.1.mlp.down_proj.weight': [64, 128],
      'model.layers.1.input_layernorm.weight': [64],
      'model.layers.1.post_attention_layernorm.weight': [64],
      'model.norm.weight': [64],
    });
    expect(shapes['lm_head.weight']).toBeUndefined();
    const embedding = tensors.get('model.embed_tokens.weight')?.data as Float32Array;
    let sumOfSquares = 0;
    for (const value of embedding) sumOfSquares += value * value;
    expect(Math.sqrt(sumOfSquares / embedding.length)).toBeCloseTo(0.02, 3);
  });

  it('speaks through the real Qwen3 text layer: its stop tokens, vocabulary and chat template', async () => {
    const text = await loadTextLayer(await writeTinyQwen3(path.join(root, 'text')));
    expect(text.stopTokenIds).toEqual([151645, 151643]);
    expect(text.vocabularySize).toBe(151669);
    expect(text.bosTokenId).toBeNull();
    // The embedding's padding rows are no token, yet a logprob entry for one reads back.
    expect(text.modelVocabularySize).toBe(151936);
    expect(text.decode([151900])).toBe('');
    expect(text.tokenString(151900)).toBe('token_id:151900');
    expect(text.recoverTokenId({ token: text.tokenString(151900), bytes: text.tokenBytes(151900) })).toBe(151900);
    expect(text.recoverTokenId({ token: 'token_id:151936', bytes: [] })).toBeNull();
    const reference = fixture.cases.find((entry) => entry.name === 'qwen3 parallel tool calls and results');
    expect(
      text.encodeChat(reference?.messages ?? [], {
        tools: reference?.tools ?? undefined,
        addGenerationPrompt: reference?.add_generation_prompt ?? false,
      }),
    ).toEqual(reference?.ids);
  });

  it('writes the same bytes for the same seed, other weights for another seed, and an untied head on request', async () => {
    const first = await readFile(
      path.join(await writeTinyQwen3(path.join(root, 'a'), { seed: 7 }), 'model.safetensors'),
    );
    const again = await readFile(
      path.join(await writeTinyQwen3(path.join(root, 'b'), { seed: 7 }), 'model.safetensors'),
    );
    const other = await readFile(
      path.join(await writeTinyQwen3(path.join(root, 'c'), { seed: 8 }), 'model.safetensors'),
    );
    expect(again.equals(first)).toBe(true);
    expect(other.equals(first)).toBe(false);
    const untied = await writeTinyQwen3(path.join(root, 'd'), { tieWordEmbeddings: false, numHiddenLayers: 1 });
    const { tensors } = decodeSafetensors(await readFile(path.join(untied, 'model.safetensors')));
    expect(tensors.get('lm_head.weight')?.shape).toEqual([151936, 64]);
    expect(JSON.parse(await readFile(path.join(untied, 'config.json'), 'utf8')).tie_word_embeddings).toBe(false);
  });

  it('draws the embedding and the untied head with embeddingStd, the other matrices with 0.02', async () => {
    const dir = await writeTinyQwen3(path.join(root, 'wide'), {
      embeddingStd: 0.5,
      tieWordEmbeddings: false,
      numHiddenLayers: 1,
    });
    const { tensors } = decodeSafetensors(await readFile(path.join(dir, 'model.safetensors')));
    const rootMeanSquare = (name: string): number => {
      const data = tensors.get(name)?.data as Float32Array;
      let sumOfSquares = 0;
      for (const value of data) sumOfSquares += value * value;
      return Math.sqrt(sumOfSquares / data.length);
    };
    expect(rootMeanSquare('model.embed_tokens.weight')).toBeCloseTo(0.5, 2);
    expect(rootMeanSquare('lm_head.weight')).toBeCloseTo(0.5, 2);
    expect(rootMeanSquare('model.layers.0.mlp.up_proj.weight')).toBeCloseTo(0.02, 2);
    await expect(writeTinyQwen3(path.join(root, 'bad-std'), { embeddingStd: 0 })).rejects.toThrow(
      'Expected embeddingStd to be a positive number, got 0.',
    );
  });

  it('refuses a shape transformers would refuse, saying what it got', async () => {
    await expect(writeTinyQwen3(path.join(root, 'bad'), { numAttentionHeads: 3, numKeyValueHeads: 2 })).rejects.toThrow(
      'Expected numAttentionHeads (3) to be a multiple of numKeyValueHeads (2).',
    );
  });
});
