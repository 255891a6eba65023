/**
 * Test helpers for Hugging Face models: a tiny random-weight model folder written on the fly
 * (config.json + safetensors, F32 or BF16, optionally sharded) and a character-level stand-in
 * text layer (the real one is `src/engine/hf/text-layer.ts`; these tests exercise the neural side).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { SeededRandom } from '../../../src/engine/random.js';
import { encodeSafetensors } from '../../../src/engine/safetensors.js';
import type { HostTensor } from '../../../src/engine/safetensors.js';
import type { TextLayer } from '../../../src/text/loader.js';

/** Shape of a tiny model. */
export interface TinyModelOptions {
  readonly architecture?: 'LlamaForCausalLM' | 'Qwen3ForCausalLM' | string;
  readonly tied?: boolean;
  readonly dtype?: 'F32' | 'BF16';
  /** Split the weights into this many shards with an index. */
  readonly shards?: number;
  readonly seed?: number;
  readonly vocabularySize?: number;
}

/** Characters of the stand-in text layer: id 0 is padding, 1 ends a turn, 2.. are these. */
const CHARACTERS = ' abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:\n{}"';

/** The stand-in's end-of-turn character (token id 1). */
const END = '\u0001';

/** Writes a tiny random model folder and returns it. */
export async function writeTinyModel(directory: string, options: TinyModelOptions = {}): Promise<string> {
  const architecture = options.architecture ?? 'Qwen3ForCausalLM';
  const qwen = architecture === 'Qwen3ForCausalLM';
  const vocab = options.vocabularySize ?? CHARACTERS.length + 2;
  const hidden = 32;
  const heads = 4;
  const kvHeads = 2;
  const headDim = 16;
  const intermediate = 64;
  const layers = 2;
  const tied = options.tied ?? qwen;
  const config = {
    architectures: [architecture],
    model_type: qwen ? 'qwen3' : 'llama',
    vocab_size: vocab,
    hidden_size: hidden,
    intermediate_size: intermediate,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: headDim,
    max_position_embeddings: 512,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    tie_word_embeddings: tied,
    eos_token_id: 1,
  };
  await mkdir(directory, { recursive: true });
  await writeFile(path.join(directory, 'config.json'), JSON.stringify(config, null, 2));
  await writeFile(path.join(directory, 'generation_config.json'), JSON.stringify({ eos_token_id: [1] }));
  const random = new SeededRandom(options.seed ?? 7);
  const tensors = new Map<string, HostTensor>();
  const add = (name: string, shape: number[], std: number, fill?: number): void => {
    const size = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(size);
    for (let index = 0; index < size; index += 1) data[index] = fill ?? random.normal() * std;
    tensors.set(name, { shape, data });
  };
  add('model.embed_tokens.weight', [vocab, hidden], 0.5);
  if (!tied) add('lm_head.weight', [vocab, hidden], 0.2);
  add('model.norm.weight', [hidden], 0, 1);
  for (let layer = 0; layer < layers; layer += 1) {
    const prefix = `model.layers.${layer}`;
    add(`${prefix}.input_layernorm.weight`, [hidden], 0, 1);
    add(`${prefix}.post_attention_layernorm.weight`, [hidden], 0, 1);
    add(`${prefix}.self_attn.q_proj.weight`, [heads * headDim, hidden], 0.2);
    add(`${prefix}.self_attn.k_proj.weight`, [kvHeads * headDim, hidden], 0.2);
    add(`${prefix}.self_attn.v_proj.weight`, [kvHeads * headDim, hidden], 0.2);
    add(`${prefix}.self_attn.o_proj.weight`, [hidden, heads * headDim], 0.2);
    if (qwen) {
      add(`${prefix}.self_attn.q_norm.weight`, [headDim], 0, 1);
      add(`${prefix}.self_attn.k_norm.weight`, [headDim], 0, 1);
    }
    add(`${prefix}.mlp.gate_proj.weight`, [intermediate, hidden], 0.2);
    add(`${prefix}.mlp.up_proj.weight`, [intermediate, hidden], 0.2);
    add(`${prefix}.mlp.down_proj.weight`, [hidden, intermediate], 0.2);
  }
  const shards = options.shards ?? 1;
  const names = [...tensors.keys()].sort();
  const files = Array.from({ length: shards }, (_, index) =>
    shards === 1
      ? 'model.safetensors'
      : `model-${String(index + 1).padStart(5, '0')}-of-${String(shards).padStart(5, '0')}.safetensors`,
  );
  const weightMap: Record<string, string> = {};
  for (const [index, file] of files.entries()) {
    const mine = names.filter((_, nameIndex) => nameIndex % shards === index);
    const part = new Map(mine.map((name) => [name, tensors.get(name) as HostTensor]));
    for (const name of mine) weightMap[name] = file;
    const bytes = encodeSafetensors(part, { format: 'pt' }, { dtype: options.dtype ?? 'F32' });
    await writeFile(path.join(directory, file), bytes);
  }
  if (shards > 1)
    await writeFile(
      path.join(directory, 'model.safetensors.index.json'),
      JSON.stringify({ metadata: {}, weight_map: weightMap }),
    );
  return directory;
}

/**
 * A character-level stand-in text layer: `<role>:content\n` per message, `assistant:` as the
 * generation prompt, id 1 ends a turn. Tool calls are written `{"name":...}` lines (parsed back).
 */
export function standInTextLayer(): TextLayer {
  const encode = (text: string): number[] =>
    [...text].map((character) => {
      if (character === END) return 1;
      const index = CHARACTERS.indexOf(character);
      return index < 0 ? 2 : index + 2;
    });
  const decode = (ids: readonly number[]): string =>
    ids.map((id) => (id >= 2 ? (CHARACTERS[id - 2] ?? '') : '')).join('');
  const renderChat: TextLayer['renderChat'] = (messages, { addGenerationPrompt }) =>
    (messages as { role: string; content?: unknown }[])
      .map(
        (message) =>
          `${message.role}:${typeof message.content === 'string' ? message.content : ''}${message.role === 'assistant' ? END : ''}\n`,
      )
      .join('') + (addGenerationPrompt ? 'assistant:' : '');
  const tokenString = (id: number, asTokenId = false): string =>
    asTokenId || id < 2 ? `token_id:${id}` : (CHARACTERS[id - 2] ?? `token_id:${id}`);
  return {
    vocabularySize: CHARACTERS.length + 2,
    modelVocabularySize: CHARACTERS.length + 2,
    stopTokenIds: [1],
    bosTokenId: null,
    toolCallFormat: 'hermes',
    encode,
    decode,
    tokenBytes: (id) => [...new TextEncoder().encode(decode([id]))],
    tokenString,
    recoverTokenId: (entry) => {
      const match = /^token_id:(\d+)$/.exec(entry.token);
      if (match) return Number(match[1]);
      const index = CHARACTERS.indexOf(entry.token);
      return entry.token.length === 1 && index >= 0 ? index + 2 : null;
    },
    renderChat,
    encodeChat: (messages, options) => encode(renderChat(messages, options)),
    parseAssistant: (text) => {
      const match = /^\{"name":"(\w+)"\}$/.exec(text.trim());
      if (!match) return { content: text };
      return {
        content: null,
        tool_calls: [{ id: 'call_0', type: 'function', function: { name: match[1] as string, arguments: '{}' } }],
      };
    },
  };
}
