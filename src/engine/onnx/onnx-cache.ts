/**
 * The key/value cache of onnxruntime sampling, in host memory between decoding steps. Each layer's
 * keys and values are one buffer laid out time-major, `[capacity, rows, kvHeads, headDim]`: the
 * first `length` positions are contiguous, so a step hands them to onnxruntime as a tensor over the
 * buffer itself (no copy), and the step's new key and value (`[rows, kvHeads, headDim]`, one
 * contiguous slab) are written after them. Capacity doubles when a step needs more.
 */

/** One layer's keys or values, time-major. */
interface LayerBuffers {
  keys: Float32Array;
  values: Float32Array;
}

/**
 * Keys and values of every layer for `rows` sequences and `length` positions.
 * @example
 * const cache = new OnnxKeyValueCache(2, 32, 3 * 64, 80);
 * cache.writeSlab(0, 0, prefillKeys, prefillValues, 64); // positions 0..63 of layer 0
 */
export class OnnxKeyValueCache {
  private readonly layers: LayerBuffers[];
  private capacityValue: number;
  /** Positions held (the same for every layer once a step has written them all). */
  length = 0;

  /**
   * @param layerCount blocks of the model.
   * @param rows sequences (batch rows).
   * @param width floats of one row at one position: `kvHeads * headDim`.
   * @param capacity positions to allocate at first (grown on demand).
   */
  constructor(
    layerCount: number,
    readonly rows: number,
    readonly width: number,
    capacity: number,
  ) {
    this.capacityValue = Math.max(1, capacity);
    const size = this.capacityValue * rows * width;
    this.layers = Array.from({ length: layerCount }, () => ({
      keys: new Float32Array(size),
      values: new Float32Array(size),
    }));
  }

  /** Positions the buffers hold before they grow. */
  get capacity(): number {
    return this.capacityValue;
  }

  /** Floats of one position (all rows). */
  private get slab(): number {
    return this.rows * this.width;
  }

  /** Makes room for `positions` positions (copying the held ones into buffers twice as large as needed). */
  reserve(positions: number): void {
    if (positions <= this.capacityValue) return;
    let capacity = this.capacityValue;
    while (capacity < positions) capacity *= 2;
    const size = capacity * this.slab;
    const held = this.length * this.slab;
    for (const layer of this.layers) {
      const keys = new Float32Array(size);
      keys.set(layer.keys.subarray(0, held));
      const values = new Float32Array(size);
      values.set(layer.values.subarray(0, held));
      layer.keys = keys;
      layer.values = values;
    }
    this.capacityValue = capacity;
  }

  /**
   * Writes `count` positions of layer `layer` from position `start` on: `keys` and `values` are
   * `[count, rows, kvHeads, headDim]`. The caller sets {@link length} once every layer is written.
   */
  writeSlab(layer: number, start: number, keys: Float32Array, values: Float32Array, count: number): void {
    this.reserve(start + count);
    const buffers = this.layers[layer] as LayerBuffers;
    const size = count * this.slab;
    buffers.keys.set(keys.subarray(0, size), start * this.slab);
    buffers.values.set(values.subarray(0, size), start * this.slab);
  }

  /** Layer `layer`'s first `length` positions, `[length, rows, kvHeads, headDim]`, as views of the buffers. */
  held(layer: number): { keys: Float32Array; values: Float32Array } {
    const buffers = this.layers[layer] as LayerBuffers;
    const size = this.length * this.slab;
    return { keys: buffers.keys.subarray(0, size), values: buffers.values.subarray(0, size) };
  }

  /** A new cache of the given rows, in order (a row may repeat: rows sharing a prompt). */
  selectRows(rows: readonly number[]): OnnxKeyValueCache {
    const out = new OnnxKeyValueCache(this.layers.length, rows.length, this.width, this.capacityValue);
    out.length = this.length;
    const width = this.width;
    this.layers.forEach((layer, index) => {
      const target = out.layers[index] as LayerBuffers;
      for (let position = 0; position < this.length; position += 1) {
        const from = position * this.slab;
        const to = position * rows.length * width;
        rows.forEach((row, at) => {
          target.keys.set(layer.keys.subarray(from + row * width, from + (row + 1) * width), to + at * width);
          target.values.set(layer.values.subarray(from + row * width, from + (row + 1) * width), to + at * width);
        });
      }
    });
    return out;
  }

  /** Caches of consecutive batch chunks (same length) as one: their rows, in order. */
  static join(caches: readonly OnnxKeyValueCache[]): OnnxKeyValueCache {
    const first = caches[0];
    if (!first) throw new Error('OnnxKeyValueCache.join: expected at least one cache, got none.');
    if (caches.length === 1) return first;
    const rows = caches.reduce((sum, cache) => sum + cache.rows, 0);
    const out = new OnnxKeyValueCache(first.layers.length, rows, first.width, first.length);
    out.length = first.length;
    for (let layer = 0; layer < first.layers.length; layer += 1) {
      const target = out.layers[layer] as LayerBuffers;
      for (let position = 0; position < first.length; position += 1) {
        let to = position * rows * first.width;
        for (const cache of caches) {
          if (cache.length !== first.length || cache.width !== first.width)
            throw new Error(
              `OnnxKeyValueCache.join: expected caches of ${first.length} positions of width ${first.width}, got ${cache.length} of ${cache.width}.`,
            );
          const source = cache.layers[layer] as LayerBuffers;
          const from = position * cache.slab;
          target.keys.set(source.keys.subarray(from, from + cache.slab), to);
          target.values.set(source.values.subarray(from, from + cache.slab), to);
          to += cache.slab;
        }
      }
    }
    return out;
  }
}
