import { describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { METADATA_FILE, SMALL_CHAT, TINY_CHAT, WEIGHTS_FILE, parameterCount } from '../../src/engine/index.js';
import { AdamW } from '../../src/engine/optimizer.js';
import { decodeSafetensors, encodeSafetensors } from '../../src/engine/safetensors.js';
import type { HostTensor } from '../../src/engine/safetensors.js';
import {
  initialWeights,
  parameterSpecs,
  readCheckpointMetadata,
  readCheckpointWeights,
  readOptimizerState,
  writeCheckpoint,
} from '../../src/engine/weights.js';
import type { CheckpointMetadata, HostWeights } from '../../src/engine/weights.js';

/** Parses a safetensors file by hand, independently of the engine's reader. */
function parseByHand(bytes: Buffer): {
  header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  metadata: unknown;
  dataStart: number;
  values: (name: string) => number[];
} {
  const headerLength = Number(bytes.readBigUInt64LE(0));
  type Entry = { dtype: string; shape: number[]; data_offsets: [number, number] };
  const { __metadata__: metadata, ...header } = JSON.parse(
    bytes.subarray(8, 8 + headerLength).toString('utf8'),
  ) as Record<string, Entry>;
  const dataStart = 8 + headerLength;
  const values = (name: string): number[] => {
    const [begin, end] = (header[name] as Entry).data_offsets;
    const result: number[] = [];
    for (let offset = dataStart + begin; offset < dataStart + end; offset += 4) result.push(bytes.readFloatLE(offset));
    return result;
  };
  return { header, metadata, dataStart, values };
}

describe('base models', () => {
  it('initialises the same weights from the same config and seed, and other weights from another seed', () => {
    const first = initialWeights(TINY_CHAT);
    const second = initialWeights(TINY_CHAT);
    const reseeded = initialWeights({ ...TINY_CHAT, seed: 2 });
    expect([...first.keys()]).toEqual(parameterSpecs(TINY_CHAT).map((spec) => spec.name));
    for (const [name, tensor] of first) {
      expect(second.get(name)?.shape).toEqual(tensor.shape);
      expect(Buffer.from((second.get(name) as HostTensor).data.buffer).equals(Buffer.from(tensor.data.buffer))).toBe(
        true,
      );
    }
    const embedding = first.get('token_embedding') as HostTensor;
    expect(Array.from(embedding.data.slice(0, 4))).not.toEqual(
      Array.from((reseeded.get('token_embedding') as HostTensor).data.slice(0, 4)),
    );
    // Random, not constant: the normal init has roughly the spec's standard deviation (0.1).
    const std = Math.sqrt(embedding.data.reduce((sum, value) => sum + value * value, 0) / embedding.data.length);
    expect(std).toBeGreaterThan(0.09);
    expect(std).toBeLessThan(0.11);
  });

  it('counts the parameters of the documented shapes', () => {
    expect(parameterCount(TINY_CHAT)).toBe(150_282);
    expect(parameterCount(SMALL_CHAT)).toBe(925_194);
  });
});

describe('safetensors', () => {
  const tensors: HostWeights = new Map<string, HostTensor>([
    ['b', { shape: [2, 3], data: Float32Array.from([1.5, -2, 0, 3.25, 1e-7, -1e7]) }],
    ['a.é', { shape: [1], data: Float32Array.from([Math.PI]) }],
  ]);

  it('writes an 8-byte little-endian header length, a JSON header with dtype/shape/data_offsets, then raw little-endian float32', () => {
    const bytes = Buffer.from(encodeSafetensors(tensors, { step: '3' }));
    const { header, metadata, dataStart, values } = parseByHand(bytes);
    expect(metadata).toEqual({ step: '3' });
    expect(header).toEqual({
      'a.é': { dtype: 'F32', shape: [1], data_offsets: [0, 4] },
      b: { dtype: 'F32', shape: [2, 3], data_offsets: [4, 28] },
    });
    // The data starts 8-byte aligned (the header is padded with spaces, counted in bytes).
    expect(dataStart % 8).toBe(0);
    expect(bytes.length).toBe(dataStart + 28);
    expect(values('a.é')).toEqual([Math.fround(Math.PI)]);
    expect(values('b')).toEqual(Array.from(Float32Array.from([1.5, -2, 0, 3.25, 1e-7, -1e7])));
    const decoded = decodeSafetensors(bytes);
    expect(decoded.metadata).toEqual({ step: '3' });
    expect(decoded.tensors.get('b')).toEqual(tensors.get('b'));
  });

  it('writes BF16 as the upper half of each float32 (rounded toward zero), which reads back as such', () => {
    const data = Float32Array.from([1.5, -2, Math.PI, 1e-7, -1e7, 0]);
    const bytes = encodeSafetensors(new Map([['w', { shape: [2, 3], data }]]), {}, { dtype: 'BF16' });
    const decoded = decodeSafetensors(bytes, { dtypes: ['BF16'] }).tensors.get('w');
    const truncated = new Float32Array(new Uint32Array(data.buffer.slice(0)).map((bits) => (bits >>> 16) << 16).buffer);
    expect(decoded?.shape).toEqual([2, 3]);
    expect(Array.from(decoded?.data ?? [])).toEqual(Array.from(truncated));
    expect(decoded?.data[2]).not.toBe(Math.fround(Math.PI));
    // The header names the dtype: a reader that accepts only F32 refuses it, naming BF16.
    expect(() => decodeSafetensors(bytes)).toThrow(/BF16/);
  });

  it('hands BF16 tensors over as their bits, from a 2-byte aligned file or not, and F32 ones widened', () => {
    const data = Float32Array.from([1.5, -2, Math.PI, 1e-7, -1e7, 0]);
    const aligned = encodeSafetensors(new Map([['w', { shape: [2, 3], data }]]), {}, { dtype: 'BF16' });
    // The same file with a header one byte longer (a trailing space): its data start at an odd offset.
    const length = Number(new DataView(aligned.buffer).getBigUint64(0, true));
    const odd = new Uint8Array(aligned.length + 1);
    new DataView(odd.buffer).setBigUint64(0, BigInt(length + 1), true);
    odd.set(aligned.subarray(8, 8 + length), 8);
    odd[8 + length] = 0x20;
    odd.set(aligned.subarray(8 + length), 9 + length);
    const expected = Array.from(new Uint32Array(data.buffer.slice(0)), (bits) => bits >>> 16);
    for (const bytes of [aligned, odd]) {
      const seen: [string, readonly number[], number[]][] = [];
      const widened: string[] = [];
      const decoded = decodeSafetensors(bytes, {
        dtypes: ['BF16'],
        onTensor: (name) => widened.push(name),
        onBfloat16: (name, shape, bits) => seen.push([name, shape, Array.from(bits)]),
      });
      expect(decoded.tensors.size).toBe(0);
      expect(widened).toEqual([]);
      expect(seen).toEqual([['w', [2, 3], expected]]);
    }
    const floats: string[] = [];
    decodeSafetensors(encodeSafetensors(tensors), {
      onTensor: (name) => floats.push(name),
      onBfloat16: () => floats.push('not F32'),
    });
    expect(floats.sort()).toEqual(['a.é', 'b']);
  });

  it('refuses malformed files with messages that say what was found', () => {
    const good = encodeSafetensors(tensors);
    expect(() => decodeSafetensors(good.subarray(0, 4))).toThrow(/at least 8 bytes, got 4/);
    expect(() => decodeSafetensors(good.subarray(0, 20))).toThrow(/header length \d+ exceeds the file size 20/);
    expect(() => decodeSafetensors(good.subarray(0, good.length - 4))).toThrow(
      /data_offsets \[4,28\], outside the 24 data bytes/,
    );
    const notJson = new Uint8Array(16);
    new DataView(notJson.buffer).setBigUint64(0, 8n, true);
    notJson.set(new TextEncoder().encode('{{{{{{{{'), 8);
    expect(() => decodeSafetensors(notJson)).toThrow(/Expected a JSON object as the safetensors header/);
    const halves = Buffer.from(good);
    halves.write('F16', halves.indexOf('F32'), 'utf8');
    expect(() => decodeSafetensors(halves)).toThrow(/Expected F32 tensors in safetensors, got F16/);
  });

  it('writes checkpoint weights, optimizer state and metadata that read back exactly', async () => {
    const directory = await mkdtemp(path.join(os.tmpdir(), 'engine-weights-'));
    try {
      const weights = initialWeights(TINY_CHAT);
      const optimizer = new AdamW(weights, null);
      const gradients = new Map([...weights].map(([name, tensor]) => [name, tensor.data.map((value) => value * 0.5)]));
      optimizer.step(gradients, 1e-3);
      const metadata: CheckpointMetadata = {
        format: 'policyloop-checkpoint',
        base_model: TINY_CHAT.id,
        step: 7,
        kind: 'rl',
        training_config: { learning_rate: null },
        optimizer_steps: 1,
        metrics: { loss: 0.5 },
        created_at: '2026-01-01T00:00:00.000Z',
      };
      await writeCheckpoint(directory, weights, optimizer.state(), metadata);
      const bytes = await readFile(path.join(directory, WEIGHTS_FILE));
      const byHand = parseByHand(bytes);
      expect(byHand.metadata).toEqual({ format: 'pt', base_model: TINY_CHAT.id, step: '7' });
      expect(byHand.values('final_norm.scale')).toEqual(
        Array.from((weights.get('final_norm.scale') as HostTensor).data),
      );
      expect(byHand.values('layers.1.mlp.down').slice(0, 16)).toEqual(
        Array.from((weights.get('layers.1.mlp.down') as HostTensor).data.slice(0, 16)),
      );
      expect(await readCheckpointWeights(TINY_CHAT, directory)).toEqual(weights);
      const state = await readOptimizerState(TINY_CHAT, directory);
      expect(state?.step).toBe(1);
      expect(state?.firstMoments).toEqual(optimizer.state().firstMoments);
      expect(await readCheckpointMetadata(directory)).toEqual(metadata);
      expect(JSON.parse(await readFile(path.join(directory, METADATA_FILE), 'utf8'))).toEqual(metadata);
      // A checkpoint of another base model's shape is refused, naming the tensor.
      await expect(readCheckpointWeights(SMALL_CHAT, directory)).rejects.toThrow(
        /token_embedding has shape \[266, 64\], expected \[266, 128\]/,
      );
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe('AdamW', () => {
  const make = (): HostWeights =>
    new Map<string, HostTensor>([
      ['layer.weight', { shape: [2], data: Float32Array.from([1, -1]) }],
      ['layer.bias', { shape: [2], data: Float32Array.from([1, -1]) }],
    ]);

  it('moves each weight by the learning rate against the sign of its gradient on the first step, with decoupled decay on matrices only', () => {
    const weights = make();
    const optimizer = new AdamW(weights, null);
    const norm = optimizer.step(
      new Map([
        ['layer.weight', Float32Array.from([0.3, -0.1])],
        ['layer.bias', Float32Array.from([-0.2, 0.4])],
      ]),
      0.1,
    );
    expect(norm).toBeCloseTo(Math.sqrt(0.09 + 0.01 + 0.04 + 0.16), 6);
    // Bias-corrected m / sqrt(v) is sign(g) on step 1; decay multiplies matrices by 1 - lr * 0.01.
    const weight = Array.from(weights.get('layer.weight')?.data ?? []);
    expect(weight[0]).toBeCloseTo(1 * (1 - 0.001) - 0.1, 5);
    expect(weight[1]).toBeCloseTo(-1 * (1 - 0.001) + 0.1, 5);
    const bias = Array.from(weights.get('layer.bias')?.data ?? []);
    expect(bias[0]).toBeCloseTo(1 + 0.1, 5);
    expect(bias[1]).toBeCloseTo(-1 - 0.1, 5);
    expect(optimizer.state().step).toBe(1);
  });

  it('clips gradients to a global norm of 1 and reports the norm before clipping', () => {
    const small = make();
    const large = make();
    const smallOptimizer = new AdamW(small, null);
    const largeOptimizer = new AdamW(large, null);
    const direction = [0.6, -0.8, 0, 0];
    const gradients = (scale: number): Map<string, Float32Array> =>
      new Map([
        ['layer.weight', Float32Array.from(direction.slice(0, 2).map((value) => value * scale))],
        ['layer.bias', Float32Array.from(direction.slice(2).map((value) => value * scale))],
      ]);
    smallOptimizer.step(gradients(1), 0.1);
    expect(largeOptimizer.step(gradients(50), 0.1)).toBeCloseTo(50, 4);
    // A second step, so that the moments' history matters: clipped, both saw the same unit gradients.
    smallOptimizer.step(gradients(1), 0.1);
    expect(largeOptimizer.step(gradients(3), 0.1)).toBeCloseTo(3, 5);
    const expected = Array.from(small.get('layer.weight')?.data ?? []);
    Array.from(large.get('layer.weight')?.data ?? []).forEach((value, index) =>
      expect(value).toBeCloseTo(expected[index] ?? Number.NaN, 6),
    );
    // Unclipped, the same gradients would have moved the weights differently.
    const unclipped = make();
    const unclippedOptimizer = new AdamW(unclipped, null, {
      beta1: 0.9,
      beta2: 0.99,
      epsilon: 1e-8,
      weightDecay: 0.01,
      maxGradNorm: Infinity,
    });
    unclippedOptimizer.step(gradients(50), 0.1);
    unclippedOptimizer.step(gradients(3), 0.1);
    expect(Math.abs((unclipped.get('layer.weight')?.data[0] ?? 0) - (expected[0] ?? 0))).toBeGreaterThan(1e-4);
  });

  it('continues from a saved state (the moments carry over)', () => {
    const weights = make();
    const optimizer = new AdamW(weights, null);
    const gradient = new Map([
      ['layer.weight', Float32Array.from([1, 1])],
      ['layer.bias', Float32Array.from([1, 1])],
    ]);
    optimizer.step(gradient, 0.01);
    const resumed = new AdamW(weights, optimizer.state());
    resumed.step(gradient, 0.01);
    expect(resumed.state().step).toBe(2);
    // The gradient (norm 2) is clipped to 0.5 per weight: m = 0.1 * 0.5, then 0.9 * m + 0.1 * 0.5.
    expect(resumed.state().firstMoments.get('layer.bias')?.data[0]).toBeCloseTo(0.9 * 0.05 + 0.05, 6);
  });
});
