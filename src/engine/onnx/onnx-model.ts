/**
 * A Hugging Face Llama/Qwen3 model on onnxruntime: its frozen weights as float32 host arrays, and
 * the sessions of its graphs (one per graph kind, shared by every layer: the weights and LoRA
 * matrices are graph inputs). Blocks run one after the other from TypeScript, so a pass holds one
 * block's intermediates at a time.
 */
import type { HfModelConfig } from '../hf/config.js';
import { inverseFrequencies, rotaryTables } from '../hf/config.js';
import { LINEAR_MODULES, isHostLayer, isHostMatrix, widenBfloat16 } from '../hf/model.js';
import type { BaseTensors, FrozenMatrix, HostValues, LinearModule } from '../hf/model.js';
import type { LoraSettings } from '../hf/lora.js';
import { loraName, loraScale } from '../hf/lora.js';
import type { HostWeights } from '../weights.js';
import { GraphBuilder } from './graph-builder.js';
import {
  blockForwardOp,
  blockInputName,
  causalMaskValues,
  declareBlockWeights,
  linearSizes,
  rmsNormOp,
} from './block-ops.js';
import { blockBackwardOp, rmsNormBackward } from './block-backward.js';
import { blockShape } from './block-ops.js';
import type { BlockShape } from './block-ops.js';
import { createOnnxSession, loadOnnxRuntime } from './onnx-runtime.js';
import type { OnnxRuntime, OnnxSession } from './onnx-runtime.js';

type OrtTensor = import('onnxruntime-node').Tensor;

/**
 * A block's frozen weights by graph-input name: float32, or bfloat16 bits (a BF16 checkpoint's
 * matrices held in host memory) widened into a reused buffer for each run, so a large model is
 * not held twice.
 */
export type OnnxBlockWeights = ReadonlyMap<string, { readonly data: HostValues; readonly dims: readonly number[] }>;

/** A model's frozen weights for onnxruntime. */
export interface OnnxBase {
  readonly config: HfModelConfig;
  readonly shape: Omit<BlockShape, 'adapted' | 'loraScale' | 'loraRank'>;
  readonly embedding: HostValues;
  /** The output projection `[vocabulary, hidden]` (the embedding itself when tied). */
  readonly output: Float32Array;
  readonly finalNorm: Float32Array;
  readonly layers: readonly OnnxBlockWeights[];
  readonly frequencies: Float32Array;
  /** Serialises the block runs of this base: they share the buffers bfloat16 weights are widened into. */
  readonly runs: { queue: Promise<void>; readonly widened: Map<string, Float32Array> };
}

function float32(values: HostValues): Float32Array {
  if (values instanceof Float32Array) return values;
  const out = new Float32Array(values.length);
  widenBfloat16(values, out);
  return out;
}

function tensorValues(tensor: { dataSync(): unknown }): Float32Array {
  return Float32Array.from(tensor.dataSync() as Float32Array);
}

function matrixValues(matrix: FrozenMatrix): Float32Array {
  return isHostMatrix(matrix) ? float32(matrix.values) : tensorValues(matrix);
}

/**
 * The frozen weights of a loaded base model as float32 host arrays (copied from the wasm heap, or
 * widened from bfloat16 host values), for onnxruntime.
 */
export function onnxBaseOf(config: HfModelConfig, base: BaseTensors): OnnxBase {
  const vector = (value: Float32Array | { dataSync(): unknown }): Float32Array =>
    value instanceof Float32Array ? value : tensorValues(value);
  const first = base.layers[0];
  const biased = first ? LINEAR_MODULES.filter((module) => first.bias[module] !== undefined) : [];
  const layers = base.layers.map((layer) => {
    const weights = new Map<string, { data: HostValues; dims: readonly number[] }>();
    const host = isHostLayer(layer);
    weights.set('input_norm', { data: vector(layer.inputNorm), dims: [config.hiddenSize] });
    weights.set('post_attention_norm', { data: vector(layer.postAttentionNorm), dims: [config.hiddenSize] });
    if (layer.queryNorm) weights.set('q_norm', { data: vector(layer.queryNorm), dims: [config.headDimension] });
    if (layer.keyNorm) weights.set('k_norm', { data: vector(layer.keyNorm), dims: [config.headDimension] });
    for (const module of LINEAR_MODULES) {
      const matrix = layer.linear[module];
      const data = host ? (matrix as { values: HostValues }).values : tensorValues(matrix as { dataSync(): unknown });
      weights.set(blockInputName(module, 'weight'), { data, dims: [...matrix.shape] });
      const bias = layer.bias[module];
      if (bias) {
        const data = vector(bias);
        weights.set(blockInputName(module, 'bias'), { data, dims: [data.length] });
      }
    }
    return weights;
  });
  // The projection's blocks of rows, joined (one product over the whole vocabulary per chunk).
  const output = new Float32Array(config.vocabularySize * config.hiddenSize);
  let filled = 0;
  for (const block of base.output) {
    const values = matrixValues(block);
    output.set(values, filled);
    filled += values.length;
  }
  return {
    config,
    shape: blockShape(config, biased, null),
    embedding: base.hostEmbedding,
    output,
    finalNorm: vector(base.finalNorm),
    layers,
    frequencies: inverseFrequencies(config),
    runs: { queue: Promise.resolve(), widened: new Map() },
  };
}

/** The full block shape of a base with LoRA settings (or none). */
export function blockShapeOf(base: OnnxBase, settings: LoraSettings | null): BlockShape {
  return {
    ...base.shape,
    adapted: settings ? settings.targetModules : [],
    loraScale: settings ? loraScale(settings) : 0,
    loraRank: settings ? settings.rank : 0,
  };
}

/** The graph of one block's forward pass: `x` `[batch, length, hidden]` to `y`. */
export function blockForwardGraph(shape: BlockShape): GraphBuilder {
  const graph = new GraphBuilder('block-forward');
  const { x, context, weights } = blockGraphInputs(graph, shape);
  const trace = blockForwardOp(graph, shape, x, weights, context);
  graph.output(trace.output, 'y', 'float', ['batch', 'length', shape.hiddenSize]);
  return graph;
}

/** The inputs every block graph shares: `x`, the rotary tables `cos`/`sin`, `mask`, the weights. */
export function blockGraphInputs(graph: GraphBuilder, shape: BlockShape) {
  const x = graph.input('x', 'float', ['batch', 'length', shape.hiddenSize]);
  const cos = graph.input('cos', 'float', ['batch', 'length', 1, shape.headDimension]);
  const sin = graph.input('sin', 'float', ['batch', 'length', 1, shape.headDimension]);
  const mask = graph.input('mask', 'float', ['length', 'length']);
  const weights = declareBlockWeights(graph, shape);
  return { x, context: { cos, sin, mask }, weights };
}

/** The graph of final norm and output projection: `hidden` `[positions, hidden]` to `logits`. */
export function logitsGraph(base: OnnxBase): GraphBuilder {
  const graph = new GraphBuilder('logits');
  const { hiddenSize, rmsNormEpsilon } = base.shape;
  const hidden = graph.input('hidden', 'float', ['positions', hiddenSize]);
  const norm = graph.input('final_norm', 'float', [hiddenSize]);
  const output = graph.input('output', 'float', [base.config.vocabularySize, hiddenSize]);
  const normed = rmsNormOp(graph, hidden, norm, rmsNormEpsilon).y;
  graph.output(graph.op('Gemm', [normed, output], { transB: { int: 1 } }), 'logits', 'float', [
    'positions',
    base.config.vocabularySize,
  ]);
  return graph;
}

/** Per-pass inputs shared by every block: rotary tables and the causal mask. */
export interface PassContext {
  readonly batch: number;
  readonly length: number;
  readonly feeds: Record<string, OrtTensor>;
}

/** The rotary tables and mask of a pass over right-padded rows starting at `offsets`. */
export function passContext(
  ort: OnnxRuntime,
  base: OnnxBase,
  batch: number,
  length: number,
  offsets?: readonly number[],
): PassContext {
  const positions = Int32Array.from(
    { length: batch * length },
    (_, index) => (offsets?.[Math.floor(index / length)] ?? 0) + (index % length),
  );
  const d = base.config.headDimension;
  const tables = rotaryTables(base.config, base.frequencies, positions);
  return {
    batch,
    length,
    feeds: {
      cos: new ort.Tensor('float32', tables.cos, [batch, length, 1, d]),
      sin: new ort.Tensor('float32', tables.sin, [batch, length, 1, d]),
      mask: new ort.Tensor('float32', causalMaskValues(length), [length, length]),
    },
  };
}

/** The feeds of one layer's weights and LoRA matrices (from `lora`, by the engine's names). */
export function layerFeeds(
  ort: OnnxRuntime,
  base: OnnxBase,
  shape: BlockShape,
  layer: number,
  lora: HostWeights | null,
): Record<string, OrtTensor> {
  const feeds: Record<string, OrtTensor> = {};
  for (const [name, value] of base.layers[layer] as OnnxBlockWeights) {
    let data = value.data;
    if (!(data instanceof Float32Array)) {
      let buffer = base.runs.widened.get(name);
      if (!buffer) {
        buffer = new Float32Array(data.length);
        base.runs.widened.set(name, buffer);
      }
      widenBfloat16(data, buffer);
      data = buffer;
    }
    feeds[name] = new ort.Tensor('float32', data, [...value.dims]);
  }
  for (const module of shape.adapted as LinearModule[])
    for (const matrix of ['A', 'B'] as const) {
      const tensor = lora?.get(loraName(layer, module, matrix));
      if (!tensor) throw new Error(`The adapter has no ${loraName(layer, module, matrix)}.`);
      feeds[blockInputName(module, matrix)] = new ort.Tensor('float32', tensor.data, [...tensor.shape]);
    }
  return feeds;
}

/**
 * Runs `session` on one layer's weights and LoRA matrices plus `feeds`, after any other block run
 * of the same base has ended (they share the widening buffers of {@link layerFeeds}).
 */
export async function runBlock(
  ort: OnnxRuntime,
  base: OnnxBase,
  shape: BlockShape,
  session: OnnxSession,
  layer: number,
  lora: HostWeights | null,
  feeds: Record<string, OrtTensor>,
): Promise<Record<string, OrtTensor>> {
  const previous = base.runs.queue;
  let release = (): void => undefined;
  base.runs.queue = new Promise((resolve) => {
    release = resolve;
  });
  await previous;
  try {
    return (await session.run({ ...feeds, ...layerFeeds(ort, base, shape, layer, lora) })) as Record<string, OrtTensor>;
  } finally {
    release();
  }
}

/** The embedded tokens `[batch, length, hidden]` as float32. */
export function embedTokens(base: OnnxBase, tokens: ArrayLike<number>): Float32Array {
  const d = base.config.hiddenSize;
  const out = new Float32Array(tokens.length * d);
  const embedding = base.embedding;
  for (let index = 0; index < tokens.length; index += 1) {
    const id = tokens[index] as number;
    if (embedding instanceof Float32Array) out.set(embedding.subarray(id * d, (id + 1) * d), index * d);
    else widenBfloat16(embedding.subarray(id * d, (id + 1) * d), out, index * d);
  }
  return out;
}

/** The sessions of a model's forward graphs, for one block shape. */
export class OnnxForward {
  private constructor(
    readonly ort: OnnxRuntime,
    readonly base: OnnxBase,
    readonly shape: BlockShape,
    private readonly block: OnnxSession,
    private readonly logits: OnnxSession,
  ) {}

  static async create(base: OnnxBase, settings: LoraSettings | null): Promise<OnnxForward> {
    const ort = await loadOnnxRuntime();
    const shape = blockShapeOf(base, settings);
    const [block, logits] = await Promise.all([
      createOnnxSession(blockForwardGraph(shape).encode()),
      createOnnxSession(logitsGraph(base).encode()),
    ]);
    return new OnnxForward(ort, base, shape, block, logits);
  }

  /** The block outputs `[batch, length, hidden]` after the last layer; `inputs` collects each layer's input. */
  async hidden(
    tokens: Int32Array,
    batch: number,
    length: number,
    offsets: readonly number[] | undefined,
    lora: HostWeights | null,
    inputs?: OrtTensor[],
  ): Promise<OrtTensor> {
    const { ort, base } = this;
    const context = passContext(ort, base, batch, length, offsets);
    let x: OrtTensor = new ort.Tensor('float32', embedTokens(base, tokens), [batch, length, base.config.hiddenSize]);
    for (let layer = 0; layer < base.layers.length; layer += 1) {
      inputs?.push(x);
      const result = await runBlock(ort, base, this.shape, this.block, layer, lora, { x, ...context.feeds });
      x = result.y as OrtTensor;
    }
    return x;
  }

  /** Next-token logits `[positions, vocabulary]` at the flat `selected` positions (all by default). */
  async forwardLogits(
    tokens: Int32Array,
    batch: number,
    length: number,
    lora: HostWeights | null,
    selected?: Int32Array,
    offsets?: readonly number[],
  ): Promise<{ data: Float32Array; positions: number }> {
    const hidden = await this.hidden(tokens, batch, length, offsets, lora);
    const rows = gatherRows(hidden.data as Float32Array, this.base.config.hiddenSize, selected);
    const { ort, base } = this;
    const count = rows.length / base.config.hiddenSize;
    const result = await this.logits.run({
      hidden: new ort.Tensor('float32', rows, [count, base.config.hiddenSize]),
      final_norm: new ort.Tensor('float32', base.finalNorm, [base.config.hiddenSize]),
      output: new ort.Tensor('float32', base.output, [base.config.vocabularySize, base.config.hiddenSize]),
    });
    return { data: (result.logits as OrtTensor).data as Float32Array, positions: count };
  }
}

/** Rows of `[n, width]` values at `selected` (all when absent). */
export function gatherRows(values: Float32Array, width: number, selected?: Int32Array): Float32Array {
  if (!selected) return values;
  const out = new Float32Array(selected.length * width);
  selected.forEach((row, index) => out.set(values.subarray(row * width, (row + 1) * width), index * width));
  return out;
}

/** The graph-output names of a module's LoRA gradients. */
export function loraGradientName(module: LinearModule, matrix: 'A' | 'B'): string {
  return `${module}.d${matrix}`;
}

/**
 * The linear layers whose outputs a training forward pass keeps for the backward pass: the
 * products are most of a block's work, the rest (norms, rotary, attention scores, SwiGLU) is
 * cheap to compute again and the attention weights (`heads × length²` a row) the largest to keep.
 */
const SAVED_OUTPUTS: readonly LinearModule[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj'];

/** The graph value names of what a training forward pass keeps. */
function savedName(module: LinearModule, part: 'y' | 'down'): string {
  return part === 'y' ? `saved.${module}` : `saved.${module}.down`;
}

/** Floats a training forward pass keeps per token and block (see {@link SAVED_OUTPUTS}). */
export function savedFloatsPerToken(shape: BlockShape): number {
  return (
    SAVED_OUTPUTS.reduce((sum, module) => sum + linearSizes(shape, module).out, 0) +
    shape.adapted.length * shape.loraRank
  );
}

/**
 * The graph of one block's forward pass in training: `y`, and the outputs of the linear layers of
 * {@link SAVED_OUTPUTS} and LoRA's `x · A` of every adapted layer, for {@link blockBackwardGraph}.
 */
export function blockTrainingForwardGraph(shape: BlockShape): GraphBuilder {
  const graph = new GraphBuilder('block-training-forward');
  const { x, context, weights } = blockGraphInputs(graph, shape);
  const trace = blockForwardOp(graph, shape, x, weights, context);
  graph.output(trace.output, 'y', 'float', ['batch', 'length', shape.hiddenSize]);
  for (const module of SAVED_OUTPUTS)
    graph.output(trace.linearOutputs[module], savedName(module, 'y'), 'float', [
      'batch',
      'length',
      linearSizes(shape, module).out,
    ]);
  for (const module of shape.adapted)
    graph.output(trace.down[module] as string, savedName(module, 'down'), 'float', ['tokens', shape.loraRank]);
  return graph;
}

/**
 * The graph of one block's backward pass: from the block's inputs, what its training forward pass
 * kept ({@link blockTrainingForwardGraph}) and `dy` (the gradient of its output), `dx` and each
 * adapted layer's LoRA gradients. The cheap parts of the forward pass are computed again.
 */
export function blockBackwardGraph(shape: BlockShape): GraphBuilder {
  const graph = new GraphBuilder('block-backward');
  const { x, context, weights } = blockGraphInputs(graph, shape);
  const dy = graph.input('dy', 'float', ['batch', 'length', shape.hiddenSize]);
  const saved: Record<string, { y: string; down?: string | undefined }> = {};
  const down = (module: LinearModule): string | undefined =>
    shape.adapted.includes(module)
      ? graph.input(savedName(module, 'down'), 'float', ['tokens', shape.loraRank])
      : undefined;
  for (const module of SAVED_OUTPUTS)
    saved[module] = {
      y: graph.input(savedName(module, 'y'), 'float', ['batch', 'length', linearSizes(shape, module).out]),
      down: down(module),
    };
  // The block's output is not needed here: a stand-in spares computing down_proj again.
  saved['down_proj'] = { y: graph.scalar(0), down: down('down_proj') };
  const trace = blockForwardOp(graph, shape, x, weights, context, saved);
  const gradients = blockBackwardOp(graph, shape, x, weights, context, trace, dy);
  graph.output(gradients.dx, 'dx', 'float', ['batch', 'length', shape.hiddenSize]);
  for (const module of shape.adapted) {
    const pair = gradients.lora[module];
    if (!pair) throw new Error(`block-backward: no LoRA gradient for ${module}.`);
    const sizes = linearSizes(shape, module);
    graph.output(pair.dA, loraGradientName(module, 'A'), 'float', [sizes.in, shape.loraRank]);
    graph.output(pair.dB, loraGradientName(module, 'B'), 'float', [shape.loraRank, sizes.out]);
  }
  return graph;
}

/** The inputs of the head graphs: final hidden rows, final norm, output projection, targets. */
function headInputs(graph: GraphBuilder, base: OnnxBase) {
  const { hiddenSize, rmsNormEpsilon } = base.shape;
  const hidden = graph.input('hidden', 'float', ['positions', hiddenSize]);
  const norm = graph.input('final_norm', 'float', [hiddenSize]);
  const output = graph.input('output', 'float', [base.config.vocabularySize, hiddenSize]);
  const targets = graph.input('targets', 'int64', ['positions']);
  const normed = rmsNormOp(graph, hidden, norm, rmsNormEpsilon);
  const logits = graph.op('Gemm', [normed.y, output], { transB: { int: 1 } });
  return { hidden, norm, output, targets, normed, logits };
}

/**
 * The head over final hidden rows `[positions, hidden]`: final norm, output projection,
 * log-softmax, the targets' logprobs and the entropies (as the tfjs model's `targetScores`).
 */
export function headForwardGraph(base: OnnxBase): GraphBuilder {
  const graph = new GraphBuilder('head-forward');
  const { targets, logits } = headInputs(graph, base);
  const logprobs = graph.op('LogSoftmax', [logits], { axis: { int: -1 } });
  const picked = graph.op('GatherElements', [logprobs, graph.op('Unsqueeze', [targets, graph.ints([1])])], {
    axis: { int: 1 },
  });
  graph.output(graph.op('Squeeze', [picked, graph.ints([1])]), 'logprobs', 'float', ['positions']);
  const entropy = graph.op('Neg', [
    graph.op('ReduceSum', [graph.op('Mul', [graph.op('Exp', [logprobs]), logprobs]), graph.ints([-1])], {
      keepdims: { int: 0 },
    }),
  ]);
  graph.output(entropy, 'entropy', 'float', ['positions']);
  return graph;
}

/** The head's backward pass: `dhidden` from `dlogprobs` `[positions]` (the entropy is a metric only). */
export function headBackwardGraph(base: OnnxBase): GraphBuilder {
  const graph = new GraphBuilder('head-backward');
  const { hidden, norm, output, targets, normed, logits } = headInputs(graph, base);
  const upstream = graph.input('dlogprobs', 'float', ['positions']);
  const probabilities = graph.op('Softmax', [logits], { axis: { int: -1 } });
  const oneHot = graph.op('OneHot', [
    targets,
    graph.constant('int64', [], BigInt64Array.of(BigInt(base.config.vocabularySize)), 'depth'),
    graph.constant('float', [2], Float32Array.of(0, 1), 'onehot'),
  ]);
  const dLogits = graph.op('Mul', [
    graph.op('Unsqueeze', [upstream, graph.ints([1])]),
    graph.op('Sub', [oneHot, probabilities]),
  ]);
  const dNormed = graph.op('MatMul', [dLogits, output]);
  graph.output(rmsNormBackward(graph, hidden, norm, normed.inverse, dNormed), 'dhidden', 'float', [
    'positions',
    base.shape.hiddenSize,
  ]);
  return graph;
}

/** One training pass's scores, and its backward pass. */
export interface OnnxPass {
  readonly logprobs: Float32Array;
  readonly entropy: Float32Array;
  /** The LoRA gradients (by the engine's names) of `Σ dLogprobs · logprobs`. */
  backward(dLogprobs: Float32Array): Promise<Map<string, Float32Array>>;
}

/** A model's training graphs on onnxruntime, for one LoRA shape. */
export class OnnxTrainer {
  private constructor(
    readonly ort: OnnxRuntime,
    readonly base: OnnxBase,
    readonly shape: BlockShape,
    private readonly sessions: {
      readonly forward: OnnxSession;
      readonly trainingForward: OnnxSession;
      readonly backward: OnnxSession;
      readonly head: OnnxSession;
      readonly headBackward: OnnxSession;
    },
  ) {}

  static async create(base: OnnxBase, settings: LoraSettings): Promise<OnnxTrainer> {
    const ort = await loadOnnxRuntime();
    const shape = blockShapeOf(base, settings);
    const [forward, trainingForward, backward, head, headBackward] = await Promise.all(
      [
        blockForwardGraph(shape),
        blockTrainingForwardGraph(shape),
        blockBackwardGraph(shape),
        headForwardGraph(base),
        headBackwardGraph(base),
      ].map((graph) => createOnnxSession(graph.encode(), undefined, { memoryArena: false })),
    );
    return new OnnxTrainer(ort, base, shape, {
      forward: forward as OnnxSession,
      trainingForward: trainingForward as OnnxSession,
      backward: backward as OnnxSession,
      head: head as OnnxSession,
      headBackward: headBackward as OnnxSession,
    });
  }

  private headFeeds(rows: Float32Array, targets: Int32Array): Record<string, OrtTensor> {
    const { ort, base } = this;
    const { hiddenSize, vocabularySize } = base.config;
    return {
      hidden: new ort.Tensor('float32', rows, [targets.length, hiddenSize]),
      final_norm: new ort.Tensor('float32', base.finalNorm, [hiddenSize]),
      output: new ort.Tensor('float32', base.output, [vocabularySize, hiddenSize]),
      targets: new ort.Tensor(
        'int64',
        BigInt64Array.from(targets, (target) => BigInt(target)),
        [targets.length],
      ),
    };
  }

  /**
   * The logprobs of `targets[i]` after flat position `positions[i]` of right-padded `tokens`
   * `[batch, length]` and the entropies there, a chunk of at most `logitsPerChunk` logits at a time;
   * with `keep`, the pass keeps each block's input and linear outputs for {@link OnnxPass.backward}.
   */
  async pass(
    lora: HostWeights,
    tokens: Int32Array,
    batch: number,
    length: number,
    positions: Int32Array,
    offsets: readonly number[],
    targets: Int32Array,
    logitsPerChunk: number,
    keep = true,
  ): Promise<OnnxPass> {
    const { ort, base, shape } = this;
    const { hiddenSize, vocabularySize } = base.config;
    const context = passContext(ort, base, batch, length, offsets);
    // Each block's input and the outputs its training forward pass kept, for the backward pass.
    const kept: Record<string, OrtTensor>[] = [];
    let x: OrtTensor = new ort.Tensor('float32', embedTokens(base, tokens), [batch, length, hiddenSize]);
    for (let layer = 0; layer < base.layers.length; layer += 1) {
      const session = keep ? this.sessions.trainingForward : this.sessions.forward;
      const result = await runBlock(ort, base, shape, session, layer, lora, { x, ...context.feeds });
      if (keep) {
        const { y: _, ...saved } = result;
        kept.push({ x, ...(saved as Record<string, OrtTensor>) });
      }
      x = result.y as OrtTensor;
    }
    const rows = gatherRows(x.data as Float32Array, hiddenSize, positions);
    const chunk = Math.max(1, Math.floor(logitsPerChunk / vocabularySize));
    const count = positions.length;
    const logprobs = new Float32Array(count);
    const entropy = new Float32Array(count);
    for (let start = 0; start < count; start += chunk) {
      const end = Math.min(count, start + chunk);
      const result = await this.sessions.head.run(
        this.headFeeds(rows.subarray(start * hiddenSize, end * hiddenSize), targets.subarray(start, end)),
      );
      logprobs.set((result.logprobs as OrtTensor).data as Float32Array, start);
      entropy.set((result.entropy as OrtTensor).data as Float32Array, start);
    }
    const backward = async (dLogprobs: Float32Array): Promise<Map<string, Float32Array>> => {
      if (!keep) throw new Error('OnnxTrainer.pass: this pass kept nothing for a backward pass.');
      const dy = new Float32Array(batch * length * hiddenSize);
      for (let start = 0; start < count; start += chunk) {
        const end = Math.min(count, start + chunk);
        const result = await this.sessions.headBackward.run({
          ...this.headFeeds(rows.subarray(start * hiddenSize, end * hiddenSize), targets.subarray(start, end)),
          dlogprobs: new ort.Tensor('float32', dLogprobs.subarray(start, end), [end - start]),
        });
        const dRows = (result.dhidden as OrtTensor).data as Float32Array;
        // Positions are distinct: each chunk row lands on its own token.
        for (let index = start; index < end; index += 1) {
          const at = (positions[index] as number) * hiddenSize;
          dy.set(dRows.subarray((index - start) * hiddenSize, (index - start + 1) * hiddenSize), at);
        }
      }
      const gradients = new Map<string, Float32Array>();
      let upstream: OrtTensor = new ort.Tensor('float32', dy, [batch, length, hiddenSize]);
      for (let layer = base.layers.length - 1; layer >= 0; layer -= 1) {
        const result = await runBlock(ort, base, shape, this.sessions.backward, layer, lora, {
          ...(kept[layer] as Record<string, OrtTensor>),
          dy: upstream,
          ...context.feeds,
        });
        for (const module of shape.adapted)
          for (const matrix of ['A', 'B'] as const)
            gradients.set(
              loraName(layer, module, matrix),
              (result[loraGradientName(module, matrix)] as OrtTensor).data as Float32Array,
            );
        upstream = result.dx as OrtTensor;
        kept[layer] = {};
      }
      return gradients;
    };
    return { logprobs, entropy, backward };
  }
}
