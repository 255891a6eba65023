/**
 * The forward pass of a Llama or Qwen3 decoder block as {@link GraphBuilder} helpers, the same
 * operations as the tfjs model (`src/engine/hf/model.ts`): RMSNorm, linear layers with optional bias
 * and LoRA, rotary embeddings in transformers' `rotate_half` convention, grouped-query attention
 * with an additive mask, Qwen3's per-head q/k norms, SwiGLU. Activations are `[batch, length, ...]`
 * with symbolic batch and length; weights are graph values (inputs, so one session serves every
 * layer), `[out, in]` as transformers stores them. Each helper answers the values its backward pass
 * needs besides its output (see `block-backward.ts`).
 */
import type { HfModelConfig } from '../hf/config.js';
import type { LinearModule } from '../hf/model.js';
import type { GraphBuilder, GraphValue } from './graph-builder.js';

/** The sizes of a block and which of its parts exist, the same for every layer of a model. */
export interface BlockShape {
  readonly hiddenSize: number;
  readonly headCount: number;
  readonly keyValueHeadCount: number;
  readonly headDimension: number;
  readonly intermediateSize: number;
  readonly rmsNormEpsilon: number;
  /** Qwen3's per-head RMSNorm of queries and keys. */
  readonly queryKeyNorm: boolean;
  /** The linear layers with a bias (Qwen2-style q/k/v biases, a Llama with `attention_bias`). */
  readonly biased: readonly LinearModule[];
  /** The linear layers with a LoRA adapter. */
  readonly adapted: readonly LinearModule[];
  /** LoRA's scale, `alpha / rank`. */
  readonly loraScale: number;
  /** LoRA's rank (0 without adapters). */
  readonly loraRank: number;
}

/** LoRA adapters on a block, as {@link blockShape} takes them. */
export interface BlockLora {
  readonly modules: readonly LinearModule[];
  /** `alpha / rank` (or rsLoRA's `alpha / sqrt(rank)`). */
  readonly scale: number;
  readonly rank: number;
}

/**
 * The block shape of a model `config` whose `biased` linear layers have a bias, with the adapters
 * `lora` (or none).
 */
export function blockShape(config: HfModelConfig, biased: readonly LinearModule[], lora: BlockLora | null): BlockShape {
  return {
    hiddenSize: config.hiddenSize,
    headCount: config.headCount,
    keyValueHeadCount: config.keyValueHeadCount,
    headDimension: config.headDimension,
    intermediateSize: config.intermediateSize,
    rmsNormEpsilon: config.rmsNormEpsilon,
    queryKeyNorm: config.queryKeyNorm,
    biased,
    adapted: lora?.modules ?? [],
    loraScale: lora?.scale ?? 0,
    loraRank: lora?.rank ?? 0,
  };
}

/** A linear layer's weights as graph values: `weight` `[out, in]`, LoRA `a` `[in, rank]`, `b` `[rank, out]`. */
export interface LinearValues {
  readonly weight: GraphValue;
  readonly bias?: GraphValue | undefined;
  readonly lora?: { readonly a: GraphValue; readonly b: GraphValue; readonly scale: number } | undefined;
}

/** A block's weights as graph values. */
export interface BlockValues {
  readonly inputNorm: GraphValue;
  readonly postAttentionNorm: GraphValue;
  readonly linear: Readonly<Record<LinearModule, LinearValues>>;
  readonly queryNorm?: GraphValue | undefined;
  readonly keyNorm?: GraphValue | undefined;
}

/** The linear layers' output and input sizes. */
export function linearSizes(shape: BlockShape, module: LinearModule): { out: number; in: number } {
  const q = shape.headCount * shape.headDimension;
  const kv = shape.keyValueHeadCount * shape.headDimension;
  switch (module) {
    case 'q_proj':
      return { out: q, in: shape.hiddenSize };
    case 'k_proj':
    case 'v_proj':
      return { out: kv, in: shape.hiddenSize };
    case 'o_proj':
      return { out: shape.hiddenSize, in: q };
    case 'gate_proj':
    case 'up_proj':
      return { out: shape.intermediateSize, in: shape.hiddenSize };
    case 'down_proj':
      return { out: shape.hiddenSize, in: shape.intermediateSize };
  }
}

/** The graph-input name of a block weight (`input_norm`, `q_proj`, `q_proj.bias`, `q_proj.A`, ...). */
export function blockInputName(module: LinearModule, part: 'weight' | 'bias' | 'A' | 'B'): string {
  return part === 'weight' ? module : `${module}.${part}`;
}

const LINEAR_ORDER: readonly LinearModule[] = [
  'q_proj',
  'k_proj',
  'v_proj',
  'o_proj',
  'gate_proj',
  'up_proj',
  'down_proj',
];

/**
 * Declares a block's weights as graph inputs (named by {@link blockInputName}, the norms
 * `input_norm`, `post_attention_norm`, `q_norm`, `k_norm`), so that one session runs every layer.
 */
export function declareBlockWeights(graph: GraphBuilder, shape: BlockShape): BlockValues {
  const linear = {} as Record<LinearModule, LinearValues>;
  for (const module of LINEAR_ORDER) {
    const { out, in: input } = linearSizes(shape, module);
    const weight = graph.input(blockInputName(module, 'weight'), 'float', [out, input]);
    const bias = shape.biased.includes(module)
      ? graph.input(blockInputName(module, 'bias'), 'float', [out])
      : undefined;
    const lora = shape.adapted.includes(module)
      ? {
          a: graph.input(blockInputName(module, 'A'), 'float', [input, shape.loraRank]),
          b: graph.input(blockInputName(module, 'B'), 'float', [shape.loraRank, out]),
          scale: shape.loraScale,
        }
      : undefined;
    linear[module] = { weight, bias, lora };
  }
  return {
    inputNorm: graph.input('input_norm', 'float', [shape.hiddenSize]),
    postAttentionNorm: graph.input('post_attention_norm', 'float', [shape.hiddenSize]),
    linear,
    queryNorm: shape.queryKeyNorm ? graph.input('q_norm', 'float', [shape.headDimension]) : undefined,
    keyNorm: shape.queryKeyNorm ? graph.input('k_norm', 'float', [shape.headDimension]) : undefined,
  };
}

/** RMSNorm over the last axis: `x · rsqrt(mean(x²) + ε) · weight`; answers the output and the `rsqrt` factor. */
export function rmsNormOp(
  graph: GraphBuilder,
  x: GraphValue,
  weight: GraphValue,
  epsilon: number,
): { y: GraphValue; inverse: GraphValue } {
  const variance = graph.op('ReduceMean', [graph.op('Mul', [x, x]), graph.ints([-1])], { keepdims: { int: 1 } });
  const inverse = graph.op('Reciprocal', [graph.op('Sqrt', [graph.op('Add', [variance, graph.scalar(epsilon)])])]);
  return { y: graph.op('Mul', [graph.op('Mul', [x, inverse]), weight]), inverse };
}

/**
 * A linear layer over `x` `[..., in]`: `x · Wᵀ (+ bias) + s · (x · A) · B` (LoRA with the engine's
 * `A` `[in, rank]`, `B` `[rank, out]`). `x` is made 2-D for a `Gemm` with a transposed weight
 * (no copy of the weight per call); the output has `x`'s leading axes. Answers the output and
 * LoRA's `x · A` (`[tokens, rank]`).
 */
export function linearOp(
  graph: GraphBuilder,
  x: GraphValue,
  values: LinearValues,
  inSize: number,
  outSize: number,
): { y: GraphValue; down?: GraphValue | undefined } {
  const flat = graph.op('Reshape', [x, graph.ints([-1, inSize])]);
  const inputs = values.bias === undefined ? [flat, values.weight] : [flat, values.weight, values.bias];
  let y = graph.op('Gemm', inputs, { transB: { int: 1 } });
  let down: GraphValue | undefined;
  if (values.lora) {
    down = graph.op('MatMul', [flat, values.lora.a]);
    // The scale goes on the small B, not on the tokens × out product.
    y = graph.op('Add', [
      y,
      graph.op('MatMul', [down, graph.op('Mul', [values.lora.b, graph.scalar(values.lora.scale)])]),
    ]);
  }
  return { y: graph.op('Reshape', [y, leadingShape(graph, x, [outSize])]), down };
}

/** `x`'s shape with the last axis replaced by `tail`. */
export function leadingShape(graph: GraphBuilder, x: GraphValue, tail: readonly number[]): GraphValue {
  return graph.op('Concat', [graph.op('Shape', [x], { end: { int: -1 } }), graph.ints(tail)], { axis: { int: 0 } });
}

/** transformers' `rotate_half` over the last axis of size `headDimension`: `[-x2, x1]`. */
export function rotateHalfOp(graph: GraphBuilder, x: GraphValue, headDimension: number): GraphValue {
  const half = headDimension / 2;
  const [first, second] = graph.opN('Split', [x, graph.ints([half, half])], 2, { axis: { int: -1 } }) as [
    GraphValue,
    GraphValue,
  ];
  return graph.op('Concat', [graph.op('Neg', [second]), first], { axis: { int: -1 } });
}

/**
 * Rotary embedding of `x` `[batch, length, heads, headDim]`: `x · cos + rotate_half(x) · sin`, with
 * `cos` and `sin` `[batch, length, 1, headDim]` (per row, so rows may start at different offsets).
 */
export function rotaryOp(
  graph: GraphBuilder,
  x: GraphValue,
  cos: GraphValue,
  sin: GraphValue,
  headDimension: number,
): GraphValue {
  return graph.op('Add', [graph.op('Mul', [x, cos]), graph.op('Mul', [rotateHalfOp(graph, x, headDimension), sin])]);
}

/** SwiGLU: `silu(gate) · up`. */
export function swigluOp(graph: GraphBuilder, gate: GraphValue, up: GraphValue): GraphValue {
  return graph.op('Mul', [graph.op('Mul', [gate, graph.op('Sigmoid', [gate])]), up]);
}

/**
 * The additive causal mask `[length, length]` of a right-padded batch (0 on and below the
 * diagonal, -1e9 above), for {@link attentionOp}. Right padding needs no more: a row's padding
 * comes after its tokens, which the causal mask already hides from them.
 */
export function causalMaskValues(length: number): Float32Array {
  const values = new Float32Array(length * length);
  for (let row = 0; row < length; row += 1)
    for (let column = row + 1; column < length; column += 1) values[row * length + column] = -1e9;
  return values;
}

/** What {@link attentionOp} answers: its output and the values its backward pass uses. */
export interface AttentionTrace {
  /** `[batch, queries, heads · headDim]`. */
  readonly output: GraphValue;
  /** Queries grouped by key/value head, `[batch, kvHeads, groups, queries, headDim]`. */
  readonly queries: GraphValue;
  /** `[batch, kvHeads, 1, keys, headDim]`. */
  readonly keys: GraphValue;
  /** `[batch, kvHeads, 1, keys, headDim]`. */
  readonly values: GraphValue;
  /** Softmax weights `[batch, kvHeads, groups, queries, keys]`. */
  readonly probabilities: GraphValue;
}

/**
 * Grouped-query attention: queries `q` `[batch, queries, heads, headDim]`, keys `k` and values `v`
 * `[batch, keys, kvHeads, headDim]`; query head `h` uses key/value head `floor(h / groups)`, and no
 * key or value is repeated (the products broadcast them over the groups). `mask` is added to the
 * scaled scores `[batch, kvHeads, groups, queries, keys]` (any shape that broadcasts to it:
 * `[queries, keys]` for {@link causalMaskValues}, `[batch, 1, 1, 1, keys]` for a decoding step's
 * padding).
 */
export function attentionOp(
  graph: GraphBuilder,
  shape: BlockShape,
  q: GraphValue,
  k: GraphValue,
  v: GraphValue,
  mask: GraphValue,
): AttentionTrace {
  const kvHeads = shape.keyValueHeadCount;
  const groups = shape.headCount / kvHeads;
  const d = shape.headDimension;
  // [b, t, kv, g, d] -> [b, kv, g, t, d]
  const queries = graph.op('Transpose', [graph.op('Reshape', [q, graph.ints([0, 0, kvHeads, groups, d])])], {
    perm: { ints: [0, 2, 3, 1, 4] },
  });
  // [b, s, kv, d] -> [b, kv, 1, s, d] and [b, kv, 1, d, s]
  const keys = graph.op('Unsqueeze', [graph.op('Transpose', [k], { perm: { ints: [0, 2, 1, 3] } }), graph.ints([2])]);
  const values = graph.op('Unsqueeze', [graph.op('Transpose', [v], { perm: { ints: [0, 2, 1, 3] } }), graph.ints([2])]);
  const keysT = graph.op('Unsqueeze', [graph.op('Transpose', [k], { perm: { ints: [0, 2, 3, 1] } }), graph.ints([2])]);
  const scores = graph.op('Mul', [graph.op('MatMul', [queries, keysT]), graph.scalar(1 / Math.sqrt(d))]);
  const probabilities = graph.op('Softmax', [graph.op('Add', [scores, mask])], { axis: { int: -1 } });
  // [b, kv, g, t, d] -> [b, t, kv, g, d] -> [b, t, heads · d]
  const merged = graph.op('Transpose', [graph.op('MatMul', [probabilities, values])], {
    perm: { ints: [0, 3, 1, 2, 4] },
  });
  const output = graph.op('Reshape', [merged, graph.ints([0, 0, shape.headCount * d])]);
  return { output, queries, keys, values, probabilities };
}

/** Everything one block's forward pass computes, for its backward pass (`block-backward.ts`). */
export interface BlockTrace {
  readonly output: GraphValue;
  readonly inputNorm: { readonly y: GraphValue; readonly inverse: GraphValue };
  /** LoRA's `x · A` of each adapted linear layer. */
  readonly down: Partial<Record<LinearModule, GraphValue>>;
  /** Each linear layer's output. */
  readonly linearOutputs: Readonly<Record<LinearModule, GraphValue>>;
  /** q/k/v projections reshaped to heads, before the norms and rotation. */
  readonly qHeads: GraphValue;
  readonly kHeads: GraphValue;
  readonly queryNorm?: { readonly y: GraphValue; readonly inverse: GraphValue } | undefined;
  readonly keyNorm?: { readonly y: GraphValue; readonly inverse: GraphValue } | undefined;
  /** Rotated queries and keys, values: `[batch, length, heads, headDim]`. */
  readonly q: GraphValue;
  readonly k: GraphValue;
  readonly v: GraphValue;
  readonly attention: AttentionTrace;
  /** The residual stream after attention. */
  readonly middle: GraphValue;
  readonly postNorm: { readonly y: GraphValue; readonly inverse: GraphValue };
  readonly gate: GraphValue;
  readonly up: GraphValue;
  readonly activated: GraphValue;
}

/** Rotary tables and the attention mask of a block's forward pass. */
export interface BlockContextValues {
  /** `[batch, length, 1, headDim]`. */
  readonly cos: GraphValue;
  readonly sin: GraphValue;
  /** See {@link attentionOp}. */
  readonly mask: GraphValue;
  /**
   * Turns this step's (rotated) keys and values `[batch, length, kvHeads, headDim]` into the ones
   * attended over (a sampler prepends its cache); identity by default.
   */
  readonly keyValues?: ((k: GraphValue, v: GraphValue) => { k: GraphValue; v: GraphValue }) | undefined;
}

/**
 * Linear layers' outputs (and LoRA's `x · A`) a forward pass kept, by module: a backward graph
 * passes them to {@link blockForwardOp} so it does not compute those products again.
 */
export type SavedLinears = Partial<
  Record<LinearModule, { readonly y: GraphValue; readonly down?: GraphValue | undefined }>
>;

/**
 * One decoder block over `x` `[batch, length, hidden]`: attention and SwiGLU MLP, each after an
 * RMSNorm and with its residual, as the tfjs model's `blockForward`.
 */
export function blockForwardOp(
  graph: GraphBuilder,
  shape: BlockShape,
  x: GraphValue,
  weights: BlockValues,
  context: BlockContextValues,
  saved?: SavedLinears,
): BlockTrace {
  const { headCount: heads, keyValueHeadCount: kvHeads, headDimension: d, rmsNormEpsilon: epsilon } = shape;
  const down: Partial<Record<LinearModule, GraphValue>> = {};
  const linearOutputs = {} as Record<LinearModule, GraphValue>;
  const linear = (module: LinearModule, input: GraphValue): GraphValue => {
    const known = saved?.[module];
    const sizes = linearSizes(shape, module);
    const result = known ?? linearOp(graph, input, weights.linear[module], sizes.in, sizes.out);
    if (result.down !== undefined) down[module] = result.down;
    linearOutputs[module] = result.y;
    return result.y;
  };
  const inputNorm = rmsNormOp(graph, x, weights.inputNorm, epsilon);
  const qHeads = graph.op('Reshape', [linear('q_proj', inputNorm.y), graph.ints([0, 0, heads, d])]);
  const kHeads = graph.op('Reshape', [linear('k_proj', inputNorm.y), graph.ints([0, 0, kvHeads, d])]);
  const v = graph.op('Reshape', [linear('v_proj', inputNorm.y), graph.ints([0, 0, kvHeads, d])]);
  const queryNorm = weights.queryNorm ? rmsNormOp(graph, qHeads, weights.queryNorm, epsilon) : undefined;
  const keyNorm = weights.keyNorm ? rmsNormOp(graph, kHeads, weights.keyNorm, epsilon) : undefined;
  const q = rotaryOp(graph, queryNorm?.y ?? qHeads, context.cos, context.sin, d);
  const k = rotaryOp(graph, keyNorm?.y ?? kHeads, context.cos, context.sin, d);
  const attended = context.keyValues ? context.keyValues(k, v) : { k, v };
  const attention = attentionOp(graph, shape, q, attended.k, attended.v, context.mask);
  const middle = graph.op('Add', [x, linear('o_proj', attention.output)]);
  const postNorm = rmsNormOp(graph, middle, weights.postAttentionNorm, epsilon);
  const gate = linear('gate_proj', postNorm.y);
  const up = linear('up_proj', postNorm.y);
  const activated = swigluOp(graph, gate, up);
  const output = graph.op('Add', [middle, linear('down_proj', activated)]);
  return {
    output,
    inputNorm,
    down,
    linearOutputs,
    qHeads,
    kHeads,
    queryNorm,
    keyNorm,
    q,
    k,
    v,
    attention,
    middle,
    postNorm,
    gate,
    up,
    activated,
  };
}
