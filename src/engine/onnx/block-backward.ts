/**
 * Hand-derived backward passes of the {@link blockForwardOp} building blocks, as GraphBuilder
 * helpers: the gradient of a block's input and of its LoRA matrices from the gradient of its
 * output (the frozen weights get none). A block's backward graph recomputes its forward pass
 * (about a third more work) so a training pass keeps only each block's input.
 *
 * - RMSNorm `y = x·r·w`, `r = (mean(x²)+ε)^-½`: `dx = r·g − x·r³·mean(g·x)` with `g = dy·w`.
 * - Linear `y = x·Wᵀ + s·(x·A)·B`: `dx = dy·W + (s·dy·Bᵀ)·Aᵀ`, `dA = xᵀ·(s·dy·Bᵀ)`, `dB = s·(x·A)ᵀ·dy`.
 * - Rotary `y = x·cos + rot(x)·sin` with `rot(x) = [-x₂, x₁]` (so `rotᵀ = -rot`): `dx = dy·cos − rot(dy·sin)`.
 * - Attention `P = softmax(c·Q·Kᵀ + M)`, `O = P·V`: `dP = dO·Vᵀ`, `dS = P·(dP − Σ dP·P)`,
 *   `dQ = c·dS·K`, `dK = c·dSᵀ·Q`, `dV = Pᵀ·dO`, the last two summed over the query heads of a
 *   key/value head.
 * - SwiGLU `a = g·σ(g)·u`: `du = da·g·σ(g)`, `dg = da·u·σ(g)·(1 + g·(1 − σ(g)))`.
 */
import type { LinearModule } from '../hf/model.js';
import { leadingShape, linearSizes, rotateHalfOp } from './block-ops.js';
import type { BlockContextValues, BlockShape, BlockTrace, BlockValues, LinearValues } from './block-ops.js';
import type { GraphBuilder, GraphValue } from './graph-builder.js';

/** Gradient of RMSNorm's input; `inverse` is the forward pass's `rsqrt` factor. */
export function rmsNormBackward(
  graph: GraphBuilder,
  x: GraphValue,
  weight: GraphValue,
  inverse: GraphValue,
  dy: GraphValue,
): GraphValue {
  const scaled = graph.op('Mul', [dy, weight]);
  const mean = graph.op('ReduceMean', [graph.op('Mul', [scaled, x]), graph.ints([-1])], { keepdims: { int: 1 } });
  const cube = graph.op('Mul', [graph.op('Mul', [inverse, inverse]), inverse]);
  return graph.op('Sub', [graph.op('Mul', [scaled, inverse]), graph.op('Mul', [x, graph.op('Mul', [cube, mean])])]);
}

/** Gradients of a linear layer: of its input (shaped like `x`) and of its LoRA matrices. */
export function linearBackward(
  graph: GraphBuilder,
  x: GraphValue,
  values: LinearValues,
  down: GraphValue | undefined,
  dy: GraphValue,
  inSize: number,
  outSize: number,
): { dx: GraphValue; dA?: GraphValue | undefined; dB?: GraphValue | undefined } {
  const flatDy = graph.op('Reshape', [dy, graph.ints([-1, outSize])]);
  let dx = graph.op('MatMul', [flatDy, values.weight]);
  let dA: GraphValue | undefined;
  let dB: GraphValue | undefined;
  if (values.lora && down !== undefined) {
    const { a, b, scale } = values.lora;
    const flatX = graph.op('Reshape', [x, graph.ints([-1, inSize])]);
    const dDown = graph.op('Gemm', [flatDy, b], { transB: { int: 1 }, alpha: { float: scale } });
    dB = graph.op('Gemm', [down, flatDy], { transA: { int: 1 }, alpha: { float: scale } });
    dA = graph.op('Gemm', [flatX, dDown], { transA: { int: 1 } });
    dx = graph.op('Add', [dx, graph.op('Gemm', [dDown, a], { transB: { int: 1 } })]);
  }
  return { dx: graph.op('Reshape', [dx, leadingShape(graph, x, [inSize])]), dA, dB };
}

/** Gradient of a rotary embedding's input. */
export function rotaryBackward(
  graph: GraphBuilder,
  dy: GraphValue,
  cos: GraphValue,
  sin: GraphValue,
  headDimension: number,
): GraphValue {
  return graph.op('Sub', [graph.op('Mul', [dy, cos]), rotateHalfOp(graph, graph.op('Mul', [dy, sin]), headDimension)]);
}

/** Gradients of SwiGLU's gate and up inputs. */
export function swigluBackward(
  graph: GraphBuilder,
  gate: GraphValue,
  up: GraphValue,
  da: GraphValue,
): { dGate: GraphValue; dUp: GraphValue } {
  const sigmoid = graph.op('Sigmoid', [gate]);
  const dUp = graph.op('Mul', [da, graph.op('Mul', [gate, sigmoid])]);
  const slope = graph.op('Add', [
    graph.scalar(1),
    graph.op('Mul', [gate, graph.op('Sub', [graph.scalar(1), sigmoid])]),
  ]);
  const dGate = graph.op('Mul', [graph.op('Mul', [da, up]), graph.op('Mul', [sigmoid, slope])]);
  return { dGate, dUp };
}

/**
 * Gradients of grouped-query attention's `q` `[batch, queries, heads, d]`, `k` and `v`
 * `[batch, keys, kvHeads, d]` from that of its output `[batch, queries, heads · d]` (see
 * {@link attentionOp} for the layouts of the trace).
 */
export function attentionBackward(
  graph: GraphBuilder,
  shape: BlockShape,
  trace: BlockTrace['attention'],
  dOutput: GraphValue,
): { dq: GraphValue; dk: GraphValue; dv: GraphValue } {
  const kvHeads = shape.keyValueHeadCount;
  const groups = shape.headCount / kvHeads;
  const d = shape.headDimension;
  const swapLast = { perm: { ints: [0, 1, 2, 4, 3] } };
  // [b, t, heads·d] -> [b, kv, g, t, d], the layout of the products.
  const dAttended = graph.op('Transpose', [graph.op('Reshape', [dOutput, graph.ints([0, 0, kvHeads, groups, d])])], {
    perm: { ints: [0, 2, 3, 1, 4] },
  });
  const p = trace.probabilities;
  const dP = graph.op('MatMul', [dAttended, graph.op('Transpose', [trace.values], swapLast)]);
  const dValues = graph.op('MatMul', [graph.op('Transpose', [p], swapLast), dAttended]);
  const rowSums = graph.op('ReduceSum', [graph.op('Mul', [dP, p]), graph.ints([-1])], { keepdims: { int: 1 } });
  const dScores = graph.op('Mul', [
    graph.op('Mul', [p, graph.op('Sub', [dP, rowSums])]),
    graph.scalar(1 / Math.sqrt(d)),
  ]);
  const dQueries = graph.op('MatMul', [dScores, trace.keys]);
  const dKeys = graph.op('MatMul', [graph.op('Transpose', [dScores], swapLast), trace.queries]);
  // Keys and values serve every query head of their group: their gradients sum over the groups.
  const toTokens = (grouped: GraphValue): GraphValue =>
    graph.op('Transpose', [graph.op('ReduceSum', [grouped, graph.ints([2])], { keepdims: { int: 0 } })], {
      perm: { ints: [0, 2, 1, 3] },
    });
  const dq = graph.op('Reshape', [
    graph.op('Transpose', [dQueries], { perm: { ints: [0, 3, 1, 2, 4] } }),
    graph.ints([0, 0, shape.headCount, d]),
  ]);
  return { dq, dk: toTokens(dKeys), dv: toTokens(dValues) };
}

/** What {@link blockBackwardOp} answers: the input's gradient and each adapted layer's LoRA gradients. */
export interface BlockGradients {
  readonly dx: GraphValue;
  readonly lora: Partial<Record<LinearModule, { readonly dA: GraphValue; readonly dB: GraphValue }>>;
}

/**
 * The backward pass of one block over the trace of its forward pass ({@link blockForwardOp} on the
 * same `x`, `weights` and `context`), from `dy`, the gradient of its output.
 */
export function blockBackwardOp(
  graph: GraphBuilder,
  shape: BlockShape,
  x: GraphValue,
  weights: BlockValues,
  context: BlockContextValues,
  trace: BlockTrace,
  dy: GraphValue,
): BlockGradients {
  const lora: Partial<Record<LinearModule, { dA: GraphValue; dB: GraphValue }>> = {};
  const linear = (module: LinearModule, input: GraphValue, dOut: GraphValue): GraphValue => {
    const sizes = linearSizes(shape, module);
    const result = linearBackward(graph, input, weights.linear[module], trace.down[module], dOut, sizes.in, sizes.out);
    if (result.dA !== undefined && result.dB !== undefined) lora[module] = { dA: result.dA, dB: result.dB };
    return result.dx;
  };
  const { headDimension: d, headCount: heads, keyValueHeadCount: kvHeads } = shape;
  // MLP and its residual.
  const dActivated = linear('down_proj', trace.activated, dy);
  const { dGate, dUp } = swigluBackward(graph, trace.gate, trace.up, dActivated);
  const dPost = graph.op('Add', [
    linear('gate_proj', trace.postNorm.y, dGate),
    linear('up_proj', trace.postNorm.y, dUp),
  ]);
  const dMiddle = graph.op('Add', [
    dy,
    rmsNormBackward(graph, trace.middle, weights.postAttentionNorm, trace.postNorm.inverse, dPost),
  ]);
  // Attention and its residual.
  const dAttention = linear('o_proj', trace.attention.output, dMiddle);
  const { dq, dk, dv } = attentionBackward(graph, shape, trace.attention, dAttention);
  let dqHeads = rotaryBackward(graph, dq, context.cos, context.sin, d);
  let dkHeads = rotaryBackward(graph, dk, context.cos, context.sin, d);
  if (trace.queryNorm && weights.queryNorm)
    dqHeads = rmsNormBackward(graph, trace.qHeads, weights.queryNorm, trace.queryNorm.inverse, dqHeads);
  if (trace.keyNorm && weights.keyNorm)
    dkHeads = rmsNormBackward(graph, trace.kHeads, weights.keyNorm, trace.keyNorm.inverse, dkHeads);
  const h = trace.inputNorm.y;
  const flat = (value: GraphValue, width: number): GraphValue =>
    graph.op('Reshape', [value, graph.ints([0, 0, width])]);
  const dh = graph.op('Add', [
    graph.op('Add', [linear('q_proj', h, flat(dqHeads, heads * d)), linear('k_proj', h, flat(dkHeads, kvHeads * d))]),
    linear('v_proj', h, flat(dv, kvHeads * d)),
  ]);
  const dx = graph.op('Add', [dMiddle, rmsNormBackward(graph, x, weights.inputNorm, trace.inputNorm.inverse, dh)]);
  return { dx, lora };
}
