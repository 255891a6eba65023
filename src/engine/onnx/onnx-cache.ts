/**
 * The key/value cache of onnxruntime sampling, in host memory between decoding steps, in the
 * layouts the decoding graph's products take as they are (`cached-attention.ts`): per layer, keys
 * `[rows, kvHeads, headDim, capacity]` and values `[rows, kvHeads, capacity, headDim]`. A step hands
 * the whole buffers to onnxruntime (tensors over them: no copy) with the slots past {@link length}
 * masked, and writes the new position's key and value into them. Capacity doubles when needed.
 */

/** One layer's buffers. */
interface LayerBuffers {
  keys: Float32Array;
  values: Float32Array;
}

/**
 * Keys and values of every layer for `rows` sequences and `length` positions.
 * @example
 * const cache = new OnnxKeyValueCache(30, 32, 3, 64, 128);
 * cache.writePositions(0, 0, keys, values, 64); // a prefill's 64 positions of layer 0
 */
export class OnnxKeyValueCache {
  private readonly layers: LayerBuffers[];
  private capacityValue: number;
  /** Positions held (the same for every layer once a step has written them all). */
  length = 0;

  /**
   * @param layerCount blocks of the model.
   * @param rows sequences (batch rows).
   * @param kvHeads key/value heads.
   * @param headDimension floats of one head.
   * @param capacity positions to allocate at first (grown on demand).
   */
  constructor(
    layerCount: number,
    readonly rows: number,
    readonly kvHeads: number,
    readonly headDimension: number,
    capacity: number,
  ) {
    this.capacityValue = Math.max(1, capacity);
    const size = rows * kvHeads * headDimension * this.capacityValue;
    this.layers = Array.from({ length: layerCount }, () => ({
      keys: new Float32Array(size),
      values: new Float32Array(size),
    }));
  }

  /** Positions the buffers hold before they grow. */
  get capacity(): number {
    return this.capacityValue;
  }

  /** Layer `layer`'s whole buffers (keys `[rows, kvHeads, headDim, capacity]`, values `[rows, kvHeads, capacity, headDim]`). */
  buffers(layer: number): { keys: Float32Array; values: Float32Array } {
    return this.layers[layer] as LayerBuffers;
  }

  /** Makes room for `positions` positions: buffers of twice the capacity until they fit, the held positions copied. */
  reserve(positions: number): void {
    if (positions <= this.capacityValue) return;
    let capacity = this.capacityValue;
    while (capacity < positions) capacity *= 2;
    this.resize(capacity);
  }

  /** Buffers of exactly `capacity` positions (at least {@link length}), the held positions copied. */
  private resize(capacity: number): void {
    if (capacity === this.capacityValue) return;
    const old = this.capacityValue;
    const heads = this.rows * this.kvHeads;
    const d = this.headDimension;
    for (const layer of this.layers) {
      const keys = new Float32Array(heads * d * capacity);
      const values = new Float32Array(heads * d * capacity);
      // Keys: each (head, d) lane of `old` positions; values: each head's block of positions.
      for (let lane = 0; lane < heads * d; lane += 1)
        keys.set(layer.keys.subarray(lane * old, lane * old + this.length), lane * capacity);
      for (let head = 0; head < heads; head += 1)
        values.set(layer.values.subarray(head * old * d, (head * old + this.length) * d), head * capacity * d);
      layer.keys = keys;
      layer.values = values;
    }
    this.capacityValue = capacity;
  }

  /**
   * Writes `count` positions of layer `layer` from position `start` on: `keys`
   * `[rows, kvHeads, headDim, count]` and `values` `[rows, kvHeads, count, headDim]`, as the prefill
   * answers them. The caller sets {@link length} once every layer is written.
   */
  writePositions(layer: number, start: number, keys: Float32Array, values: Float32Array, count: number): void {
    this.reserve(start + count);
    const buffers = this.layers[layer] as LayerBuffers;
    const capacity = this.capacityValue;
    const heads = this.rows * this.kvHeads;
    const d = this.headDimension;
    for (let lane = 0; lane < heads * d; lane += 1)
      buffers.keys.set(keys.subarray(lane * count, (lane + 1) * count), lane * capacity + start);
    for (let head = 0; head < heads; head += 1)
      buffers.values.set(values.subarray(head * count * d, (head + 1) * count * d), (head * capacity + start) * d);
  }

  /**
   * Writes one position `at` of layer `layer`: `key` and `value` `[rows, kvHeads, headDim]` (a
   * decoding step's new token).
   */
  writePosition(layer: number, at: number, key: Float32Array, value: Float32Array): void {
    this.reserve(at + 1);
    const buffers = this.layers[layer] as LayerBuffers;
    const capacity = this.capacityValue;
    const heads = this.rows * this.kvHeads;
    const d = this.headDimension;
    for (let lane = 0; lane < heads * d; lane += 1) buffers.keys[lane * capacity + at] = key[lane] as number;
    for (let head = 0; head < heads; head += 1)
      buffers.values.set(value.subarray(head * d, (head + 1) * d), (head * capacity + at) * d);
  }

  /** A new cache of the given rows, in order (a row may repeat: rows sharing a prompt). */
  selectRows(rows: readonly number[]): OnnxKeyValueCache {
    const out = new OnnxKeyValueCache(
      this.layers.length,
      rows.length,
      this.kvHeads,
      this.headDimension,
      this.capacityValue,
    );
    out.length = this.length;
    const block = this.kvHeads * this.headDimension * this.capacityValue;
    this.layers.forEach((layer, index) => {
      const target = out.layers[index] as LayerBuffers;
      rows.forEach((row, at) => {
        target.keys.set(layer.keys.subarray(row * block, (row + 1) * block), at * block);
        target.values.set(layer.values.subarray(row * block, (row + 1) * block), at * block);
      });
    });
    return out;
  }

  /** Caches of consecutive batch chunks (same length) as one: their rows, in order. */
  static join(caches: readonly OnnxKeyValueCache[]): OnnxKeyValueCache {
    const first = caches[0];
    if (!first) throw new Error('OnnxKeyValueCache.join: expected at least one cache, got none.');
    if (caches.length === 1) return first;
    const capacity = Math.max(...caches.map((cache) => cache.capacityValue));
    const rows = caches.reduce((sum, cache) => sum + cache.rows, 0);
    const out = new OnnxKeyValueCache(first.layers.length, rows, first.kvHeads, first.headDimension, capacity);
    out.length = first.length;
    for (const cache of caches) {
      if (cache.length !== first.length || cache.kvHeads !== first.kvHeads)
        throw new Error(
          `OnnxKeyValueCache.join: expected caches of ${first.length} positions, got one of ${cache.length}.`,
        );
      cache.resize(capacity);
    }
    const block = first.kvHeads * first.headDimension * capacity;
    for (let layer = 0; layer < first.layers.length; layer += 1) {
      const target = out.layers[layer] as LayerBuffers;
      let offset = 0;
      for (const cache of caches) {
        const source = cache.layers[layer] as LayerBuffers;
        target.keys.set(source.keys.subarray(0, cache.rows * block), offset);
        target.values.set(source.values.subarray(0, cache.rows * block), offset);
        offset += cache.rows * block;
      }
    }
    return out;
  }
}
