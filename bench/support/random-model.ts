/**
 * Bench support: random BF16 model folders of real models' shapes (SmolLM2-135M, Qwen3-0.6B),
 * written tensor by tensor, for benchmarks that need a real-sized model without a model hub.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SeededRandom } from '../../src/engine/random.js';
import type { TextLayer } from '../../src/text/loader.js';

/** The shape of a Llama-like decoder (Qwen3 adds the per-head query/key norms). */
export interface ModelShape {
  readonly layers: number;
  readonly hidden: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly mlp: number;
  readonly vocab: number;
}

/** The shapes the benches use, by name. */
export const SHAPES = {
  'smollm2-135m': { layers: 30, hidden: 576, heads: 9, kvHeads: 3, headDim: 64, mlp: 1536, vocab: 49_152 },
  'qwen3-0.6b': { layers: 28, hidden: 1024, heads: 16, kvHeads: 8, headDim: 128, mlp: 3072, vocab: 151_936 },
} as const satisfies Record<string, ModelShape>;

/** A name of {@link SHAPES}. */
export type ShapeName = keyof typeof SHAPES;

/** The shape called `name`, or an error listing the known names. */
export function shapeNamed(name: string): ShapeName {
  if (!(name in SHAPES)) throw new Error(`Expected --shape ${Object.keys(SHAPES).join(' or ')}, got ${name}`);
  return name as ShapeName;
}

/**
 * Writes a BF16 model folder of `shape` (a Qwen3 when `qwen`, else a Llama; tied embeddings) tensor by
 * tensor, never the whole model in memory at once. Returns its parameter count.
 */
export async function writeRandomModel(directory: string, shape: ModelShape, qwen: boolean): Promise<number> {
  const config = {
    architectures: [qwen ? 'Qwen3ForCausalLM' : 'LlamaForCausalLM'],
    vocab_size: shape.vocab,
    hidden_size: shape.hidden,
    intermediate_size: shape.mlp,
    num_hidden_layers: shape.layers,
    num_attention_heads: shape.heads,
    num_key_value_heads: shape.kvHeads,
    head_dim: shape.headDim,
    max_position_embeddings: 2048,
    rms_norm_eps: 1e-6,
    rope_theta: qwen ? 1_000_000 : 100_000,
    tie_word_embeddings: true,
  };
  await writeFile(path.join(directory, 'config.json'), JSON.stringify(config));
  const tensors: [string, number[], number][] = [['model.embed_tokens.weight', [shape.vocab, shape.hidden], 0.02]];
  tensors.push(['model.norm.weight', [shape.hidden], -1]);
  const q = shape.heads * shape.headDim;
  const kv = shape.kvHeads * shape.headDim;
  for (let layer = 0; layer < shape.layers; layer += 1) {
    const p = `model.layers.${layer}`;
    tensors.push(
      [`${p}.input_layernorm.weight`, [shape.hidden], -1],
      [`${p}.post_attention_layernorm.weight`, [shape.hidden], -1],
      [`${p}.self_attn.q_proj.weight`, [q, shape.hidden], 0.02],
      [`${p}.self_attn.k_proj.weight`, [kv, shape.hidden], 0.02],
      [`${p}.self_attn.v_proj.weight`, [kv, shape.hidden], 0.02],
      [`${p}.self_attn.o_proj.weight`, [shape.hidden, q], 0.02],
      [`${p}.mlp.gate_proj.weight`, [shape.mlp, shape.hidden], 0.02],
      [`${p}.mlp.up_proj.weight`, [shape.mlp, shape.hidden], 0.02],
      [`${p}.mlp.down_proj.weight`, [shape.hidden, shape.mlp], 0.02],
    );
    if (qwen)
      tensors.push(
        [`${p}.self_attn.q_norm.weight`, [shape.headDim], -1],
        [`${p}.self_attn.k_norm.weight`, [shape.headDim], -1],
      );
  }
  const header: Record<string, unknown> = {};
  let offset = 0;
  let parameters = 0;
  for (const [name, dims] of tensors) {
    const count = dims.reduce((a, b) => a * b, 1);
    header[name] = { dtype: 'BF16', shape: dims, data_offsets: [offset, offset + count * 2] };
    offset += count * 2;
    parameters += count;
  }
  // The header padded with spaces to a multiple of 8 bytes, as the safetensors library writes it:
  // the data then start aligned, and BF16 weights are read as views of the file's bytes.
  const text = JSON.stringify(header);
  const json = Buffer.from(text.padEnd(Math.ceil(text.length / 8) * 8, ' '));
  const file = openSync(path.join(directory, 'model.safetensors'), 'w');
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  writeSync(file, length);
  writeSync(file, json);
  const random = new SeededRandom(1);
  const float = new Float32Array(1);
  const bits = new Uint32Array(float.buffer);
  for (const [, dims, std] of tensors) {
    const count = dims.reduce((a, b) => a * b, 1);
    const chunk = Buffer.alloc(Math.min(count, 1 << 20) * 2);
    for (let start = 0; start < count; start += chunk.length / 2) {
      const size = Math.min(chunk.length / 2, count - start);
      for (let index = 0; index < size; index += 1) {
        float[0] = std < 0 ? 1 : (random.next() * 2 - 1) * std * 1.7;
        chunk.writeUInt16LE((bits[0] as number) >>> 16, index * 2);
      }
      writeSync(file, chunk, 0, size * 2);
    }
  }
  closeSync(file);
  return parameters;
}

/** Parameters of a folder written earlier (from its safetensors header). */
export async function countParameters(folder: string): Promise<number> {
  const bytes = await readFile(path.join(folder, 'model.safetensors'));
  const length = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + length).toString()) as Record<string, { shape?: number[] }>;
  return Object.values(header).reduce((sum, entry) => sum + (entry.shape ?? [0]).reduce((a, b) => a * b, 1), 0);
}

/**
 * A text layer for benchmarks that sample and train on token ids only: the vocabulary size, no
 * stop tokens, and each token written as `token_id:<id>`.
 */
export function idsOnlyTextLayer(vocabulary: number): TextLayer {
  return {
    vocabularySize: vocabulary,
    modelVocabularySize: vocabulary,
    stopTokenIds: [],
    bosTokenId: null,
    toolCallFormat: 'hermes',
    encode: () => [],
    decode: () => '',
    tokenBytes: () => [],
    tokenString: (id) => `token_id:${id}`,
    recoverTokenId: () => null,
    renderChat: () => '',
    encodeChat: () => [],
    parseAssistant: () => ({ content: null }),
  };
}
