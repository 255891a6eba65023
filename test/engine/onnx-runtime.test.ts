/**
 * The engine's ONNX writer and runtime choice: graphs written in TypeScript run on onnxruntime-node
 * with symbolic sizes and every kind of attribute, and the runtime the engine reports follows
 * POLICYLOOP_ENGINE_RUNTIME.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { GraphBuilder } from '../../src/engine/onnx/graph-builder.js';
import {
  ENGINE_RUNTIME_VARIABLE,
  createOnnxSession,
  describeEngineRuntime,
  loadOnnxRuntime,
  onnxThreads,
  requestedEngineRuntime,
} from '../../src/engine/onnx/onnx-runtime.js';

const saved = process.env[ENGINE_RUNTIME_VARIABLE];
afterEach(() => {
  if (saved === undefined) delete process.env[ENGINE_RUNTIME_VARIABLE];
  else process.env[ENGINE_RUNTIME_VARIABLE] = saved;
});

/** `a · b` for row-major `a` [m, k] and `b` [k, n], in float64 on the host. */
function product(a: Float32Array, b: Float32Array, m: number, k: number, n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < m; i++)
    for (let j = 0; j < n; j++) {
      let sum = 0;
      for (let p = 0; p < k; p++) sum += (a[i * k + p] as number) * (b[p * n + j] as number);
      out.push(sum);
    }
  return out;
}

describe('graphs written by the engine run on onnxruntime-node', () => {
  it('a product with a symbolic row count, a transpose (ints attribute) and a softmax (int attribute)', async () => {
    const graph = new GraphBuilder('probe');
    const a = graph.input('a', 'float', ['rows', 5]);
    const bt = graph.input('bt', 'float', [3, 5]);
    const b = graph.op('Transpose', [bt], { perm: { ints: [1, 0] } });
    const scaled = graph.op('Mul', [graph.op('MatMul', [a, b]), graph.scalar(0.5)]);
    graph.output(scaled, 'scaled', 'float', ['rows', 3]);
    graph.output(graph.op('Softmax', [scaled], { axis: { int: -1 } }), 'probabilities', 'float', ['rows', 3]);
    const session = await createOnnxSession(graph.encode(), 1);
    const ort = await loadOnnxRuntime();
    for (const rows of [1, 4]) {
      const aValues = Float32Array.from({ length: rows * 5 }, (_, i) => Math.sin(i + 1));
      const btValues = Float32Array.from({ length: 15 }, (_, i) => Math.cos(i));
      const b = new Float32Array(15);
      for (let i = 0; i < 3; i++) for (let j = 0; j < 5; j++) b[j * 3 + i] = btValues[i * 5 + j] as number;
      const result = await session.run({
        a: new ort.Tensor('float32', aValues, [rows, 5]),
        bt: new ort.Tensor('float32', btValues, [3, 5]),
      });
      const expected = product(aValues, b, rows, 5, 3).map((value) => value * 0.5);
      expect(result.scaled?.dims).toEqual([rows, 3]);
      const got = Array.from(result.scaled?.data as Float32Array);
      got.forEach((value, index) => expect(value).toBeCloseTo(expected[index] as number, 5));
      const probabilities = Array.from(result.probabilities?.data as Float32Array);
      for (let row = 0; row < rows; row++) {
        const exps = expected.slice(row * 3, row * 3 + 3).map(Math.exp);
        const total = exps.reduce((x, y) => x + y, 0);
        exps.forEach((value, j) => expect(probabilities[row * 3 + j]).toBeCloseTo(value / total, 6));
      }
    }
  });

  it('a graph that names a value twice is refused when written, naming the value', () => {
    const graph = new GraphBuilder('twice');
    graph.input('x', 'float', [1]);
    expect(() => graph.input('x', 'float', [1])).toThrow('"x" is taken');
  });
});

describe('the runtime the engine runs on', () => {
  it('POLICYLOOP_ENGINE_RUNTIME selects one, and an unknown name is refused with the valid ones', () => {
    expect(requestedEngineRuntime({})).toBeUndefined();
    expect(requestedEngineRuntime({ [ENGINE_RUNTIME_VARIABLE]: 'tfjs-wasm' })).toBe('tfjs-wasm');
    expect(requestedEngineRuntime({ [ENGINE_RUNTIME_VARIABLE]: 'onnxruntime' })).toBe('onnxruntime');
    expect(() => requestedEngineRuntime({ [ENGINE_RUNTIME_VARIABLE]: 'cuda' })).toThrow(
      'POLICYLOOP_ENGINE_RUNTIME="cuda" is not a runtime of the engine: use onnxruntime or tfjs-wasm',
    );
  });

  it('describes a runtime with its threads, and the fallback with its reason', () => {
    expect(describeEngineRuntime({ name: 'onnxruntime', version: '1.30.0', threads: onnxThreads() })).toMatch(
      /^onnxruntime 1\.30\.0, \d+ threads?$/,
    );
    expect(
      describeEngineRuntime({ name: 'tfjs-wasm', version: '4.22.0', threads: 1, fallbackReason: 'not installed' }),
    ).toBe('tfjs-wasm 4.22.0, 1 thread (fallback: not installed)');
  });
});
