/**
 * How one optimizer step's sequences are split into forward passes: a pass holds at most
 * `LOGITS_PER_PASS` learned positions × vocabulary rows, so 16 Qwen3 rollouts (151,936 ids) of 28
 * learned tokens no longer go into one pass whose logits outgrow the wasm heap (the second RL job
 * of examples/qwen-agent.ts failed with "memory access out of bounds").
 */
import { describe, expect, it } from 'vitest';
import { LOGITS_PER_PASS, trainingPasses } from '../../src/engine/trainer.js';
import type { TrainingSequence } from '../../src/engine/training-data.js';

/** A sequence of `context` prompt tokens then `learned` learned ones. */
function sequence(context: number, learned: number, id: number): TrainingSequence {
  const length = context + learned;
  return {
    tokens: Array.from({ length }, () => id),
    mask: Array.from({ length }, (_, index) => (index >= context ? 1 : 0)),
    weights: Array.from({ length }, () => 1),
    oldLogprobs: Array.from({ length }, () => Number.NaN),
  };
}

const learnedIn = (pass: readonly TrainingSequence[]): number =>
  pass.reduce((sum, item) => sum + item.mask.slice(1).reduce((a, b) => a + b, 0), 0);

describe('training passes', () => {
  it("bound the learned positions' logits of a pass by the vocabulary", () => {
    const rollouts = Array.from({ length: 16 }, (_, index) => sequence(180, 28, index));
    const qwen3 = {
      vocabularySize: 151_936,
      scoresPerRow: (length: number) => 4 * length * length,
      tokensPerPass: 35_000,
    };
    const passes = trainingPasses(qwen3, rollouts);
    expect(passes.length).toBeGreaterThan(1);
    for (const pass of passes) expect(learnedIn(pass) * qwen3.vocabularySize).toBeLessThanOrEqual(LOGITS_PER_PASS);
    // Every sequence is in exactly one pass.
    expect(
      passes
        .flat()
        .map((item) => item.tokens[0])
        .sort((a, b) => (a as number) - (b as number)),
    ).toEqual(rollouts.map((_, index) => index));
  });

  it('keep a small vocabulary in one pass, and a sequence over the bound in a pass of its own', () => {
    const rollouts = Array.from({ length: 16 }, (_, index) => sequence(180, 28, index));
    expect(
      trainingPasses({ vocabularySize: 300, scoresPerRow: () => 1, tokensPerPass: 35_000 }, rollouts),
    ).toHaveLength(1);
    const long = [sequence(10, 200, 0), sequence(10, 200, 1)];
    const passes = trainingPasses({ vocabularySize: 151_936, scoresPerRow: () => 1, tokensPerPass: 35_000 }, long);
    expect(passes.map((pass) => pass.length)).toEqual([1, 1]);
  });
});
