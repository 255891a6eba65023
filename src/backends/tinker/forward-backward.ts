/**
 * The wire side of forward/backward (what the SDK's `chunked_fwdbwd_helpers` and its protobuf
 * encoding do): data split into chunks at the server's limits, each chunk as a
 * `ForwardBackwardRequest`, and the chunks' outputs and metrics combined into one result.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { DType, ForwardBackwardRequestSchema } from './proto/tinker_public_pb.js';
import type { ForwardBackwardOutput } from './proto/tinker_public_pb.js';
import { float32Bytes, int32Bytes, int64Bytes, readFloat32, readInt64 } from './tensors.js';
import type { ForwardBackwardResult, TinkerDatum, TinkerDatumOutput } from './types.js';

/** What a forward/backward request carries besides its data. */
export interface ForwardBackwardSettings {
  readonly modelId: string;
  readonly seqId: number;
  readonly lossFn: string;
  readonly forwardOnly: boolean;
  readonly lossFnConfig: Record<string, number>;
}

/**
 * `data` in chunks at the server's limits (its flags `fwdbwd_max_chunk_len`, default 1024 datums,
 * and `fwdbwd_max_chunk_bytes_count`, default 5 MB by the SDK's estimate).
 */
export function chunksOf(data: readonly TinkerDatum[], flags: Readonly<Record<string, unknown>>): TinkerDatum[][] {
  const maxLength = Math.max(1, Number(flags['fwdbwd_max_chunk_len'] ?? 1024));
  const maxBytes = Math.max(1, Number(flags['fwdbwd_max_chunk_bytes_count'] ?? 5_000_000));
  const chunks: TinkerDatum[][] = [];
  let current: TinkerDatum[] = [];
  let bytes = 0;
  for (const datum of data) {
    // The SDK's estimate: 10 bytes per input token and per value of each loss input it sends.
    const size =
      10 *
      (datum.inputTokens.length +
        datum.targetTokens.length +
        (datum.weights?.length ?? 0) +
        (datum.logprobs?.length ?? 0) +
        (datum.advantages?.length ?? 0));
    if (current.length > 0 && (current.length >= maxLength || bytes + size > maxBytes)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(datum);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** One chunk as the protobuf bytes of a `ForwardBackwardRequest`. */
export function encodeForwardBackward(settings: ForwardBackwardSettings, chunk: readonly TinkerDatum[]): Uint8Array {
  const message = create(ForwardBackwardRequestSchema, {
    ...settings,
    data: chunk.map((datum) => ({
      modelInput: [{ chunk: { case: 'encodedText' as const, value: { tokens: int32Bytes(datum.inputTokens) } } }],
      lossFnInputs: lossInputs(datum),
    })),
  });
  return toBinary(ForwardBackwardRequestSchema, message);
}

/**
 * The chunks' results as one: the outputs in order, the metrics combined. Throws when the server
 * gave another number of outputs than `datums`.
 */
export function combineResults(
  results: readonly ForwardBackwardOutput[],
  datums: number,
  operation: string,
): ForwardBackwardResult {
  const outputs: TinkerDatumOutput[] = [];
  const chunkMetrics: { metrics: Record<string, number>; datums: number }[] = [];
  for (const decoded of results) {
    const before = outputs.length;
    for (const record of decoded.lossFnOutputs) outputs.push(...datumOutputs(record.fields));
    chunkMetrics.push({ metrics: decoded.metrics, datums: outputs.length - before });
  }
  const metrics = combineChunkMetrics(chunkMetrics);
  if (outputs.length !== datums)
    throw new Error(`Tinker ${operation} returned ${outputs.length} outputs for ${datums} datums`);
  return { outputs, metrics };
}

/**
 * The metrics of one forward/backward sent in chunks, combined as the SDK does by the reduction
 * each name ends with: `:mean` weighted by the chunks' datums, `:min`, `:max`; `:sum` and the
 * rest add up.
 */
function combineChunkMetrics(chunks: readonly { metrics: Record<string, number>; datums: number }[]) {
  const combined: Record<string, number> = {};
  const names = new Set(chunks.flatMap((chunk) => Object.keys(chunk.metrics)));
  for (const name of names) {
    const present = chunks.filter((chunk) => name in chunk.metrics);
    const values = present.map((chunk) => chunk.metrics[name] as number);
    const reduction = name.slice(name.lastIndexOf(':') + 1);
    if (name.includes(':') && reduction === 'mean') {
      const datums = present.reduce((total, chunk) => total + chunk.datums, 0);
      combined[name] =
        datums > 0
          ? present.reduce((total, chunk) => total + (chunk.metrics[name] as number) * chunk.datums, 0) / datums
          : values.reduce((total, value) => total + value, 0) / values.length;
    } else if (name.includes(':') && reduction === 'min') combined[name] = Math.min(...values);
    else if (name.includes(':') && reduction === 'max') combined[name] = Math.max(...values);
    else combined[name] = values.reduce((total, value) => total + value, 0);
  }
  return combined;
}

/** A one-dimensional dense tensor of `values`. */
function tensor(values: readonly number[], dtype: DType) {
  return {
    encoding: {
      case: 'dense' as const,
      value: dtype === DType.DTYPE_INT64 ? int64Bytes(values) : float32Bytes(values),
    },
    dtype,
    shape: [BigInt(values.length)],
  };
}

/** A datum's loss function inputs: its targets, and the weights, logprobs and advantages it has. */
function lossInputs(datum: TinkerDatum) {
  const inputs: Record<string, ReturnType<typeof tensor>> = {
    target_tokens: tensor(datum.targetTokens, DType.DTYPE_INT64),
  };
  if (datum.weights) inputs['weights'] = tensor(datum.weights, DType.DTYPE_FLOAT32);
  if (datum.logprobs) inputs['logprobs'] = tensor(datum.logprobs, DType.DTYPE_FLOAT32);
  if (datum.advantages) inputs['advantages'] = tensor(datum.advantages, DType.DTYPE_FLOAT32);
  return inputs;
}

/** Splits an `ArrayRecord`'s batched fields into one output per datum. */
function datumOutputs(fields: ForwardBackwardOutput['lossFnOutputs'][number]['fields']): TinkerDatumOutput[] {
  const split = (name: string): number[][] | undefined => {
    const field = fields[name];
    if (!field) return undefined;
    if (field.dtype !== DType.DTYPE_FLOAT32 && field.dtype !== DType.DTYPE_UNSPECIFIED)
      throw new Error(`Expected Tinker output ${name} as float32, got dtype ${field.dtype}`);
    const offsets = readInt64(field.offsets, `${name} offsets`);
    const rows: number[][] = [];
    for (let index = 0; index + 1 < offsets.length; index += 1)
      rows.push(readFloat32(field.data.subarray(offsets[index], offsets[index + 1]), name));
    return rows;
  };
  const logprobs = split('logprobs');
  if (!logprobs) throw new Error('Tinker forward_backward output has no logprobs field');
  const losses = split('elementwise_loss');
  return logprobs.map((row, index) => ({ logprobs: row, elementwiseLoss: losses?.[index] }));
}
