/**
 * A decoding step's block with attention over a key/value cache, for onnxruntime sampling. The
 * cache is passed whole, in the layouts the products want, so that a step transposes and copies
 * none of it: keys `[batch, kvHeads, headDim, capacity]` (transposed, as the tfjs path keeps them)
 * and values `[batch, kvHeads, capacity, headDim]`, with slots past the held positions masked. The
 * new token attends over the cache and itself: its own score joins the cache's before the softmax,
 * and its value is weighted in after. The rest of the block is `block-ops.ts`'.
 */
import type { LinearModule } from '../hf/model.js';
import { linearOp, linearSizes, rmsNormOp, rotaryOp, swigluOp } from './block-ops.js';
import type { BlockShape, BlockValues } from './block-ops.js';
import type { GraphBuilder, GraphValue } from './graph-builder.js';

/** A layer's cache and the step's inputs for {@link cachedBlockOp}. */
export interface CachedStepValues {
  /** `[batch, 1, 1, headDim]` rotary tables of each row's new position. */
  readonly cos: GraphValue;
  readonly sin: GraphValue;
  /** Keys `[batch, kvHeads, headDim, capacity]`. */
  readonly pastKeys: GraphValue;
  /** Values `[batch, kvHeads, capacity, headDim]`. */
  readonly pastValues: GraphValue;
  /**
   * Added to the scores `[batch, kvHeads, groups, capacity + 1]` (slots of the cache, then the new
   * token): `[batch, 1, 1, capacity + 1]` of 0 or -1e9.
   */
  readonly mask: GraphValue;
}

/**
 * Attention of one new query per row, `q` `[batch, 1, heads, headDim]`, over the cache and the
 * row's new key and value `k`, `v` `[batch, 1, kvHeads, headDim]`; answers `[batch, 1, heads · headDim]`.
 * Query head `h` uses key/value head `floor(h / groups)` (the products broadcast nothing: the
 * groups are the rows of each kv head's product).
 */
export function cachedAttentionOp(
  graph: GraphBuilder,
  shape: BlockShape,
  q: GraphValue,
  k: GraphValue,
  v: GraphValue,
  step: CachedStepValues,
): GraphValue {
  const kvHeads = shape.keyValueHeadCount;
  const groups = shape.headCount / kvHeads;
  const d = shape.headDimension;
  const scale = graph.scalar(1 / Math.sqrt(d));
  // [b, 1, heads, d] -> [b, kv, g, d]; the new key and value [b, 1, kv, d] -> [b, kv, 1, d].
  const queries = graph.op('Reshape', [q, graph.ints([0, kvHeads, groups, d])]);
  const newKey = graph.op('Reshape', [k, graph.ints([0, kvHeads, 1, d])]);
  const newValue = graph.op('Reshape', [v, graph.ints([0, kvHeads, 1, d])]);
  const cached = graph.op('MatMul', [queries, step.pastKeys]);
  // q · k_new over d: [b, kv, g, d] · [b, kv, d, 1] -> [b, kv, g, 1].
  const own = graph.op('MatMul', [queries, graph.op('Transpose', [newKey], { perm: { ints: [0, 1, 3, 2] } })]);
  const scores = graph.op('Mul', [graph.op('Concat', [cached, own], { axis: { int: -1 } }), scale]);
  const probabilities = graph.op('Softmax', [graph.op('Add', [scores, step.mask])], { axis: { int: -1 } });
  const capacity = graph.op('Shape', [step.pastValues], { start: { int: 2 }, end: { int: 3 } });
  const [past, self] = graph.opN(
    'Split',
    [probabilities, graph.op('Concat', [capacity, graph.ints([1])], { axis: { int: 0 } })],
    2,
    {
      axis: { int: -1 },
    },
  ) as [GraphValue, GraphValue];
  const attended = graph.op('Add', [graph.op('MatMul', [past, step.pastValues]), graph.op('Mul', [self, newValue])]);
  // [b, kv, g, d] -> [b, 1, heads · d]
  return graph.op('Reshape', [attended, graph.ints([0, 1, shape.headCount * d])]);
}

/**
 * One decoder block for one new token per row, `x` `[batch, 1, hidden]`, over layer's cache: the
 * same operations as `blockForwardOp` with {@link cachedAttentionOp} in place of its attention.
 * Answers the block's output and the new token's rotated key and value `[batch, 1, kvHeads, headDim]`.
 */
export function cachedBlockOp(
  graph: GraphBuilder,
  shape: BlockShape,
  x: GraphValue,
  weights: BlockValues,
  step: CachedStepValues,
): { output: GraphValue; key: GraphValue; value: GraphValue } {
  const { headCount: heads, keyValueHeadCount: kvHeads, headDimension: d, rmsNormEpsilon: epsilon } = shape;
  const linear = (module: LinearModule, input: GraphValue): GraphValue => {
    const sizes = linearSizes(shape, module);
    return linearOp(graph, input, weights.linear[module], sizes.in, sizes.out).y;
  };
  const h = rmsNormOp(graph, x, weights.inputNorm, epsilon).y;
  let q = graph.op('Reshape', [linear('q_proj', h), graph.ints([0, 0, heads, d])]);
  let k = graph.op('Reshape', [linear('k_proj', h), graph.ints([0, 0, kvHeads, d])]);
  const v = graph.op('Reshape', [linear('v_proj', h), graph.ints([0, 0, kvHeads, d])]);
  if (weights.queryNorm) q = rmsNormOp(graph, q, weights.queryNorm, epsilon).y;
  if (weights.keyNorm) k = rmsNormOp(graph, k, weights.keyNorm, epsilon).y;
  q = rotaryOp(graph, q, step.cos, step.sin, d);
  k = rotaryOp(graph, k, step.cos, step.sin, d);
  const attention = cachedAttentionOp(graph, shape, q, k, v, step);
  const middle = graph.op('Add', [x, linear('o_proj', attention)]);
  const post = rmsNormOp(graph, middle, weights.postAttentionNorm, epsilon).y;
  const activated = swigluOp(graph, linear('gate_proj', post), linear('up_proj', post));
  return { output: graph.op('Add', [middle, linear('down_proj', activated)]), key: k, value: v };
}
