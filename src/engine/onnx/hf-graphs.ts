/**
 * The sampling graphs of a Hugging Face model (Llama, Qwen3) for onnxruntime: a prefill over
 * right-padded prompts and a decoding step over the key/value cache, each the whole model in one
 * graph built from the blocks of `block-ops.ts`. Every weight and LoRA matrix is a graph input
 * (named by {@link layerInput}), so one session serves every policy of a model; batch, prompt
 * length and cache length are symbolic.
 *
 * The cache crosses the graph boundary in the layouts a decoding step's products want (see
 * `cached-attention.ts`): keys `[batch, kvHeads, headDim, positions]`, values
 * `[batch, kvHeads, positions, headDim]`. The prefill answers its keys and values that way; a
 * decoding step takes the whole cache buffers (`past_keys`, `past_values`, masked past the held
 * positions) and answers only the new position's key and value `[batch, 1, kvHeads, headDim]`,
 * which the host writes into them (`onnx-cache.ts`).
 */
import type { HfModelConfig } from '../hf/config.js';
import { LINEAR_MODULES } from '../hf/model.js';
import type { LinearModule } from '../hf/model.js';
import { blockForwardOp, blockShape, linearSizes, rmsNormOp } from './block-ops.js';
import type { BlockLora, BlockShape, BlockValues, LinearValues } from './block-ops.js';
import { cachedBlockOp } from './cached-attention.js';
import { GraphBuilder } from './graph-builder.js';
import type { GraphValue } from './graph-builder.js';

/** The shape of a policy's LoRA adapter, which its sessions are built for. */
export type LoraShape = BlockLora;

/** A key naming an adapter shape (`none` without an adapter). */
export function loraShapeKey(lora: LoraShape | null): string {
  return lora === null ? 'none' : `r${lora.rank} s${lora.scale} ${lora.modules.join(',')}`;
}

/** Names of the graphs' inputs and outputs besides the layers' (see {@link layerInput}). */
export const HF_GRAPH_INPUT = {
  /** Embedded tokens `[batch, length, hidden]` (length 1 in a decoding step). */
  hidden: 'hidden',
  /** Rotary tables `[batch, length, 1, headDim]`. */
  cos: 'cos',
  sin: 'sin',
  /** Prefill: the causal mask `[length, length]` (0 or -1e9). */
  causalMask: 'causal_mask',
  /** Prefill: the flat row `row * length + promptLength - 1` of each row's last prompt token, int64 `[batch]`. */
  last: 'last',
  /** Decoding step: `[batch, capacity + 1]` of 0 (visible) or -1e9, over the cache's slots and the new token. */
  keyMask: 'key_mask',
  finalNorm: 'final_norm',
  /** The output projection `[vocabulary, hidden]` (the embedding when tied). */
  output: 'output',
  /** Output: logits of each row's last position `[batch, vocabulary]`. */
  logits: 'logits',
} as const;

/**
 * The name of a layer's input or output: its weights (`input_norm`, `post_attention_norm`,
 * `q_norm`, `k_norm`, `<module>.weight`, `<module>.bias`, `<module>.lora_a`, `<module>.lora_b`),
 * a decoding step's cache (`past_keys`, `past_values`), and the keys and values a graph answers
 * (`key`, `value`).
 */
export function layerInput(layer: number, part: string): string {
  return `layers.${layer}.${part}`;
}

/** The block shape of a model and adapter, for `block-ops.ts`. */
export function blockShapeOf(config: HfModelConfig, lora: LoraShape | null): BlockShape {
  return blockShape(config, config.attentionBias ? ['q_proj', 'k_proj', 'v_proj', 'o_proj'] : [], lora);
}

/** Declares layer `layer`'s weights as inputs named by {@link layerInput}. */
function declareLayer(graph: GraphBuilder, shape: BlockShape, layer: number): BlockValues {
  const name = (part: string): string => layerInput(layer, part);
  const linear = {} as Record<LinearModule, LinearValues>;
  for (const module of LINEAR_MODULES) {
    const sizes = linearSizes(shape, module);
    linear[module] = {
      weight: graph.input(name(`${module}.weight`), 'float', [sizes.out, sizes.in]),
      bias: shape.biased.includes(module) ? graph.input(name(`${module}.bias`), 'float', [sizes.out]) : undefined,
      lora: shape.adapted.includes(module)
        ? {
            a: graph.input(name(`${module}.lora_a`), 'float', [sizes.in, shape.loraRank]),
            b: graph.input(name(`${module}.lora_b`), 'float', [shape.loraRank, sizes.out]),
            scale: shape.loraScale,
          }
        : undefined,
    };
  }
  return {
    inputNorm: graph.input(name('input_norm'), 'float', [shape.hiddenSize]),
    postAttentionNorm: graph.input(name('post_attention_norm'), 'float', [shape.hiddenSize]),
    linear,
    queryNorm: shape.queryKeyNorm ? graph.input(name('q_norm'), 'float', [shape.headDimension]) : undefined,
    keyNorm: shape.queryKeyNorm ? graph.input(name('k_norm'), 'float', [shape.headDimension]) : undefined,
  };
}

/** The final norm and output projection of rows `[rows, hidden]`: logits `[rows, vocabulary]`. */
function head(graph: GraphBuilder, config: HfModelConfig, rows: GraphValue): void {
  const finalNorm = graph.input(HF_GRAPH_INPUT.finalNorm, 'float', [config.hiddenSize]);
  const output = graph.input(HF_GRAPH_INPUT.output, 'float', [config.vocabularySize, config.hiddenSize]);
  const normed = rmsNormOp(graph, rows, finalNorm, config.rmsNormEpsilon).y;
  const logits = graph.op('Gemm', [normed, output], { transB: { int: 1 } });
  graph.output(logits, HF_GRAPH_INPUT.logits, 'float', ['batch', config.vocabularySize]);
}

/** Inputs both graphs share: embedded tokens and rotary tables. */
function commonInputs(graph: GraphBuilder, config: HfModelConfig, length: string | number) {
  const d = config.headDimension;
  return {
    x: graph.input(HF_GRAPH_INPUT.hidden, 'float', ['batch', length, config.hiddenSize]),
    cos: graph.input(HF_GRAPH_INPUT.cos, 'float', ['batch', length, 1, d]),
    sin: graph.input(HF_GRAPH_INPUT.sin, 'float', ['batch', length, 1, d]),
  };
}

/**
 * The prefill graph: right-padded prompts `[batch, length]` (embedded), every layer's keys
 * (`layers.<i>.key`, `[batch, kvHeads, headDim, length]`) and values (`layers.<i>.value`,
 * `[batch, kvHeads, length, headDim]`), and the logits of each row's last prompt token.
 */
export function buildPrefillGraph(config: HfModelConfig, lora: LoraShape | null): Uint8Array {
  const graph = new GraphBuilder('policyloop-prefill');
  const shape = blockShapeOf(config, lora);
  const { x: embedded, cos, sin } = commonInputs(graph, config, 'length');
  const mask = graph.input(HF_GRAPH_INPUT.causalMask, 'float', ['length', 'length']);
  const last = graph.input(HF_GRAPH_INPUT.last, 'int64', ['batch']);
  const kv = config.keyValueHeadCount;
  const d = config.headDimension;
  let x = embedded;
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    const weights = declareLayer(graph, shape, layer);
    const trace = blockForwardOp(graph, shape, x, weights, {
      cos,
      sin,
      mask,
      keyValues: (k, v) => {
        // [b, t, kv, d] -> keys [b, kv, d, t], values [b, kv, t, d]
        const keys = graph.op('Transpose', [k], { perm: { ints: [0, 2, 3, 1] } });
        const values = graph.op('Transpose', [v], { perm: { ints: [0, 2, 1, 3] } });
        graph.output(keys, layerInput(layer, 'key'), 'float', ['batch', kv, d, 'length']);
        graph.output(values, layerInput(layer, 'value'), 'float', ['batch', kv, 'length', d]);
        return { k, v };
      },
    });
    x = trace.output;
  }
  const rows = graph.op('Gather', [graph.op('Reshape', [x, graph.ints([-1, config.hiddenSize])]), last], {
    axis: { int: 0 },
  });
  head(graph, config, rows);
  return graph.encode();
}

/**
 * The decoding-step graph: one new token per row (`hidden` `[batch, 1, hidden]`) attending over
 * the cache (`layers.<i>.past_keys` `[batch, kvHeads, headDim, capacity]`, `past_values`
 * `[batch, kvHeads, capacity, headDim]`) and itself, with `key_mask` `[batch, capacity + 1]`;
 * answers each layer's new key and value (`[batch, 1, kvHeads, headDim]`) and the next logits.
 */
export function buildDecodeGraph(config: HfModelConfig, lora: LoraShape | null): Uint8Array {
  const graph = new GraphBuilder('policyloop-decode');
  const shape = blockShapeOf(config, lora);
  const { x: embedded, cos, sin } = commonInputs(graph, config, 1);
  const keyMask = graph.input(HF_GRAPH_INPUT.keyMask, 'float', ['batch', 'slots']);
  // [batch, slots] -> [batch, 1, 1, slots]: broadcast over kv heads and groups.
  const mask = graph.op('Unsqueeze', [keyMask, graph.ints([1, 2])]);
  const kv = config.keyValueHeadCount;
  const d = config.headDimension;
  let x = embedded;
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    const weights = declareLayer(graph, shape, layer);
    const pastKeys = graph.input(layerInput(layer, 'past_keys'), 'float', ['batch', kv, d, 'capacity']);
    const pastValues = graph.input(layerInput(layer, 'past_values'), 'float', ['batch', kv, 'capacity', d]);
    const block = cachedBlockOp(graph, shape, x, weights, { cos, sin, pastKeys, pastValues, mask });
    graph.output(block.key, layerInput(layer, 'key'), 'float', ['batch', 1, kv, d]);
    graph.output(block.value, layerInput(layer, 'value'), 'float', ['batch', 1, kv, d]);
    x = block.output;
  }
  head(graph, config, graph.op('Reshape', [x, graph.ints([-1, config.hiddenSize])]));
  return graph.encode();
}
