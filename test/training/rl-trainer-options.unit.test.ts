/**
 * RLTrainer refuses every bad option with InvalidArgumentError naming it ("Expected `x` to be ...,
 * got ..."), in its constructor, before anything runs.
 */
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from 'policyloop/client';
import { PromptedModel } from '../../src/training/prompted-model.js';
import { RLTrainer } from '../../src/training/rl-trainer.js';
import { TrainableModel } from '../../src/training/trainable-model.js';
import type { RLTrainerOptions } from '../../src/training/rl-trainer.js';

const model = new TrainableModel({ project: 'options', name: 'm', baseModel: 'policyloop/tiny-chat' });
const good: RLTrainerOptions<string> = { model, scenarios: ['a'], rollout: async () => undefined, maxSteps: 3 };

/** What `new RLTrainer` throws for the good options with `bad` over them (undefined when it throws nothing). */
function refusal(bad: unknown): unknown {
  try {
    new RLTrainer({ ...good, ...(bad as object) } as RLTrainerOptions<string>);
  } catch (caught) {
    return caught;
  }
  return undefined;
}

describe('new RLTrainer', () => {
  it('accepts good options', () => {
    expect(new RLTrainer(good).model).toBe(model);
  });

  it('takes a TrainableModel, which is a PromptedModel that trains', () => {
    expect(model).toBeInstanceOf(PromptedModel);
    expect(() => model.inferenceName()).toThrow(/register the model first/);
  });

  it.each([
    [{ model: {} }, 'model'],
    [{ scenarios: [] }, 'scenarios'],
    [{ scenarios: 42 }, 'scenarios'],
    [{ rollout: 'fn' }, 'rollout'],
    [{ maxSteps: undefined }, 'maxSteps'],
    [{ maxSteps: 1.5 }, 'maxSteps'],
    [{ groupSize: 0 }, 'groupSize'],
    [{ groupsPerStep: -1 }, 'groupsPerStep'],
    [{ maxStepsOffPolicy: -1 }, 'maxStepsOffPolicy'],
    [{ collapseAfter: 0 }, 'collapseAfter'],
    [{ validation: { scenarios: [] } }, 'validation.scenarios'],
    [{ validation: { scenarios: ['a'], every: 0 } }, 'validation.every'],
    [{ validation: { scenarios: ['a'], baselines: [{}] } }, 'validation.baselines[0]'],
    // A trained model is a PromptedModel too, but not a baseline: its requests are the ones routed.
    [{ validation: { scenarios: ['a'], baselines: [model] } }, 'validation.baselines[0]'],
    [{ keep: { direction: 'up' } }, 'keep.direction'],
    [{ keep: { metric: '' } }, 'keep.metric'],
    [{ budget: { seconds: 0 } }, 'budget.seconds'],
    [{ budget: { tokens: 0.5 } }, 'budget.tokens'],
    [{ progress: 'yes' }, 'progress'],
    [{ minGroupSize: 0 }, 'minGroupSize'],
    [{ groupSize: 4, minGroupSize: 5 }, 'minGroupSize'],
    [{ learningRate: 0 }, 'learningRate'],
    [{ learningRate: 'fast' }, 'learningRate'],
  ])('%o names `%s`', (bad, argument) => {
    const error = refusal(bad);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe(argument);
    expect((error as Error).message).toMatch(/^Expected `[^`]+` to be .+, got .+$/);
  });

  it.each([
    [{ maxStep: 3 }, 'maxStep', 'Unknown option `maxStep`; did you mean `maxSteps`?'],
    [{ groupsize: 4 }, 'groupsize', 'Unknown option `groupsize`; did you mean `groupSize`?'],
    [
      { keep: { best: true, metrc: 'val/reward' } },
      'keep.metrc',
      'Unknown option `keep.metrc`; did you mean `keep.metric`?',
    ],
    [
      { train: { learningrate: 1e-5 } },
      'train.learningrate',
      'Unknown option `train.learningrate`; did you mean `train.learningRate`?',
    ],
    [{ job: { timeout: 1_000, signal: AbortSignal.timeout(1) } }, 'job.signal', 'Unknown option `job.signal`'],
    [{ scenarious: ['a'] }, 'scenarious', 'Unknown option `scenarious`; did you mean `scenarios`?'],
  ])('a misspelt or misplaced option %o is refused, naming the nearest known one', (bad, argument, message) => {
    const error = refusal(bad);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe(argument);
    expect((error as Error).message).toBe(message);
  });
});
