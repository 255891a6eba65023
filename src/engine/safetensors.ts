/**
 * The safetensors file format, for float32 tensors: an 8-byte little-endian header length, a JSON
 * header `{name: {dtype: "F32", shape, data_offsets: [begin, end]}, "__metadata__": {...}}`, then
 * the raw little-endian data. Reading can also widen `F16` and `BF16` tensors to float32 (the
 * weights of Hugging Face models).
 */
import { readFile, writeFile } from 'node:fs/promises';

/** A named float32 tensor in host memory. */
export interface HostTensor {
  readonly shape: readonly number[];
  readonly data: Float32Array;
}

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Serialises tensors (in name order) to safetensors bytes, as F32 or, with `dtype: 'BF16'`, as
 * bfloat16 (each value's upper 16 bits: rounded toward zero).
 */
export function encodeSafetensors(
  tensors: ReadonlyMap<string, HostTensor>,
  metadata: Record<string, string> = {},
  options: { readonly dtype?: 'F32' | 'BF16' | undefined } = {},
): Uint8Array {
  const dtype = options.dtype ?? 'F32';
  const width = dtype === 'BF16' ? 2 : 4;
  const names = [...tensors.keys()].sort();
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const name of names) {
    const tensor = tensors.get(name) as HostTensor;
    const bytes = tensor.data.length * width;
    header[name] = { dtype, shape: [...tensor.shape], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const headerJson = new TextEncoder().encode(JSON.stringify(header));
  // Pad the header with spaces (in bytes: names may be non-ASCII) so that the data starts 8-byte
  // aligned, as the reference writer does.
  const headerBytes = new Uint8Array(Math.ceil(headerJson.length / 8) * 8).fill(0x20);
  headerBytes.set(headerJson);
  const out = new Uint8Array(8 + headerBytes.length + offset);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let position = 8 + headerBytes.length;
  for (const name of names) {
    const tensor = tensors.get(name) as HostTensor;
    if (dtype === 'BF16') {
      const bits = new Uint32Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.length);
      for (let index = 0; index < bits.length; index += 1)
        view.setUint16(position + index * 2, (bits[index] as number) >>> 16, true);
    } else if (littleEndian) {
      out.set(new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength), position);
    } else {
      tensor.data.forEach((value, index) => view.setFloat32(position + index * 4, value, true));
    }
    position += tensor.data.length * width;
  }
  return out;
}

/** Tensor element types that {@link decodeSafetensors} can read (widened to float32). */
export type FloatDtype = 'F32' | 'F16' | 'BF16';

const DTYPE_BYTES: Readonly<Record<FloatDtype, number>> = { F32: 4, F16: 2, BF16: 2 };

/** Options of {@link decodeSafetensors}. */
export interface DecodeOptions {
  /** Element types accepted (others fail, naming the tensor). @default ['F32'] */
  readonly dtypes?: readonly FloatDtype[] | undefined;
  /** Only these tensors are decoded (others are skipped); absent means all. */
  readonly names?: ReadonlySet<string> | undefined;
  /**
   * Receives each tensor as it is decoded instead of the returned map (which stays empty), so
   * that a large file never holds all its tensors widened at once.
   */
  readonly onTensor?: ((name: string, tensor: HostTensor) => void) | undefined;
  /**
   * Receives each BF16 tensor as its bits (the upper half of each float32), not widened: a view of
   * the file's bytes when they are 2-byte aligned (which keeps the whole file alive while a view
   * is held), else a copy. Only with `onTensor`, which still receives the F32 and F16 tensors.
   */
  readonly onBfloat16?: ((name: string, shape: readonly number[], bits: Uint16Array) => void) | undefined;
}

/** float16 bits to float32, exactly (subnormals, infinities and NaN included). */
function halfToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

function widen(bytes: Uint8Array, offset: number, count: number, dtype: FloatDtype): Float32Array {
  const data = new Float32Array(count);
  if (dtype === 'F32') {
    if (littleEndian && (bytes.byteOffset + offset) % 4 === 0) {
      data.set(new Float32Array(bytes.buffer, bytes.byteOffset + offset, count));
    } else {
      const view = new DataView(bytes.buffer, bytes.byteOffset + offset, count * 4);
      for (let index = 0; index < count; index += 1) data[index] = view.getFloat32(index * 4, true);
    }
    return data;
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, count * 2);
  if (dtype === 'BF16') {
    // bfloat16 is the top half of a float32.
    const bits = new Uint32Array(data.buffer);
    for (let index = 0; index < count; index += 1) bits[index] = view.getUint16(index * 2, true) << 16;
    return data;
  }
  for (let index = 0; index < count; index += 1) data[index] = halfToFloat(view.getUint16(index * 2, true));
  return data;
}

/**
 * Parses safetensors bytes holding float tensors (`F32` only unless `options.dtypes` allows
 * `F16`/`BF16`, which are widened to float32). Throws on anything else, saying what it found.
 */
export function decodeSafetensors(
  bytes: Uint8Array,
  options: DecodeOptions = {},
): {
  tensors: Map<string, HostTensor>;
  metadata: Record<string, string>;
} {
  if (bytes.length < 8) throw new Error(`Expected a safetensors file of at least 8 bytes, got ${bytes.length}.`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  if (8 + headerLength > bytes.length)
    throw new Error(`Safetensors header length ${headerLength} exceeds the file size ${bytes.length}.`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength))) as Record<string, unknown>;
  } catch (error) {
    throw new Error(
      `Expected a JSON object as the safetensors header, got unparseable text (${error instanceof Error ? error.message : String(error)}).`,
    );
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header))
    throw new Error(`Expected a JSON object as the safetensors header, got ${JSON.stringify(header)}.`);
  const dataStart = 8 + headerLength;
  const dataLength = bytes.length - dataStart;
  const tensors = new Map<string, HostTensor>();
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(header)) {
    if (name === '__metadata__') {
      metadata = (value ?? {}) as Record<string, string>;
      continue;
    }
    const entry = value as { dtype: string; shape: number[]; data_offsets: [number, number] };
    if (
      typeof entry !== 'object' ||
      entry === null ||
      !Array.isArray(entry.shape) ||
      !Array.isArray(entry.data_offsets)
    ) {
      throw new Error(
        `Expected {dtype, shape, data_offsets} for tensor ${name} in the safetensors header, got ${JSON.stringify(value)}.`,
      );
    }
    if (options.names && !options.names.has(name)) continue;
    const accepted = options.dtypes ?? ['F32'];
    if (!accepted.includes(entry.dtype as FloatDtype))
      throw new Error(`Expected ${accepted.join(', ')} tensors in safetensors, got ${entry.dtype} for ${name}.`);
    const width = DTYPE_BYTES[entry.dtype as FloatDtype];
    const [begin, end] = entry.data_offsets;
    if (!(Number.isInteger(begin) && Number.isInteger(end) && begin >= 0 && begin <= end && end <= dataLength)) {
      throw new Error(
        `Tensor ${name} has data_offsets ${JSON.stringify(entry.data_offsets)}, outside the ${dataLength} data bytes of the file.`,
      );
    }
    const count = (end - begin) / width;
    const expected = entry.shape.reduce((a, b) => a * b, 1);
    if (count !== expected)
      throw new Error(`Tensor ${name} has ${count} values but shape ${JSON.stringify(entry.shape)}.`);
    if (entry.dtype === 'BF16' && options.onBfloat16 && options.onTensor && littleEndian) {
      const offset = bytes.byteOffset + dataStart + begin;
      let bits: Uint16Array;
      if (offset % 2 === 0) bits = new Uint16Array(bytes.buffer, offset, count);
      else {
        bits = new Uint16Array(count);
        new Uint8Array(bits.buffer).set(bytes.subarray(dataStart + begin, dataStart + end));
      }
      options.onBfloat16(name, entry.shape, bits);
      continue;
    }
    const tensor = { shape: entry.shape, data: widen(bytes, dataStart + begin, count, entry.dtype as FloatDtype) };
    if (options.onTensor) options.onTensor(name, tensor);
    else tensors.set(name, tensor);
  }
  return { tensors, metadata };
}

/** Writes tensors to a safetensors file. */
export async function writeSafetensors(
  path: string,
  tensors: ReadonlyMap<string, HostTensor>,
  metadata: Record<string, string> = {},
): Promise<void> {
  await writeFile(path, encodeSafetensors(tensors, metadata));
}

/** Reads a safetensors file of F32 tensors (or the dtypes and names `options` allows). */
export async function readSafetensors(
  path: string,
  options: DecodeOptions = {},
): Promise<{ tensors: Map<string, HostTensor>; metadata: Record<string, string> }> {
  return decodeSafetensors(await readFile(path), options);
}
