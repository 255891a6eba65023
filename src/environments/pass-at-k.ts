/**
 * pass@k and pass^k of an evaluation, with the unbiased estimators of Chen et al. (2021) that
 * verifiers and tinker-cookbook use: of `n` samples of a task, `c` correct,
 * pass@k = 1 - C(n-c, k) / C(n, k) (at least one of k drawn samples is correct) and
 * pass^k = C(c, k) / C(n, k) (all k drawn samples are correct). The ratios of binomials are
 * computed as products of k fractions, never as factorials, so they stay exact enough for any n.
 */
import { InvalidArgumentError } from '../internal/errors.js';

/** Checks that `n`, `c` and `k` are integers with 0 <= c <= n and 1 <= k <= n. */
function checkCounts(n: number, c: number, k: number): void {
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('n', `Expected \`n\` an integer >= 1, got ${n}`);
  if (!Number.isInteger(c) || c < 0 || c > n) {
    throw new InvalidArgumentError('c', `Expected \`c\` an integer between 0 and n (${n}), got ${c}`);
  }
  if (!Number.isInteger(k) || k < 1 || k > n) {
    throw new InvalidArgumentError('k', `Expected \`k\` an integer between 1 and n (${n}), got ${k}`);
  }
}

/** C(m, k) / C(n, k) for m <= n, as the product of (m - i) / (n - i) for i < k (0 when m < k). */
function binomialRatio(m: number, n: number, k: number): number {
  if (m < k) return 0;
  let ratio = 1;
  for (let i = 0; i < k; i += 1) ratio *= (m - i) / (n - i);
  return ratio;
}

/**
 * The unbiased pass@k of one task: the chance that at least one of `k` samples drawn without
 * replacement from `n`, of which `c` are correct, is correct: 1 - C(n-c, k) / C(n, k).
 * @throws {InvalidArgumentError} unless 0 <= c <= n and 1 <= k <= n (integers).
 * @example
 * passAtK(4, 1, 2); // 0.5: 1 - C(3,2)/C(4,2) = 1 - 3/6
 */
export function passAtK(n: number, c: number, k: number): number {
  checkCounts(n, c, k);
  return 1 - binomialRatio(n - c, n, k);
}

/**
 * The unbiased pass^k ("pass all k") of one task: the chance that all `k` samples drawn without
 * replacement from `n`, of which `c` are correct, are correct: C(c, k) / C(n, k).
 * @throws {InvalidArgumentError} unless 0 <= c <= n and 1 <= k <= n (integers).
 * @example
 * passAllK(4, 3, 2); // 0.5: C(3,2)/C(4,2) = 3/6
 */
export function passAllK(n: number, c: number, k: number): number {
  checkCounts(n, c, k);
  return binomialRatio(c, n, k);
}

/**
 * The k an evaluation reports for `rolloutsPerExample` samples of each task: the powers of two
 * up to it (1, 2, 4, ...), as verifiers does; `r` itself only when it is a power of two.
 * @example
 * passKValues(6); // [1, 2, 4]
 */
export function passKValues(rolloutsPerExample: number): number[] {
  const values: number[] = [];
  for (let k = 1; k <= rolloutsPerExample; k *= 2) values.push(k);
  return values;
}

/** pass@k and pass^k of an evaluation, keyed by k as a string ("1", "2", "4"). */
export interface PassAtKSummary {
  /** The mean over tasks of each task's pass@k. */
  readonly passAtK: Record<string, number>;
  /** The mean over tasks of each task's pass^k. */
  readonly passAllK: Record<string, number>;
}

/**
 * pass@k and pass^k averaged over tasks, for each k of {@link passKValues}: each task given as
 * its number of samples `n` (the rollouts per example) and of correct ones `c` (an error counts as
 * not correct). Tasks with fewer than k samples are left out of that k's mean; a k no task has is
 * left out.
 * @example
 * summarizePassAtK([{ n: 2, c: 1 }, { n: 2, c: 2 }], 2);
 * // { passAtK: { '1': 0.75, '2': 1 }, passAllK: { '1': 0.75, '2': 0.5 } }
 */
export function summarizePassAtK(
  tasks: readonly { readonly n: number; readonly c: number }[],
  rolloutsPerExample: number,
): PassAtKSummary {
  const passAt: Record<string, number> = {};
  const passAll: Record<string, number> = {};
  for (const k of passKValues(rolloutsPerExample)) {
    const counted = tasks.filter((task) => task.n >= k);
    if (counted.length === 0) continue;
    let sumAt = 0;
    let sumAll = 0;
    for (const { n, c } of counted) {
      sumAt += passAtK(n, c, k);
      sumAll += passAllK(n, c, k);
    }
    passAt[String(k)] = sumAt / counted.length;
    passAll[String(k)] = sumAll / counted.length;
  }
  return { passAtK: passAt, passAllK: passAll };
}
