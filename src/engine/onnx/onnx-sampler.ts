/**
 * Batched sampling of Hugging Face models on onnxruntime: the prefill and decoding graphs of
 * `hf-graphs.ts` run by one session each (per adapter shape), with the model's weights and the
 * policy's LoRA matrices passed as inputs (host arrays wrapped once, never copied per step), the
 * key/value cache held in host memory between steps ({@link OnnxKeyValueCache}), and the shared
 * generation loop of `../sampler.ts` drawing tokens from the last position's logits. Embeddings are
 * looked up and rotary tables computed on the host, as on the tfjs path.
 */
import type { Tensor } from '@tensorflow/tfjs-core';
import type { HfModelConfig } from '../hf/config.js';
import { inverseFrequencies, rotaryTables } from '../hf/config.js';
import type { LoraSettings } from '../hf/lora.js';
import { loraName, loraScale } from '../hf/lora.js';
import { LINEAR_MODULES, embedRows, isHostLayer, isHostMatrix, widenBfloat16 } from '../hf/model.js';
import type { BaseTensors, HostValues, LinearModule } from '../hf/model.js';
import { generateSequences } from '../sampler.js';
import type { GeneratedSequence, GenerationRow, StepDecoder } from '../sampler.js';
import type { HostWeights } from '../weights.js';
import type { TextLayer } from '../../text/loader.js';
import { OnnxKeyValueCache } from './onnx-cache.js';
import { causalMaskValues } from './block-ops.js';
import { HF_GRAPH_INPUT, buildDecodeGraph, buildPrefillGraph, layerInput, loraShapeKey } from './hf-graphs.js';
import type { LoraShape } from './hf-graphs.js';
import { createOnnxSession, loadOnnxRuntime } from './onnx-runtime.js';
import type { OnnxRuntime, OnnxSession } from './onnx-runtime.js';

type OrtTensor = InstanceType<OnnxRuntime['Tensor']>;

/** Completion text leaves out special tokens, as vLLM's `skip_special_tokens` default does. */
const SKIP_SPECIAL = { skipSpecialTokens: true } as const;

/** Positions a new cache holds before it first grows (it doubles after). */
const INITIAL_DECODE_ROOM = 64;

/** Float32 host values of a frozen weight: a tfjs tensor's (read once), or host values widened. */
function floats(value: Tensor | HostValues): Float32Array {
  if (value instanceof Float32Array) return value;
  if (value instanceof Uint16Array) {
    const out = new Float32Array(value.length);
    widenBfloat16(value, out);
    return out;
  }
  return value.dataSync() as Float32Array;
}

/**
 * The output projection `[vocabulary, hidden]` as one float32 array: a view when its blocks are
 * consecutive float32 views of one buffer (the tied embedding in host memory), else one copy
 * (bfloat16 blocks widened straight into it).
 */
function outputProjection(base: BaseTensors, config: HfModelConfig): Float32Array {
  const size = config.vocabularySize * config.hiddenSize;
  const host = base.output.map((block) => (isHostMatrix(block) ? block.values : null));
  const first = host[0];
  if (first instanceof Float32Array) {
    let offset = first.byteOffset;
    const contiguous = host.every((values) => {
      const ok = values instanceof Float32Array && values.buffer === first.buffer && values.byteOffset === offset;
      offset += 4 * (values?.length ?? 0);
      return ok;
    });
    if (contiguous) return new Float32Array(first.buffer, first.byteOffset, size);
  }
  const out = new Float32Array(size);
  let at = 0;
  base.output.forEach((block, index) => {
    const values = host[index];
    if (values instanceof Uint16Array) widenBfloat16(values, out, at);
    else out.set(values ?? floats(block as Tensor), at);
    at += block.shape[0] * config.hiddenSize;
  });
  return out;
}

/** The prefill and decoding sessions of one adapter shape. */
interface HfSessions {
  readonly prefill: OnnxSession;
  readonly decode: OnnxSession;
}

/**
 * A Hugging Face base model ready for onnxruntime: its weights as input tensors over host arrays
 * and its sessions by adapter shape (built on first use). Shared by every policy of the model.
 */
export class OnnxHfModel {
  private readonly sessions = new Map<string, Promise<HfSessions>>();

  private constructor(
    readonly ort: OnnxRuntime,
    readonly config: HfModelConfig,
    readonly base: BaseTensors,
    readonly frequencies: Float32Array,
    /** The base weights by input name. */
    readonly weights: Readonly<Record<string, OrtTensor>>,
    private readonly threads: number | undefined,
  ) {}

  /**
   * Wraps a loaded base model's weights (host arrays as they are, float32; bfloat16 widened once;
   * tensors in the wasm heap read once) for onnxruntime. `threads` is onnxruntime's intra-op
   * thread count (every core by default).
   */
  static async create(config: HfModelConfig, base: BaseTensors, threads?: number): Promise<OnnxHfModel> {
    const ort = await loadOnnxRuntime();
    const weights: Record<string, OrtTensor> = {};
    const put = (name: string, values: Float32Array, dims: readonly number[]): void => {
      weights[name] = new ort.Tensor('float32', values, [...dims]);
    };
    const d = config.hiddenSize;
    base.layers.forEach((layer, index) => {
      const host = isHostLayer(layer);
      const vector = (value: Float32Array | Tensor): Float32Array => floats(value);
      put(layerInput(index, 'input_norm'), vector(layer.inputNorm), [d]);
      put(layerInput(index, 'post_attention_norm'), vector(layer.postAttentionNorm), [d]);
      if (layer.queryNorm) put(layerInput(index, 'q_norm'), vector(layer.queryNorm), [config.headDimension]);
      if (layer.keyNorm) put(layerInput(index, 'k_norm'), vector(layer.keyNorm), [config.headDimension]);
      for (const module of LINEAR_MODULES) {
        const matrix = layer.linear[module];
        const values = host ? floats((matrix as { values: HostValues }).values) : floats(matrix as Tensor);
        put(layerInput(index, `${module}.weight`), values, matrix.shape);
        const bias = layer.bias[module];
        if (bias) put(layerInput(index, `${module}.bias`), vector(bias), [matrix.shape[0]]);
      }
    });
    put(HF_GRAPH_INPUT.finalNorm, floats(base.finalNorm), [d]);
    put(HF_GRAPH_INPUT.output, outputProjection(base, config), [config.vocabularySize, d]);
    return new OnnxHfModel(ort, config, base, inverseFrequencies(config), weights, threads);
  }

  /** The sessions of an adapter shape (`null`: no adapter), built once. */
  sessionsFor(lora: LoraShape | null): Promise<HfSessions> {
    const key = loraShapeKey(lora);
    let sessions = this.sessions.get(key);
    if (!sessions) {
      // Sampling shares the cores with the training worker (and an HTTP server): pool threads that
      // spin between ops took 1.5-2x longer per decoding step on 2 busy cores than sleeping ones.
      // The prefill runs once a batch with large intermediates: freed after each run rather than
      // kept in an arena; the decoding step runs every token with small ones.
      sessions = (async () => ({
        prefill: await createOnnxSession(buildPrefillGraph(this.config, lora), this.threads, {
          spinning: false,
          memoryArena: false,
        }),
        decode: await createOnnxSession(buildDecodeGraph(this.config, lora), this.threads, { spinning: false }),
      }))();
      sessions.catch(() => this.sessions.delete(key));
      this.sessions.set(key, sessions);
    }
    return sessions;
  }

  /** Frees the sessions. */
  async release(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    for (const sessions of all) {
      try {
        const { prefill, decode } = await sessions;
        await prefill.release();
        await decode.release();
      } catch {
        // A session that failed to build holds nothing.
      }
    }
  }
}

/** A policy's LoRA adapter for onnxruntime: its shape and its matrices by input name (`B` scaled). */
export interface OnnxLora {
  readonly shape: LoraShape;
  readonly inputs: Readonly<Record<string, OrtTensor>>;
}

/**
 * An adapter's host weights (`A` `[in, rank]`, `B` `[rank, out]`, as `readAdapter` gives them) as
 * onnxruntime inputs (the graph scales `B`, as the tfjs path does).
 */
export async function onnxLora(config: HfModelConfig, settings: LoraSettings, weights: HostWeights): Promise<OnnxLora> {
  const ort = await loadOnnxRuntime();
  const inputs: Record<string, OrtTensor> = {};
  for (let layer = 0; layer < config.layerCount; layer += 1)
    for (const module of settings.targetModules) {
      const a = weights.get(loraName(layer, module, 'A'));
      const b = weights.get(loraName(layer, module, 'B'));
      if (!a || !b) throw new Error(`The adapter lacks the LoRA matrices of layer ${layer}'s ${module}.`);
      inputs[layerInput(layer, `${module}.lora_a`)] = new ort.Tensor('float32', a.data, [...a.shape]);
      inputs[layerInput(layer, `${module}.lora_b`)] = new ort.Tensor('float32', b.data, [...b.shape]);
    }
  return {
    shape: {
      rank: settings.rank,
      modules: settings.targetModules as readonly LinearModule[],
      scale: loraScale(settings),
    },
    inputs,
  };
}

/** Options of {@link onnxStepDecoder} and {@link generateHfOnnx}. */
export interface OnnxSamplingOptions {
  /**
   * Positions a new cache holds past the prompt before it first grows (it doubles after).
   * @default 64
   */
  readonly initialRoom?: number | undefined;
}

/**
 * The {@link StepDecoder} of a model and adapter on onnxruntime: each pass is one session run over
 * the whole model; the cache stays in host memory between steps.
 */
export async function onnxStepDecoder(
  model: OnnxHfModel,
  lora: OnnxLora | null,
  text: Pick<TextLayer, 'stopTokenIds' | 'decode'>,
  options: OnnxSamplingOptions = {},
): Promise<StepDecoder<OnnxKeyValueCache>> {
  const room = Math.max(1, options.initialRoom ?? INITIAL_DECODE_ROOM);
  const { ort, config } = model;
  const sessions = await model.sessionsFor(lora?.shape ?? null);
  const constant = { ...model.weights, ...(lora?.inputs ?? {}) };
  const stopIds = new Set(text.stopTokenIds);
  const d = config.headDimension;
  const float = (values: Float32Array, dims: readonly number[]): OrtTensor =>
    new ort.Tensor('float32', values, [...dims]);
  const rotary = (positions: ArrayLike<number>, batch: number): { cos: OrtTensor; sin: OrtTensor } => {
    const tables = rotaryTables(config, model.frequencies, positions);
    const dims = [batch, positions.length / batch, 1, d];
    return { cos: float(tables.cos, dims), sin: float(tables.sin, dims) };
  };
  const logitsOf = (output: Record<string, OrtTensor>): Float32Array =>
    output[HF_GRAPH_INPUT.logits]?.data as Float32Array;
  return {
    vocabularySize: config.vocabularySize,
    contextLength: config.contextLength,
    headCount: config.headCount,
    attentionWindow: undefined,
    prefill: async (prompts, promptLength) => {
      const batch = prompts.length;
      const tokens = new Int32Array(batch * promptLength);
      prompts.forEach((prompt, index) => tokens.set(prompt, index * promptLength));
      const positions = Int32Array.from({ length: batch * promptLength }, (_, index) => index % promptLength);
      const last = BigInt64Array.from(prompts, (prompt, row) => BigInt(row * promptLength + prompt.length - 1));
      const { cos, sin } = rotary(positions, batch);
      const output = (await sessions.prefill.run({
        ...constant,
        [HF_GRAPH_INPUT.hidden]: float(embedRows(model, tokens), [batch, promptLength, config.hiddenSize]),
        [HF_GRAPH_INPUT.cos]: cos,
        [HF_GRAPH_INPUT.sin]: sin,
        [HF_GRAPH_INPUT.causalMask]: float(causalMaskValues(promptLength), [promptLength, promptLength]),
        [HF_GRAPH_INPUT.last]: new ort.Tensor('int64', last, [batch]),
      })) as Record<string, OrtTensor>;
      const cache = new OnnxKeyValueCache(config.layerCount, batch, config.keyValueHeadCount, d, promptLength + room);
      for (let layer = 0; layer < config.layerCount; layer += 1)
        cache.writePositions(
          layer,
          0,
          output[layerInput(layer, 'key')]?.data as Float32Array,
          output[layerInput(layer, 'value')]?.data as Float32Array,
          promptLength,
        );
      cache.length = promptLength;
      return { logits: logitsOf(output), cache };
    },
    decodeStep: async (cache, tokens, positions, keyMask) => {
      const batch = tokens.length;
      const held = cache.length;
      if (keyMask.length !== batch * (held + 1))
        throw new Error(`Expected a key mask of ${batch} x ${held + 1}, got ${keyMask.length} values.`);
      // The cache's slots then the new token: the held positions as the loop masks them, the
      // slots not yet written hidden.
      const capacity = cache.capacity;
      const mask = new Float32Array(batch * (capacity + 1)).fill(-1e9);
      for (let row = 0; row < batch; row += 1) {
        mask.set(keyMask.subarray(row * (held + 1), row * (held + 1) + held), row * (capacity + 1));
        mask[row * (capacity + 1) + capacity] = keyMask[row * (held + 1) + held] as number;
      }
      const { cos, sin } = rotary(positions, batch);
      const feeds: Record<string, OrtTensor> = {
        ...constant,
        [HF_GRAPH_INPUT.hidden]: float(embedRows(model, tokens), [batch, 1, config.hiddenSize]),
        [HF_GRAPH_INPUT.keyMask]: float(mask, [batch, capacity + 1]),
        [HF_GRAPH_INPUT.cos]: cos,
        [HF_GRAPH_INPUT.sin]: sin,
      };
      const kv = config.keyValueHeadCount;
      for (let layer = 0; layer < config.layerCount; layer += 1) {
        const buffers = cache.buffers(layer);
        feeds[layerInput(layer, 'past_keys')] = float(buffers.keys, [batch, kv, d, capacity]);
        feeds[layerInput(layer, 'past_values')] = float(buffers.values, [batch, kv, capacity, d]);
      }
      const output = (await sessions.decode.run(feeds)) as Record<string, OrtTensor>;
      for (let layer = 0; layer < config.layerCount; layer += 1)
        cache.writePosition(
          layer,
          held,
          output[layerInput(layer, 'key')]?.data as Float32Array,
          output[layerInput(layer, 'value')]?.data as Float32Array,
        );
      cache.length = held + 1;
      return { logits: logitsOf(output), cache };
    },
    selectCacheRows: (cache, rows) => cache.selectRows(rows),
    joinCaches: (caches) => OnnxKeyValueCache.join(caches),
    // Host buffers: the garbage collector frees them.
    disposeCache: () => undefined,
    decodeText: (ids) => text.decode(ids, SKIP_SPECIAL),
    isEndToken: (id) => stopIds.has(id),
  };
}

/**
 * {@link generateHf} on onnxruntime: extends every row until it ends (the model's end-of-turn
 * tokens, a stop sequence, its token budget), sharing each forward pass across rows.
 */
export async function generateHfOnnx(
  model: OnnxHfModel,
  lora: OnnxLora | null,
  text: Pick<TextLayer, 'stopTokenIds' | 'decode'>,
  rows: readonly GenerationRow[],
  options: OnnxSamplingOptions = {},
): Promise<GeneratedSequence[]> {
  return generateSequences(await onnxStepDecoder(model, lora, text, options), rows);
}
