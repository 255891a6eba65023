/** A small seeded pseudo-random generator, identical in every thread and platform. */

/**
 * A deterministic generator (splitmix32 seeding + mulberry32) of uniform numbers in [0, 1).
 * The same seed yields the same sequence, which makes initial weights and seeded sampling
 * reproducible.
 */
export class SeededRandom {
  private state: number;
  private spareNormal: number | null = null;

  /** @param seed any integer; non-integers are truncated. */
  constructor(seed: number) {
    let value = Math.trunc(seed) >>> 0;
    // splitmix32 scrambles small consecutive seeds into unrelated states.
    value = (value + 0x9e3779b9) >>> 0;
    value = Math.imul(value ^ (value >>> 16), 0x85ebca6b) >>> 0;
    value = Math.imul(value ^ (value >>> 13), 0xc2b2ae35) >>> 0;
    this.state = (value ^ (value >>> 16)) >>> 0;
  }

  /** A uniform number in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** A standard normal number (Box-Muller). */
  normal(): number {
    if (this.spareNormal !== null) {
      const spare = this.spareNormal;
      this.spareNormal = null;
      return spare;
    }
    const u = Math.max(this.next(), 1e-12);
    const v = this.next();
    const radius = Math.sqrt(-2 * Math.log(u));
    this.spareNormal = radius * Math.sin(2 * Math.PI * v);
    return radius * Math.cos(2 * Math.PI * v);
  }

  /** A 32-bit integer, for deriving further seeds. */
  int(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }
}
