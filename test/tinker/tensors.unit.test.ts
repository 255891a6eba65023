/**
 * Number arrays as the Tinker wire carries them in protobuf `bytes`: little-endian int32 tokens,
 * int64 target tokens and offsets, float32 weights, logprobs and advantages.
 */
import { describe, expect, it } from 'vitest';
import {
  float32Bytes,
  int32Bytes,
  int64Bytes,
  readFloat32,
  readInt32,
  readInt64,
} from '../../src/backends/tinker/tensors.js';

describe('tensors', () => {
  it('int32 round-trips, negative and extreme values included, little-endian', () => {
    const values = [0, 1, -1, 151_643, 2_147_483_647, -2_147_483_648];
    const bytes = int32Bytes(values);
    expect(bytes.byteLength).toBe(24);
    expect([...bytes.subarray(12, 16)]).toEqual([0x5b, 0x50, 0x02, 0x00]); // 151643 = 0x0002505b
    expect(readInt32(bytes)).toEqual(values);
  });

  it('int64 round-trips every integer a double holds exactly', () => {
    const values = [0, 282, -7, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER];
    const bytes = int64Bytes(values);
    expect(bytes.byteLength).toBe(40);
    expect([...bytes.subarray(8, 16)]).toEqual([0x1a, 0x01, 0, 0, 0, 0, 0, 0]);
    expect(readInt64(bytes)).toEqual(values);
  });

  it('float32 round-trips at float32 precision', () => {
    const values = [0, 1, -9.915082931518555, 0.1, -1e-8, 3.4e38];
    const read = readFloat32(float32Bytes(values));
    expect(read).toEqual(values.map((value) => Math.fround(value)));
    expect([...float32Bytes([1])]).toEqual([0x00, 0x00, 0x80, 0x3f]);
  });

  it('reads a view at any offset of a larger buffer, as protobuf bytes fields are', () => {
    const payload = float32Bytes([-2.5, 7.25]);
    const message = new Uint8Array(3 + payload.byteLength + 5);
    message.set(payload, 3);
    message.fill(0xff, 0, 3);
    message.fill(0xee, 3 + payload.byteLength);
    expect(readFloat32(message.subarray(3, 3 + payload.byteLength))).toEqual([-2.5, 7.25]);
    const tokens = new Uint8Array(1 + 8);
    tokens.set(int32Bytes([259, -3]), 1);
    expect(readInt32(tokens.subarray(1))).toEqual([259, -3]);
  });

  it('a length that is not a whole number of values is refused, saying what it was', () => {
    expect(() => readInt32(new Uint8Array(6), 'sampled tokens')).toThrow(
      'Expected sampled tokens to be a multiple of 4 bytes, got 6',
    );
    expect(() => readInt64(new Uint8Array(12))).toThrow(/multiple of 8 bytes, got 12/);
    expect(() => readFloat32(new Uint8Array(3))).toThrow(/multiple of 4 bytes, got 3/);
  });

  it('empty arrays stay empty', () => {
    expect(readInt32(int32Bytes([]))).toEqual([]);
    expect(readInt64(int64Bytes([]))).toEqual([]);
    expect(readFloat32(float32Bytes([]))).toEqual([]);
  });
});
