/**
 * Little-endian number arrays as the Tinker wire carries them in protobuf `bytes`: tokens as
 * int32, target tokens as int64, weights, logprobs and advantages as float32.
 */

/** `values` as int32 little-endian bytes. */
export function int32Bytes(values: readonly number[]): Uint8Array {
  const view = new DataView(new ArrayBuffer(values.length * 4));
  values.forEach((value, index) => view.setInt32(index * 4, value, true));
  return new Uint8Array(view.buffer);
}

/** `values` as int64 little-endian bytes. */
export function int64Bytes(values: readonly number[]): Uint8Array {
  const view = new DataView(new ArrayBuffer(values.length * 8));
  values.forEach((value, index) => view.setBigInt64(index * 8, BigInt(value), true));
  return new Uint8Array(view.buffer);
}

/** `values` as float32 little-endian bytes. */
export function float32Bytes(values: readonly number[]): Uint8Array {
  const view = new DataView(new ArrayBuffer(values.length * 4));
  values.forEach((value, index) => view.setFloat32(index * 4, value, true));
  return new Uint8Array(view.buffer);
}

function viewOf(bytes: Uint8Array, width: number, what: string): DataView {
  if (bytes.byteLength % width !== 0)
    throw new Error(`Expected ${what} to be a multiple of ${width} bytes, got ${bytes.byteLength}`);
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** int32 little-endian bytes as numbers. */
export function readInt32(bytes: Uint8Array, what = 'an int32 array'): number[] {
  const view = viewOf(bytes, 4, what);
  return Array.from({ length: bytes.byteLength / 4 }, (_, index) => view.getInt32(index * 4, true));
}

/** int64 little-endian bytes as numbers (offsets and token ids fit a double exactly). */
export function readInt64(bytes: Uint8Array, what = 'an int64 array'): number[] {
  const view = viewOf(bytes, 8, what);
  return Array.from({ length: bytes.byteLength / 8 }, (_, index) => Number(view.getBigInt64(index * 8, true)));
}

/** float32 little-endian bytes as numbers. */
export function readFloat32(bytes: Uint8Array, what = 'a float32 array'): number[] {
  const view = viewOf(bytes, 4, what);
  return Array.from({ length: bytes.byteLength / 4 }, (_, index) => view.getFloat32(index * 4, true));
}
