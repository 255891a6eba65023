/**
 * The committed reference fixtures (test/fixtures/reference, written by
 * scripts/reference/generate.py with torch, transformers and peft) are complete and self-consistent:
 * every file is there, safetensors headers and data agree with the configs, logits have the
 * configs' shapes, the LoRA gradients match the adapters' tensors, and the recorded loss follows
 * from the recorded token logprobs by the documented formula. Comparing our engine against them is
 * the engine tests' job; this test only guarantees they are usable.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeSafetensors } from '../../src/engine/safetensors.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/reference');
const MODELS = ['llama-tied', 'llama-untied', 'qwen3-tied', 'qwen3-untied'] as const;
const LORA_TARGETS = ['down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj'];

interface Entry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}
interface Prompt {
  name: string;
  ids: number[];
  text?: string;
  logits: number[][];
}
interface Config {
  architectures: string[];
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim?: number;
  tie_word_embeddings: boolean;
  rope_theta?: number;
  rope_scaling?: Record<string, unknown> | null;
  rope_parameters?: Record<string, unknown>;
}

const BYTES: Record<string, number> = { F32: 4, F16: 2, BF16: 2 };
const DTYPE_NAMES: Record<string, string> = { float32: 'F32', float16: 'F16', bfloat16: 'BF16' };

function json<T>(...parts: string[]): T {
  return JSON.parse(readFileSync(path.join(ROOT, ...parts), 'utf8')) as T;
}

function f16(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 31) return fraction ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/** Reads a safetensors file by hand (F32, F16, BF16), independently of the engine's reader. */
function readByHand(file: string): { header: Record<string, Entry>; values: (name: string) => number[] } {
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const { __metadata__: metadata, ...header } = JSON.parse(
    bytes.subarray(8, 8 + headerLength).toString('utf8'),
  ) as Record<string, Entry> & { __metadata__?: unknown };
  expect(metadata).toEqual({ format: 'pt' });
  const dataStart = 8 + headerLength;
  // data_offsets tile the data section exactly, each tensor holding shape-product values
  const spans = Object.values(header)
    .map((entry) => entry.data_offsets)
    .sort((a, b) => a[0] - b[0]);
  let next = 0;
  for (const [begin, end] of spans) {
    expect(begin).toBe(next);
    next = end;
  }
  expect(dataStart + next).toBe(bytes.length);
  for (const [name, entry] of Object.entries(header)) {
    const size = BYTES[entry.dtype];
    expect(size, `dtype of ${name}`).toBeDefined();
    expect(entry.data_offsets[1] - entry.data_offsets[0], name).toBe(
      entry.shape.reduce((a, b) => a * b, 1) * (size as number),
    );
  }
  const values = (name: string): number[] => {
    const entry = header[name] as Entry;
    const result: number[] = [];
    const size = BYTES[entry.dtype] as number;
    for (let at = dataStart + entry.data_offsets[0]; at < dataStart + entry.data_offsets[1]; at += size) {
      if (entry.dtype === 'F32') result.push(bytes.readFloatLE(at));
      else if (entry.dtype === 'F16') result.push(f16(bytes.readUInt16LE(at)));
      else {
        const scratch = Buffer.alloc(4);
        scratch.writeUInt32LE(bytes.readUInt16LE(at) << 16);
        result.push(scratch.readFloatLE(0));
      }
    }
    return result;
  };
  return { header, values };
}

/** The model's tensors, from model.safetensors or the shards its index names. */
function modelTensors(model: string): Map<string, { dtype: string; shape: number[]; values: () => number[] }> {
  const folder = path.join(ROOT, model);
  const index = path.join(folder, 'model.safetensors.index.json');
  const tensors = new Map<string, { dtype: string; shape: number[]; values: () => number[] }>();
  const add = (file: string, only?: Set<string>): void => {
    const { header, values } = readByHand(path.join(folder, file));
    for (const [name, entry] of Object.entries(header)) {
      if (only && !only.has(name)) throw new Error(`${file} holds ${name}, which the index puts elsewhere`);
      tensors.set(name, { dtype: entry.dtype, shape: entry.shape, values: () => values(name) });
    }
  };
  if (existsSync(index)) {
    const { weight_map: map } = json<{ weight_map: Record<string, string> }>(model, 'model.safetensors.index.json');
    for (const file of new Set(Object.values(map))) {
      add(file, new Set(Object.keys(map).filter((name) => map[name] === file)));
    }
    expect([...tensors.keys()].sort()).toEqual(Object.keys(map).sort());
  } else {
    add('model.safetensors');
  }
  return tensors;
}

function expectedShapes(config: Config): Map<string, number[]> {
  const hidden = config.hidden_size;
  const headDim = config.head_dim ?? hidden / config.num_attention_heads;
  const qwen3 = config.architectures[0] === 'Qwen3ForCausalLM';
  const shapes = new Map<string, number[]>([
    ['model.embed_tokens.weight', [config.vocab_size, hidden]],
    ['model.norm.weight', [hidden]],
  ]);
  if (!config.tie_word_embeddings) shapes.set('lm_head.weight', [config.vocab_size, hidden]);
  for (let layer = 0; layer < config.num_hidden_layers; layer += 1) {
    const prefix = `model.layers.${layer}`;
    shapes.set(`${prefix}.input_layernorm.weight`, [hidden]);
    shapes.set(`${prefix}.post_attention_layernorm.weight`, [hidden]);
    shapes.set(`${prefix}.self_attn.q_proj.weight`, [config.num_attention_heads * headDim, hidden]);
    shapes.set(`${prefix}.self_attn.k_proj.weight`, [config.num_key_value_heads * headDim, hidden]);
    shapes.set(`${prefix}.self_attn.v_proj.weight`, [config.num_key_value_heads * headDim, hidden]);
    shapes.set(`${prefix}.self_attn.o_proj.weight`, [hidden, config.num_attention_heads * headDim]);
    shapes.set(`${prefix}.mlp.gate_proj.weight`, [config.intermediate_size, hidden]);
    shapes.set(`${prefix}.mlp.up_proj.weight`, [config.intermediate_size, hidden]);
    shapes.set(`${prefix}.mlp.down_proj.weight`, [hidden, config.intermediate_size]);
    if (qwen3) {
      shapes.set(`${prefix}.self_attn.q_norm.weight`, [headDim]);
      shapes.set(`${prefix}.self_attn.k_norm.weight`, [headDim]);
    }
  }
  return shapes;
}

function expectLogits(prompts: Prompt[], vocab: number): void {
  for (const prompt of prompts) {
    expect(prompt.ids.length, prompt.name).toBeGreaterThan(0);
    for (const id of prompt.ids)
      expect(Number.isInteger(id) && id >= 0 && id < vocab, `${prompt.name} id ${id}`).toBe(true);
    expect(prompt.logits.length, prompt.name).toBe(prompt.ids.length);
    for (const row of prompt.logits) {
      expect(row.length).toBe(vocab);
      expect(row.every(Number.isFinite)).toBe(true);
    }
  }
}

const logitsFixture = json<{
  generator: Record<string, string>;
  models: Record<
    string,
    { dir: string; architecture: string; vocab_size: number; weights_dtype: string; prompts: Prompt[] }
  >;
  observed: Record<string, Record<string, number>>;
}>('logits.json');

const intermediates = json<{
  models: Record<
    string,
    {
      prompt: string;
      ids: number[];
      rope_inv_freq: number[];
      embeddings: number[][];
      layers: number[][][];
      final_norm: number[][];
    }
  >;
}>('intermediates.json');

describe('reference model folders', () => {
  it('records the pinned generator versions', () => {
    expect(logitsFixture.generator).toMatchObject({
      torch: expect.stringMatching(/^2\.15\.0/),
      transformers: '5.24.0',
      peft: '0.21.2',
    });
    expect(Object.keys(logitsFixture.models).sort()).toEqual([...MODELS]);
  });

  for (const model of MODELS) {
    it(`${model}: files, config, tensor names, shapes and dtypes agree`, () => {
      for (const file of ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json']) {
        expect(existsSync(path.join(ROOT, model, file)), `${model}/${file}`).toBe(true);
      }
      const config = json<Config>(model, 'config.json');
      const entry = logitsFixture.models[model];
      expect(entry?.architecture).toBe(config.architectures[0]);
      expect(entry?.vocab_size).toBe(config.vocab_size);
      // the tied folders keep the Hub's rope form, the untied ones transformers 5's
      if (model.endsWith('-tied')) {
        expect(typeof config.rope_theta).toBe('number');
        expect(config.rope_parameters).toBeUndefined();
      } else {
        expect(typeof config.rope_parameters?.['rope_theta']).toBe('number');
      }
      if (model === 'llama-tied') expect(config.rope_scaling?.['rope_type']).toBe('llama3');
      expect(config.num_key_value_heads).toBeLessThan(config.num_attention_heads);

      const tensors = modelTensors(model);
      const shapes = expectedShapes(config);
      expect([...tensors.keys()].sort()).toEqual([...shapes.keys()].sort());
      const dtype = DTYPE_NAMES[entry?.weights_dtype ?? ''];
      for (const [name, tensor] of tensors) {
        expect(tensor.shape, name).toEqual(shapes.get(name));
        expect(tensor.dtype, name).toBe(dtype);
      }
      // norm weights are drawn from [0.5, 1.5], so a reader that mistakes the dtype sees it here
      for (const [name, tensor] of tensors) {
        if (!name.endsWith('norm.weight')) continue;
        const values = tensor.values();
        expect(Math.min(...values), name).toBeGreaterThanOrEqual(0.5);
        expect(Math.max(...values), name).toBeLessThanOrEqual(1.5);
        expect(new Set(values).size, name).toBeGreaterThan(1);
      }
      if (dtype === 'F32' && !existsSync(path.join(ROOT, model, 'model.safetensors.index.json'))) {
        const decoded = decodeSafetensors(readFileSync(path.join(ROOT, model, 'model.safetensors')));
        expect([...decoded.tensors.keys()].sort()).toEqual([...shapes.keys()].sort());
        expect(Array.from(decoded.tensors.get('model.norm.weight')?.data ?? [])).toEqual(
          tensors.get('model.norm.weight')?.values(),
        );
      }

      const tokenizer = json<{
        model: { vocab: Record<string, number> };
        added_tokens: { id: number; content: string }[];
      }>(model, 'tokenizer.json');
      expect(Object.keys(tokenizer.model.vocab).length).toBe(config.vocab_size);
      expect(tokenizer.added_tokens.map((token) => token.content)).toEqual([
        '<|endoftext|>',
        '<|im_start|>',
        '<|im_end|>',
      ]);
      const tokenizerConfig = json<{ chat_template?: string }>(model, 'tokenizer_config.json');
      const template =
        tokenizerConfig.chat_template ?? readFileSync(path.join(ROOT, model, 'chat_template.jinja'), 'utf8');
      expect(template).toContain('<|im_start|>');
    });

    it(`${model}: logits.json has one float32 row of vocab_size logits per prompt position`, () => {
      const entry = logitsFixture.models[model];
      expectLogits(entry?.prompts ?? [], json<Config>(model, 'config.json').vocab_size);
      expect(entry?.prompts.map((prompt) => prompt.ids.length)).toEqual([1, 3, 7, 12, 6, 22]);
      // the intermediate values have the model's shapes
      const inner = intermediates.models[model];
      const config = json<Config>(model, 'config.json');
      const positions = inner?.ids.length ?? 0;
      expect(inner?.ids).toEqual(entry?.prompts.find((prompt) => prompt.name === inner?.prompt)?.ids);
      expect(inner?.rope_inv_freq.length).toBe(
        (config.head_dim ?? config.hidden_size / config.num_attention_heads) / 2,
      );
      expect(inner?.layers.length).toBe(config.num_hidden_layers);
      for (const states of [inner?.embeddings, inner?.final_norm, ...(inner?.layers ?? [])]) {
        expect(states?.length).toBe(positions);
        for (const row of states ?? [])
          expect(row.length === config.hidden_size && row.every(Number.isFinite)).toBe(true);
      }
      // the measured float32 spread stays below the tolerance the README states
      for (const value of Object.values(logitsFixture.observed[model] ?? {})) expect(value).toBeLessThan(1e-4);
    });
  }
});

describe('reference LoRA fixtures', () => {
  for (const model of MODELS) {
    it(`${model}: the adapter, its logits, the batch, the loss and the gradients agree`, () => {
      const config = json<Config>(model, 'config.json');
      const adapterConfig = json<Record<string, unknown>>('lora', model, 'adapter', 'adapter_config.json');
      expect(adapterConfig).toMatchObject({
        peft_type: 'LORA',
        r: 4,
        lora_alpha: 8,
        use_rslora: false,
        target_modules: LORA_TARGETS,
        base_model_name_or_path: model,
      });

      const adapterFile = path.join(ROOT, 'lora', model, 'adapter', 'adapter_model.safetensors');
      const gradsFile = path.join(ROOT, 'lora', model, 'grads.safetensors');
      const adapter = decodeSafetensors(readFileSync(adapterFile)).tensors;
      const grads = decodeSafetensors(readFileSync(gradsFile)).tensors;
      expect(adapter.size).toBe(config.num_hidden_layers * LORA_TARGETS.length * 2);
      expect([...grads.keys()].sort()).toEqual([...adapter.keys()].sort());
      const base = expectedShapes(config);
      for (const [name, tensor] of adapter) {
        const match = /^base_model\.model\.(.+)\.lora_([AB])\.weight$/.exec(name);
        expect(match, name).not.toBeNull();
        const [out, inFeatures] = base.get(`${match?.[1]}.weight`) ?? [];
        expect(tensor.shape, name).toEqual(match?.[2] === 'A' ? [4, inFeatures] : [out, 4]);
        expect(grads.get(name)?.shape, name).toEqual(tensor.shape);
        expect(
          tensor.data.some((value) => value !== 0),
          `${name} is non-zero`,
        ).toBe(true);
        expect(
          grads.get(name)?.data.some((value) => value !== 0),
          `gradient of ${name}`,
        ).toBe(true);
      }

      const loraLogits = json<{ base: string; vocab_size: number; prompts: Prompt[] }>('lora', model, 'logits.json');
      expect(loraLogits.base).toBe(model);
      expectLogits(loraLogits.prompts, config.vocab_size);
      const baseLogits = logitsFixture.models[model]?.prompts ?? [];
      expect(loraLogits.prompts.map((prompt) => prompt.ids)).toEqual(baseLogits.map((prompt) => prompt.ids));
      // the adapter changes the logits of every prompt
      loraLogits.prompts.forEach((prompt, index) => {
        const before = baseLogits[index]?.logits.flat() ?? [];
        const change = Math.max(...prompt.logits.flat().map((value, at) => Math.abs(value - (before[at] as number))));
        expect(change, prompt.name).toBeGreaterThan(0.05);
      });

      const batch = json<{
        input_ids: number[][];
        attention_mask: number[][];
        lengths: number[];
        mask: number[][];
        weights: number[][];
        pad_id: number;
        loss: number;
        token_logprobs: (number | null)[][];
      }>('lora', model, 'batch.json');
      let numerator = 0;
      let count = 0;
      batch.input_ids.forEach((row, b) => {
        const length = batch.lengths[b] as number;
        expect(batch.attention_mask[b]).toEqual(row.map((_, t) => (t < length ? 1 : 0)));
        expect(row.slice(length).every((id) => id === batch.pad_id)).toBe(true);
        expect(batch.mask[b]?.[0]).toBe(0);
        for (let t = 0; t < row.length; t += 1) {
          const logprob = batch.token_logprobs[b]?.[t];
          if (t === 0 || t >= length) {
            expect(logprob ?? null).toBeNull();
            expect(batch.mask[b]?.[t]).toBe(0);
            continue;
          }
          expect(logprob as number).toBeLessThanOrEqual(0);
          const m = batch.mask[b]?.[t] as number;
          numerator += m * (batch.weights[b]?.[t] as number) * (logprob as number);
          count += m;
        }
      });
      expect(count).toBeGreaterThan(0);
      // the README's formula, applied to the recorded logprobs, gives the recorded loss
      expect(Math.abs(-numerator / count - batch.loss)).toBeLessThan(1e-5);
    });
  }
});
