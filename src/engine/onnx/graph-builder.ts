/**
 * Builds ONNX graphs op by op in TypeScript: each op returns the name of its output value, so a
 * graph reads like the computation it encodes. The result is an {@link OnnxModel} for
 * {@link encodeOnnxModel}.
 */
import { encodeOnnxModel } from './onnx-proto.js';
import type {
  OnnxAttribute,
  OnnxDimension,
  OnnxElementType,
  OnnxModel,
  OnnxNode,
  OnnxTensor,
  OnnxValueInfo,
} from './onnx-proto.js';

/** A value of a graph under construction: the name the nodes refer to it by. */
export type GraphValue = string;

/** Attributes of a node, written as plain numbers, arrays or strings where unambiguous. */
export type NodeAttributes = Readonly<Record<string, OnnxAttribute>>;

/**
 * An ONNX graph under construction.
 * @example
 * const graph = new GraphBuilder('scaled-product');
 * const a = graph.input('a', 'float', ['m', 4]);
 * const b = graph.input('b', 'float', [4, 2]);
 * graph.output(graph.op('Mul', [graph.op('MatMul', [a, b]), graph.scalar(2)]), 'c', 'float', ['m', 2]);
 * const bytes = graph.encode();
 */
export class GraphBuilder {
  private readonly nodes: OnnxNode[] = [];
  private readonly inputs: OnnxValueInfo[] = [];
  private readonly outputs: OnnxValueInfo[] = [];
  private readonly initializers: OnnxTensor[] = [];
  private readonly names = new Set<string>();
  private counter = 0;
  private readonly constants = new Map<string, GraphValue>();

  /** @param name the graph's name (shown in onnxruntime's errors). */
  constructor(readonly name: string) {}

  private fresh(hint: string): string {
    this.counter += 1;
    return `${hint}_${this.counter}`;
  }

  private claim(name: string): string {
    if (this.names.has(name)) throw new Error(`GraphBuilder(${this.name}): the value name "${name}" is taken.`);
    this.names.add(name);
    return name;
  }

  /** Declares a graph input; string dimensions are symbolic (sized at run time). */
  input(name: string, type: OnnxElementType, dims: readonly OnnxDimension[]): GraphValue {
    this.inputs.push({ name: this.claim(name), type, dims });
    return name;
  }

  /** Declares `value` a graph output under `name` (an Identity node renames it when needed). */
  output(value: GraphValue, name: string, type: OnnxElementType, dims: readonly OnnxDimension[]): void {
    if (value !== name) this.nodes.push({ opType: 'Identity', inputs: [value], outputs: [this.claim(name)] });
    this.outputs.push({ name, type, dims });
  }

  /** A constant tensor baked into the graph (an initializer). */
  constant(type: OnnxElementType, dims: readonly number[], values: OnnxTensor['values'], hint = 'const'): GraphValue {
    const name = this.claim(this.fresh(hint));
    this.initializers.push({ name, type, dims, values });
    return name;
  }

  /** A float32 scalar constant (shared when the same value is asked again). */
  scalar(value: number): GraphValue {
    const key = `f${value}`;
    const known = this.constants.get(key);
    if (known !== undefined) return known;
    const name = this.constant('float', [], Float32Array.of(value), 'scalar');
    this.constants.set(key, name);
    return name;
  }

  /** An int64 1-D constant (shapes, axes, starts and ends), shared when asked again. */
  ints(values: readonly number[]): GraphValue {
    const key = `i${values.join(',')}`;
    const known = this.constants.get(key);
    if (known !== undefined) return known;
    const name = this.constant(
      'int64',
      [values.length],
      BigInt64Array.from(values, (v) => BigInt(v)),
      'ints',
    );
    this.constants.set(key, name);
    return name;
  }

  /** Adds a node with one output; answers that output. Empty-string inputs are omitted optional inputs. */
  op(opType: string, inputs: readonly GraphValue[], attributes?: NodeAttributes, domain?: string): GraphValue {
    return this.opN(opType, inputs, 1, attributes, domain)[0] as GraphValue;
  }

  /** Adds a node with `count` outputs; answers them in order. */
  opN(
    opType: string,
    inputs: readonly GraphValue[],
    count: number,
    attributes?: NodeAttributes,
    domain?: string,
  ): GraphValue[] {
    const outputs = Array.from({ length: count }, () => this.claim(this.fresh(opType.toLowerCase())));
    this.nodes.push({ opType, inputs, outputs, attributes, domain });
    return outputs;
  }

  /** The model built so far. */
  model(opset = 18): OnnxModel {
    return {
      name: this.name,
      nodes: this.nodes,
      inputs: this.inputs,
      outputs: this.outputs,
      initializers: this.initializers,
      opset,
    };
  }

  /** The model's bytes (an ONNX file). */
  encode(opset = 18): Uint8Array {
    return encodeOnnxModel(this.model(opset));
  }
}
