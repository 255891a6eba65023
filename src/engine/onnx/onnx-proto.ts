/**
 * A minimal writer of ONNX model files (the `onnx.proto` protobuf messages a model needs: model,
 * graph, node, attribute, tensor, value info), so that the engine can build its graphs in
 * TypeScript and hand them to onnxruntime as bytes, without Python or a protobuf library.
 *
 * Field numbers follow `onnx/onnx.proto` (IR version 8). Only what the engine's graphs use is
 * written; every message is encoded in field order.
 */

/** ONNX tensor element types used by the engine (`TensorProto.DataType`). */
export const ONNX_TYPE = { float: 1, uint8: 2, int32: 6, int64: 7, bool: 9 } as const;

/** An element type name of {@link ONNX_TYPE}. */
export type OnnxElementType = keyof typeof ONNX_TYPE;

/** A dimension of a graph input or output: a fixed size, or a named symbolic size. */
export type OnnxDimension = number | string;

/** A node attribute's value: a float, an integer, a string, a list of floats or integers, or a tensor. */
export type OnnxAttribute =
  | { readonly float: number }
  | { readonly int: number }
  | { readonly string: string }
  | { readonly floats: readonly number[] }
  | { readonly ints: readonly number[] }
  | { readonly tensor: OnnxTensor };

/** A constant tensor (an initializer or a `Constant` node's value). */
export interface OnnxTensor {
  readonly name?: string | undefined;
  readonly type: OnnxElementType;
  readonly dims: readonly number[];
  /** Little-endian raw values (`raw_data`). */
  readonly values: Float32Array | Int32Array | BigInt64Array | Uint8Array;
}

/** A node of a graph. */
export interface OnnxNode {
  readonly opType: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly name?: string | undefined;
  readonly domain?: string | undefined;
  readonly attributes?: Readonly<Record<string, OnnxAttribute>> | undefined;
}

/** A graph input or output with its type. */
export interface OnnxValueInfo {
  readonly name: string;
  readonly type: OnnxElementType;
  readonly dims: readonly OnnxDimension[];
}

/** A whole model: one graph and the opset it is written against. */
export interface OnnxModel {
  readonly name: string;
  readonly nodes: readonly OnnxNode[];
  readonly inputs: readonly OnnxValueInfo[];
  readonly outputs: readonly OnnxValueInfo[];
  readonly initializers?: readonly OnnxTensor[] | undefined;
  /** The default domain's opset. @default 18 */
  readonly opset?: number | undefined;
  /** Extra opsets by domain (e.g. `com.microsoft`). */
  readonly extraOpsets?: Readonly<Record<string, number>> | undefined;
}

/** Appends protobuf fields to a growing byte list. */
class Writer {
  private readonly chunks: Uint8Array[] = [];
  private length = 0;

  bytes(): Uint8Array {
    const out = new Uint8Array(this.length);
    let offset = 0;
    for (const chunk of this.chunks) {
      out.set(chunk, offset);
      offset += chunk.length;
    }
    return out;
  }

  private push(chunk: Uint8Array): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  private varint(value: bigint): void {
    // Negative int64 values are written as their 64-bit two's complement (10 bytes).
    let v = BigInt.asUintN(64, value);
    const out: number[] = [];
    do {
      let byte = Number(v & 0x7fn);
      v >>= 7n;
      if (v !== 0n) byte |= 0x80;
      out.push(byte);
    } while (v !== 0n);
    this.push(Uint8Array.from(out));
  }

  private tag(field: number, wire: number): void {
    this.varint(BigInt((field << 3) | wire));
  }

  int(field: number, value: number | bigint): void {
    this.tag(field, 0);
    this.varint(typeof value === 'bigint' ? value : BigInt(Math.trunc(value)));
  }

  float(field: number, value: number): void {
    this.tag(field, 5);
    const buffer = new Uint8Array(4);
    new DataView(buffer.buffer).setFloat32(0, value, true);
    this.push(buffer);
  }

  raw(field: number, data: Uint8Array): void {
    this.tag(field, 2);
    this.varint(BigInt(data.length));
    this.push(data);
  }

  string(field: number, value: string): void {
    this.raw(field, new TextEncoder().encode(value));
  }

  message(field: number, write: (writer: Writer) => void): void {
    const inner = new Writer();
    write(inner);
    this.raw(field, inner.bytes());
  }

  packedInts(field: number, values: readonly number[]): void {
    const inner = new Writer();
    for (const value of values) inner.varint(BigInt(Math.trunc(value)));
    this.raw(field, inner.bytes());
  }

  packedFloats(field: number, values: readonly number[]): void {
    const buffer = new Uint8Array(4 * values.length);
    const view = new DataView(buffer.buffer);
    values.forEach((value, index) => view.setFloat32(4 * index, value, true));
    this.raw(field, buffer);
  }
}

const ATTRIBUTE_TYPE = { float: 1, int: 2, string: 3, tensor: 4, floats: 6, ints: 7 } as const;

function writeTensor(writer: Writer, tensor: OnnxTensor): void {
  writer.packedInts(1, tensor.dims);
  writer.int(2, ONNX_TYPE[tensor.type]);
  if (tensor.name !== undefined) writer.string(8, tensor.name);
  const { values } = tensor;
  writer.raw(9, new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
}

function writeAttribute(writer: Writer, name: string, attribute: OnnxAttribute): void {
  writer.string(1, name);
  if ('float' in attribute) {
    writer.float(2, attribute.float);
    writer.int(20, ATTRIBUTE_TYPE.float);
  } else if ('int' in attribute) {
    writer.int(3, attribute.int);
    writer.int(20, ATTRIBUTE_TYPE.int);
  } else if ('string' in attribute) {
    writer.string(4, attribute.string);
    writer.int(20, ATTRIBUTE_TYPE.string);
  } else if ('tensor' in attribute) {
    writer.message(5, (inner) => writeTensor(inner, attribute.tensor));
    writer.int(20, ATTRIBUTE_TYPE.tensor);
  } else if ('floats' in attribute) {
    writer.packedFloats(7, attribute.floats);
    writer.int(20, ATTRIBUTE_TYPE.floats);
  } else {
    writer.packedInts(8, attribute.ints);
    writer.int(20, ATTRIBUTE_TYPE.ints);
  }
}

function writeNode(writer: Writer, node: OnnxNode): void {
  for (const input of node.inputs) writer.string(1, input);
  for (const output of node.outputs) writer.string(2, output);
  if (node.name !== undefined) writer.string(3, node.name);
  writer.string(4, node.opType);
  for (const [name, attribute] of Object.entries(node.attributes ?? {}))
    writer.message(5, (inner) => writeAttribute(inner, name, attribute));
  if (node.domain !== undefined) writer.string(7, node.domain);
}

function writeValueInfo(writer: Writer, info: OnnxValueInfo): void {
  writer.string(1, info.name);
  writer.message(2, (type) =>
    type.message(1, (tensorType) => {
      tensorType.int(1, ONNX_TYPE[info.type]);
      tensorType.message(2, (shape) => {
        for (const dim of info.dims)
          shape.message(1, (dimension) => {
            if (typeof dim === 'number') dimension.int(1, dim);
            else dimension.string(2, dim);
          });
      });
    }),
  );
}

/**
 * The bytes of an ONNX model file for `model` (IR version 8), ready for
 * `InferenceSession.create(bytes)`.
 * @example
 * const bytes = encodeOnnxModel({
 *   name: 'product',
 *   nodes: [{ opType: 'MatMul', inputs: ['a', 'b'], outputs: ['c'] }],
 *   inputs: [{ name: 'a', type: 'float', dims: ['m', 4] }, { name: 'b', type: 'float', dims: [4, 2] }],
 *   outputs: [{ name: 'c', type: 'float', dims: ['m', 2] }],
 * });
 */
export function encodeOnnxModel(model: OnnxModel): Uint8Array {
  const writer = new Writer();
  writer.int(1, 8);
  writer.string(2, 'policyloop');
  writer.message(7, (graph) => {
    for (const node of model.nodes) graph.message(1, (inner) => writeNode(inner, node));
    graph.string(2, model.name);
    for (const tensor of model.initializers ?? []) graph.message(5, (inner) => writeTensor(inner, tensor));
    for (const input of model.inputs) graph.message(11, (inner) => writeValueInfo(inner, input));
    for (const output of model.outputs) graph.message(12, (inner) => writeValueInfo(inner, output));
  });
  writer.message(8, (opset) => {
    opset.string(1, '');
    opset.int(2, model.opset ?? 18);
  });
  for (const [domain, version] of Object.entries(model.extraOpsets ?? {}))
    writer.message(8, (opset) => {
      opset.string(1, domain);
      opset.int(2, version);
    });
  return writer.bytes();
}
