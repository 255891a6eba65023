/**
 * pass@k and pass^k against values computed by hand from the binomials (c = 0, c = n, k = n,
 * k = 1, middle cases, a large n where factorials would overflow), and their mean over tasks.
 */
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from 'policyloop';
import { passAllK, passAtK, passKValues } from 'policyloop/training';
import { summarizePassAtK } from '../../src/environments/pass-at-k.js';

describe('passAtK and passAllK of one task', () => {
  it('are 0 when no sample is correct (c = 0), for every k', () => {
    for (const k of [1, 2, 5]) {
      expect(passAtK(5, 0, k)).toBe(0);
      expect(passAllK(5, 0, k)).toBe(0);
    }
  });

  it('are 1 when every sample is correct (c = n), for every k', () => {
    for (const k of [1, 3, 5]) {
      expect(passAtK(5, 5, k)).toBe(1);
      expect(passAllK(5, 5, k)).toBe(1);
    }
  });

  it('at k = n: pass@n is 1 with any correct sample, pass^n only when all are', () => {
    expect(passAtK(4, 1, 4)).toBe(1);
    expect(passAtK(4, 0, 4)).toBe(0);
    expect(passAllK(4, 3, 4)).toBe(0);
    expect(passAllK(4, 4, 4)).toBe(1);
  });

  it('at k = 1 both are c / n', () => {
    expect(passAtK(8, 3, 1)).toBeCloseTo(3 / 8, 12);
    expect(passAllK(8, 3, 1)).toBeCloseTo(3 / 8, 12);
  });

  it('match the binomials in middle cases', () => {
    // 1 - C(3,2)/C(4,2) = 1 - 3/6
    expect(passAtK(4, 1, 2)).toBeCloseTo(0.5, 12);
    // C(3,2)/C(4,2) = 3/6
    expect(passAllK(4, 3, 2)).toBeCloseTo(0.5, 12);
    // 1 - C(3,2)/C(5,2) = 1 - 3/10; C(2,2)/C(5,2) = 1/10
    expect(passAtK(5, 2, 2)).toBeCloseTo(0.7, 12);
    expect(passAllK(5, 2, 2)).toBeCloseTo(0.1, 12);
    // 1 - C(5,4)/C(8,4) = 1 - 5/70; C(3,4) = 0; C(5,4)/C(8,4) = 5/70
    expect(passAtK(8, 3, 4)).toBeCloseTo(65 / 70, 12);
    expect(passAllK(8, 3, 4)).toBe(0);
    expect(passAllK(8, 5, 4)).toBeCloseTo(5 / 70, 12);
  });

  it('stay exact for a large n (C(1000, 500) overflows as factorials)', () => {
    // C(999,500)/C(1000,500) = 500/1000
    expect(passAtK(1000, 1, 500)).toBeCloseTo(0.5, 9);
    expect(passAllK(1000, 999, 500)).toBeCloseTo(0.5, 9);
    expect(Number.isFinite(passAtK(100_000, 7, 4096))).toBe(true);
  });

  it('refuse counts out of range, naming them', () => {
    expect(() => passAtK(4, 5, 1)).toThrow(InvalidArgumentError);
    expect(() => passAtK(4, 1, 5)).toThrow(/`k` an integer between 1 and n \(4\), got 5/);
    expect(() => passAllK(0, 0, 1)).toThrow(/`n` an integer >= 1/);
    expect(() => passAllK(4, 1, 0)).toThrow(InvalidArgumentError);
  });
});

describe('passKValues', () => {
  it('are the powers of two up to r (r itself only when a power of two)', () => {
    expect(passKValues(1)).toEqual([1]);
    expect(passKValues(6)).toEqual([1, 2, 4]);
    expect(passKValues(8)).toEqual([1, 2, 4, 8]);
  });
});

describe('summarizePassAtK', () => {
  it('averages each k over the tasks, keyed by k as a string', () => {
    // k=1: (1/2 + 1)/2; k=2: pass@2 (1 + 1)/2, pass^2 (0 + 1)/2
    expect(
      summarizePassAtK(
        [
          { n: 2, c: 1 },
          { n: 2, c: 2 },
        ],
        2,
      ),
    ).toEqual({
      passAtK: { '1': 0.75, '2': 1 },
      passAllK: { '1': 0.75, '2': 0.5 },
    });
  });

  it('over three tasks of four samples', () => {
    const summary = summarizePassAtK(
      [
        { n: 4, c: 0 },
        { n: 4, c: 1 },
        { n: 4, c: 3 },
      ],
      4,
    );
    // k=2: pass@2 = (0 + 1/2 + 1)/3, pass^2 = (0 + 0 + 1/2)/3
    expect(summary.passAtK['2']).toBeCloseTo(0.5, 12);
    expect(summary.passAllK['2']).toBeCloseTo(1 / 6, 12);
    // k=4: pass@4 = (0 + 1 + 1)/3, pass^4 = 0
    expect(summary.passAtK['4']).toBeCloseTo(2 / 3, 12);
    expect(summary.passAllK['4']).toBe(0);
    expect(Object.keys(summary.passAtK)).toEqual(['1', '2', '4']);
  });

  it('is empty without tasks', () => {
    expect(summarizePassAtK([], 4)).toEqual({ passAtK: {}, passAllK: {} });
  });
});
