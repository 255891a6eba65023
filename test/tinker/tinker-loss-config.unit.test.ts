/**
 * A Tinker server's losses with their clip settings: `epsilon` / `epsilon_high` become `ppo`'s and
 * `cispo`'s `loss_fn_config` (`clip_low_threshold`, `clip_high_threshold`), and are refused with
 * the losses that have no clip.
 */
import { describe, expect, it } from 'vitest';
import { tinkerLossConfig } from '../../src/backends/tinker/training-jobs.js';

describe('tinkerLossConfig', () => {
  it('sends nothing when neither bound is set (the server keeps its defaults)', () => {
    expect(tinkerLossConfig('ppo', null)).toBeUndefined();
    expect(tinkerLossConfig('importance_sampling', { learning_rate: 1e-5 })).toBeUndefined();
  });

  it('ppo: [1 − epsilon, 1 + epsilon_high], epsilon_high defaulting to epsilon', () => {
    expect(tinkerLossConfig('ppo', { epsilon: 0.1 })).toEqual({ clip_low_threshold: 0.9, clip_high_threshold: 1.1 });
    expect(tinkerLossConfig('ppo', { epsilon: 0.2, epsilon_high: 0.28 })).toEqual({
      clip_low_threshold: 0.8,
      clip_high_threshold: 1.28,
    });
  });

  it('cispo: each bound only when given', () => {
    expect(tinkerLossConfig('cispo', { epsilon_high: 4 })).toEqual({ clip_high_threshold: 5 });
    expect(tinkerLossConfig('cispo', { epsilon: 1, epsilon_high: 4 })).toEqual({
      clip_low_threshold: 0,
      clip_high_threshold: 5,
    });
  });

  it('importance_sampling and dro have no clip: a bound fails the step, naming the key and the loss', () => {
    expect(() => tinkerLossConfig('importance_sampling', { epsilon: 0.2 })).toThrow(
      /experimental_config\.epsilon is a clip of the ppo and cispo losses; a Tinker server's importance_sampling loss has none/,
    );
    expect(() => tinkerLossConfig('dro', { epsilon_high: 0.2 })).toThrow(
      /experimental_config\.epsilon_high .* dro loss/,
    );
  });
});
