/**
 * Gradients of the kernels the transformer's training pass uses. tfjs-core's Node bundle does not
 * register any gradient (its `register_all_gradients` module is only importable through a
 * bundler), so the engine registers these itself, following tfjs-core's own definitions.
 */
import type { GradConfig, NamedAttrMap, Tensor } from '@tensorflow/tfjs-core';
import type { TensorFlow } from './tensorflow.js';

/** Swaps the last two axes (a matrix transpose, batched for rank 3). */
export function transposeLast(tf: TensorFlow, x: Tensor): Tensor {
  const perm = x.shape.map((_, axis) => axis);
  const last = perm.length - 1;
  [perm[last - 1], perm[last]] = [perm[last] as number, perm[last - 1] as number];
  return tf.transpose(x, perm);
}

/** Registers the gradients once per thread. */
export function registerGradients(tf: TensorFlow): void {
  const configs: GradConfig[] = [
    ...arithmeticGradients(tf),
    matMulGradient(tf),
    ...layoutGradients(tf),
    ...reductionGradients(tf),
    ...unaryGradients(tf),
    softmaxGradient(tf),
    gatherRowsGradient(tf),
    ...concatGradients(tf),
    clipByValueGradient(tf),
  ];
  for (const config of configs) tf.registerGradient(config);
}

/** The value of a kernel's attribute `name`. */
function attribute<T>(attrs: NamedAttrMap, name: string): T {
  return attrs[name] as unknown as T;
}

/** Sums a broadcast operand's `gradient` (of `outputShape`) back to the operand's `shape`. */
function reduceTo(tf: TensorFlow, gradient: Tensor, shape: number[], outputShape: number[]): Tensor {
  const axes = tf.broadcast_util.getReductionAxes(shape, outputShape);
  if (axes.length === 0) return tf.reshape(gradient, shape);
  // Summing over leading axes (bias and position-embedding gradients) on the host: the wasm Sum
  // kernel transposes first and is far slower for these shapes.
  const leading = axes.every((axis, index) => axis === index) && axes.length < outputShape.length;
  if (leading) {
    const rows = axes.reduce((product, axis) => product * (outputShape[axis] as number), 1);
    const columns = gradient.size / rows;
    const values = gradient.dataSync() as Float32Array;
    const sums = new Float32Array(columns);
    for (let row = 0; row < rows; row += 1) {
      const offset = row * columns;
      for (let column = 0; column < columns; column += 1)
        sums[column] = (sums[column] as number) + (values[offset + column] as number);
    }
    return tf.tensor(sums, shape);
  }
  return tf.reshape(tf.sum(gradient, axes), shape);
}

/** The gradient of a broadcasting binary kernel, each operand's part summed back to its shape. */
function binaryGradient(
  tf: TensorFlow,
  kernelName: string,
  gradient: (dy: Tensor, a: Tensor, b: Tensor) => [Tensor, Tensor],
): GradConfig {
  return {
    kernelName,
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, saved) => {
      const [a, b] = saved as [Tensor, Tensor];
      const outputShape = tf.broadcast_util.assertAndGetBroadcastShape(a.shape, b.shape);
      return {
        a: () => reduceTo(tf, gradient(dy as Tensor, a, b)[0], a.shape, outputShape),
        b: () => reduceTo(tf, gradient(dy as Tensor, a, b)[1], b.shape, outputShape),
      };
    },
  };
}

/** `dy` of a reduction (Sum, Mean) broadcast back to the input's shape, and how many values each output summed. */
function expandReduced(
  tf: TensorFlow,
  dy: Tensor,
  x: Tensor,
  attrs: NamedAttrMap,
): { expanded: Tensor; count: number } {
  const axes = tf.util.parseAxisParam(attribute<number | number[]>(attrs, 'axis'), x.shape);
  const shape = x.shape.slice();
  let count = 1;
  for (const axis of axes) {
    count *= shape[axis] as number;
    shape[axis] = 1;
  }
  return { expanded: tf.mul(tf.reshape(dy, shape), tf.ones(x.shape, 'float32')), count };
}

/** Add, Sub, Multiply, RealDiv and Minimum. */
function arithmeticGradients(tf: TensorFlow): GradConfig[] {
  return [
    binaryGradient(tf, 'Add', (dy) => [dy, dy]),
    binaryGradient(tf, 'Sub', (dy) => [dy, tf.neg(dy)]),
    binaryGradient(tf, 'Multiply', (dy, a, b) => [
      tf.mul(dy, tf.cast(b, 'float32')),
      tf.mul(dy, tf.cast(a, 'float32')),
    ]),
    binaryGradient(tf, 'RealDiv', (dy, a, b) => [tf.div(dy, b), tf.neg(tf.div(tf.mul(dy, a), tf.square(b)))]),
    binaryGradient(tf, 'Minimum', (dy, a, b) => [
      tf.mul(dy, tf.cast(tf.lessEqual(a, b), 'float32')),
      tf.mul(dy, tf.cast(tf.greater(a, b), 'float32')),
    ]),
  ];
}

/** BatchMatMul, for every combination of transposed operands. */
function matMulGradient(tf: TensorFlow): GradConfig {
  return {
    kernelName: 'BatchMatMul',
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, saved, attrs) => {
      const [a, b] = saved as [Tensor, Tensor];
      const d = dy as Tensor;
      const transposeA = attribute<boolean>(attrs, 'transposeA');
      const transposeB = attribute<boolean>(attrs, 'transposeB');
      // The wasm backend's matMul is ~8x slower with a transposed operand than a transpose
      // followed by a plain matMul, so every product below is plain.
      const t = (x: Tensor): Tensor => transposeLast(tf, x);
      if (!transposeA && !transposeB) return { a: () => tf.matMul(d, t(b)), b: () => tf.matMul(t(a), d) };
      if (!transposeA && transposeB) return { a: () => tf.matMul(d, b), b: () => tf.matMul(t(d), a) };
      if (transposeA && !transposeB) return { a: () => tf.matMul(b, t(d)), b: () => tf.matMul(a, d) };
      return { a: () => tf.matMul(t(b), t(d)), b: () => tf.matMul(t(d), t(a)) };
    },
  };
}

/** Reshape, Transpose and Slice. */
function layoutGradients(tf: TensorFlow): GradConfig[] {
  return [
    {
      kernelName: 'Reshape',
      inputsToSave: ['x'],
      gradFunc: (dy, saved) => ({ x: () => tf.reshape(dy as Tensor, (saved[0] as Tensor).shape) }),
    },
    {
      kernelName: 'Transpose',
      gradFunc: (dy, _saved, attrs) => {
        const perm = attribute<number[]>(attrs, 'perm');
        const inverse = perm.map((_, index) => perm.indexOf(index));
        return { x: () => tf.transpose(dy as Tensor, inverse) };
      },
    },
    {
      kernelName: 'Slice',
      inputsToSave: ['x'],
      gradFunc: (dy, saved, attrs) => {
        const x = saved[0] as Tensor;
        const begin = attribute<number[]>(attrs, 'begin');
        const size = attribute<number[]>(attrs, 'size');
        const paddings = x.shape.map((dimension, axis): [number, number] => {
          const start = begin[axis] ?? 0;
          const length = size[axis] === undefined || size[axis] === -1 ? dimension - start : (size[axis] as number);
          return [start, dimension - start - length];
        });
        return { x: () => tf.pad(dy as Tensor, paddings) };
      },
    },
  ];
}

/** Sum and Mean. */
function reductionGradients(tf: TensorFlow): GradConfig[] {
  return [
    {
      kernelName: 'Sum',
      inputsToSave: ['x'],
      gradFunc: (dy, saved, attrs) => ({
        x: () => expandReduced(tf, dy as Tensor, saved[0] as Tensor, attrs).expanded,
      }),
    },
    {
      kernelName: 'Mean',
      inputsToSave: ['x'],
      gradFunc: (dy, saved, attrs) => ({
        x: () => {
          const { expanded, count } = expandReduced(tf, dy as Tensor, saved[0] as Tensor, attrs);
          return tf.div(expanded, count);
        },
      }),
    },
  ];
}

/** Square, Sqrt, Rsqrt, Sigmoid, Exp, Neg, Cast and Identity. */
function unaryGradients(tf: TensorFlow): GradConfig[] {
  return [
    {
      kernelName: 'Square',
      inputsToSave: ['x'],
      gradFunc: (dy, saved) => ({ x: () => tf.mul(dy as Tensor, tf.mul(saved[0] as Tensor, 2)) }),
    },
    {
      kernelName: 'Sqrt',
      outputsToSave: [true],
      gradFunc: (dy, saved) => ({ x: () => tf.div(dy as Tensor, tf.mul(saved[0] as Tensor, 2)) }),
    },
    {
      kernelName: 'Rsqrt',
      inputsToSave: ['x'],
      gradFunc: (dy, saved) => ({ x: () => tf.neg(tf.div(dy as Tensor, tf.mul(tf.pow(saved[0] as Tensor, 1.5), 2))) }),
    },
    {
      kernelName: 'Sigmoid',
      outputsToSave: [true],
      gradFunc: (dy, saved) => {
        const y = saved[0] as Tensor;
        return { x: () => tf.mul(dy as Tensor, tf.mul(y, tf.sub(1, y))) };
      },
    },
    {
      kernelName: 'Exp',
      outputsToSave: [true],
      gradFunc: (dy, saved) => ({ x: () => tf.mul(dy as Tensor, saved[0] as Tensor) }),
    },
    { kernelName: 'Neg', gradFunc: (dy) => ({ x: () => tf.neg(dy as Tensor) }) },
    { kernelName: 'Cast', gradFunc: (dy) => ({ x: () => tf.clone(dy as Tensor) }) },
    { kernelName: 'Identity', gradFunc: (dy) => ({ x: () => tf.cast(dy as Tensor, 'float32') }) },
  ];
}

/** Softmax along its `dim`. */
function softmaxGradient(tf: TensorFlow): GradConfig {
  return {
    kernelName: 'Softmax',
    outputsToSave: [true],
    gradFunc: (dy, saved, attrs) => {
      const y = saved[0] as Tensor;
      const dim = attribute<number>(attrs, 'dim');
      const dyTimesY = tf.mul(dy as Tensor, y);
      return { logits: () => tf.sub(dyTimesY, tf.mul(tf.sum(dyTimesY, [dim], true), y)) };
    },
  };
}

/** GatherV2 of rows (axis 0). */
function gatherRowsGradient(tf: TensorFlow): GradConfig {
  return {
    // Rows of a matrix (axis 0): the gradient adds each output row back into the row it came
    // from, on the host (the wasm backend has no scatter kernel).
    kernelName: 'GatherV2',
    inputsToSave: ['x', 'indices'],
    gradFunc: (dy, saved, attrs) => {
      const [x, indices] = saved as [Tensor, Tensor];
      if (attribute<number>(attrs, 'axis') !== 0 || (attribute<number | undefined>(attrs, 'batchDims') ?? 0) !== 0)
        throw new Error('Only gathers of rows (axis 0) have a gradient here.');
      return {
        x: () => {
          const rows = indices.dataSync();
          const values = (dy as Tensor).dataSync() as Float32Array;
          const width = x.size / (x.shape[0] as number);
          const sums = new Float32Array(x.size);
          for (let index = 0; index < rows.length; index += 1) {
            const target = (rows[index] as number) * width;
            const source = index * width;
            for (let column = 0; column < width; column += 1)
              sums[target + column] = (sums[target + column] as number) + (values[source + column] as number);
          }
          return tf.tensor(sums, x.shape);
        },
        indices: () => tf.zerosLike(indices),
      };
    },
  };
}

/** Concat and SplitV. */
function concatGradients(tf: TensorFlow): GradConfig[] {
  return [
    {
      kernelName: 'Concat',
      saveAllInputs: true,
      gradFunc: (dy, saved, attrs) => {
        const inputs = saved as Tensor[];
        const axis = tf.util.parseAxisParam(attribute<number>(attrs, 'axis'), (inputs[0] as Tensor).shape)[0] as number;
        const parts = tf.split(
          dy as Tensor,
          inputs.map((input) => input.shape[axis] as number),
          axis,
        );
        return parts.map((part) => () => part) as unknown as Record<string, () => Tensor>;
      },
    },
    {
      kernelName: 'SplitV',
      gradFunc: (dy, _saved, attrs) => ({ x: () => tf.concat(dy as Tensor[], attribute<number>(attrs, 'axis')) }),
    },
  ];
}

/** ClipByValue: `dy` inside the range, 0 outside. */
function clipByValueGradient(tf: TensorFlow): GradConfig {
  return {
    kernelName: 'ClipByValue',
    inputsToSave: ['x'],
    gradFunc: (dy, saved, attrs) => {
      const x = saved[0] as Tensor;
      const inside = tf.logicalAnd(
        tf.greaterEqual(x, attribute<number>(attrs, 'clipValueMin')),
        tf.lessEqual(x, attribute<number>(attrs, 'clipValueMax')),
      );
      return { x: () => tf.where(inside, dy as Tensor, tf.zerosLike(dy as Tensor)) };
    },
  };
}
