/** Learning-rate schedules: the values each helper gives, and the checks on what a schedule returns. */
import { describe, expect, it } from 'vitest';
import {
  constantLearningRate,
  cosineDecay,
  InvalidArgumentError,
  linearDecay,
  PolicyloopError,
  withWarmup,
} from 'policyloop';
import { learningRateAt } from '../../src/training/schedules.js';

const run = { maxSteps: 10 };

describe('learning-rate schedules', () => {
  it('constant, linear and cosine decay give the documented values', () => {
    expect(constantLearningRate(3e-3)(7, run)).toBe(3e-3);
    const linear = linearDecay({ initial: 1e-3, final: 1e-4 });
    expect([0, 5, 10, 20].map((step) => linear(step, run))).toEqual([1e-3, 5.5e-4, 1e-4, 1e-4]);
    const cosine = cosineDecay({ initial: 1e-3, final: 0, steps: 4 });
    expect(cosine(0, run)).toBeCloseTo(1e-3, 15);
    expect(cosine(2, run)).toBeCloseTo(5e-4, 15);
    // A final rate of 0 is held at 1 % of the initial one: a job needs a positive rate.
    expect(cosine(4, run)).toBeCloseTo(1e-5, 15);
    // The default final rate is a tenth of the initial one, reached at maxSteps.
    expect(linearDecay({ initial: 2e-3 })(10, run)).toBeCloseTo(2e-4, 15);
  });

  it('warm-up ramps linearly to the schedule it wraps, from the step it starts at', () => {
    const schedule = withWarmup(3, 4e-3, { from: 2 });
    expect([0, 2, 3, 4, 5, 9].map((step) => schedule(step, run))).toEqual([4e-3, 1e-3, 2e-3, 3e-3, 4e-3, 4e-3]);
    const decaying = withWarmup(1, linearDecay({ initial: 1e-3, final: 1e-3 }));
    expect(decaying(0, run)).toBe(5e-4);
  });

  it('refuses bad options when made, and a schedule that returns a bad rate when used', () => {
    expect(() => linearDecay({ initial: 0 })).toThrow(InvalidArgumentError);
    expect(() => constantLearningRate(-1)).toThrow(InvalidArgumentError);
    expect(() => linearDecay({ initial: 0 })).toThrow('Expected `linearDecay.initial` to be a positive number, got 0');
    expect(() => cosineDecay({ initial: 1e-3, stpes: 10 } as never)).toThrow(
      'Unknown option `cosineDecay.stpes`; did you mean `cosineDecay.steps`?',
    );
    expect(() => withWarmup(5, 1e-3, { form: 2 } as never)).toThrow('Unknown option `form`; did you mean `from`?');
    expect(() => learningRateAt(() => Number.NaN, 3, run)).toThrow(
      new PolicyloopError('Expected the learning-rate schedule to return a positive number at step 3, got NaN'),
    );
    expect(() =>
      learningRateAt(
        () => {
          throw new Error('boom');
        },
        1,
        run,
      ),
    ).toThrow('The learning-rate schedule threw at step 1: boom');
    expect(learningRateAt(2e-3, 1, run)).toBe(2e-3);
  });
});
