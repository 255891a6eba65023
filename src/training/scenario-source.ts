/**
 * The scenarios of an RL run, read in order: an array cycled from an offset (a rerun resumes at
 * its step's scenarios), or an (async) iterable once.
 */
export class ScenarioSource<S> {
  private readonly array: readonly S[] | undefined;
  private iterator: Iterator<S> | AsyncIterator<S> | undefined;
  private offset: number;
  private done = false;

  /** Reads `scenarios`, an array from `offset` (wrapped), an iterable from where it is. */
  constructor(scenarios: readonly S[] | Iterable<S> | AsyncIterable<S>, offset: number) {
    this.offset = offset;
    if (Array.isArray(scenarios)) this.array = scenarios as readonly S[];
    else if (Symbol.asyncIterator in (scenarios as object)) {
      this.iterator = (scenarios as AsyncIterable<S>)[Symbol.asyncIterator]();
    } else this.iterator = (scenarios as Iterable<S>)[Symbol.iterator]();
  }

  /** Up to `count` next scenarios (fewer, or none, once an iterable is exhausted). */
  async take(count: number): Promise<S[]> {
    if (this.array !== undefined) {
      const array = this.array;
      const taken = Array.from({ length: count }, (_unused, index) => array[(this.offset + index) % array.length] as S);
      this.offset = (this.offset + count) % array.length;
      return taken;
    }
    const taken: S[] = [];
    while (!this.done && taken.length < count && this.iterator !== undefined) {
      const next = await this.iterator.next();
      if (next.done === true) this.done = true;
      else taken.push(next.value);
    }
    return taken;
  }
}
