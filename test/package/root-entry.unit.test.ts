/**
 * The root entry `policyloop` is what a training script imports, within a budget of names (values
 * and types, counted by the TypeScript compiler; docs/architecture.md, "The root entry", says why):
 * every error class a script may catch is there, the wire schemas other than `Trajectory` and
 * `TrajectoryGroup` are not (they are in `policyloop/schema`), and neither are the building blocks
 * and the option, result and event types (they are in `policyloop/training`).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as client from 'policyloop/client';
import * as root from 'policyloop';
import * as internalErrors from '../../src/internal/errors.js';
import * as rewards from '../../src/rewards/reward-errors.js';
import * as rollout from '../../src/rollout/rollout-errors.js';
import * as schema from 'policyloop/schema';
import * as training from '../../src/training/errors.js';
import * as environments from '../../src/environments/environment-errors.js';
import { exportedNames } from './support/exports.js';

/** At most this many names (values and types) in the root entry; docs/architecture.md says why. */
const ROOT_BUDGET = 91;

const rootExports = root as Record<string, unknown>;
const names = exportedNames();

function errorClasses(module: object): Array<[string, unknown]> {
  return Object.entries(module).filter(([, value]) => typeof value === 'function' && value.prototype instanceof Error);
}

describe('the root entry', () => {
  it(`exports at most ${ROOT_BUDGET} names, values and types counted`, () => {
    const rootNames = names.get('policyloop') ?? [];
    // The count is real: it sees every runtime value, and type-only names besides.
    expect(rootNames).toEqual(expect.arrayContaining(Object.keys(root)));
    expect(rootNames).toContain('RewardFn');
    expect(rootNames.length).toBeGreaterThan(Object.keys(root).length);
    expect(rootNames.length).toBeLessThanOrEqual(ROOT_BUDGET);
  });

  it('exports every error class of the parts a script uses (the same classes)', () => {
    const parts = { client, internalErrors, rewards, rollout, training, environments };
    const classes = Object.values(parts).flatMap(errorClasses);
    expect(classes.length).toBeGreaterThan(20);
    for (const [name, value] of classes) expect(rootExports[name], name).toBe(value);
  });

  it('exports the training data schemas and no other wire schema', () => {
    const schemas = Object.entries(root)
      .filter(([, value]) => value instanceof z.ZodType)
      .map(([name]) => name);
    expect(schemas.sort()).toEqual(['Trajectory', 'TrajectoryGroup']);
    expect(root.Trajectory).toBe(schema.Trajectory);
  });

  it('leaves out the raw client and the building blocks', () => {
    const elsewhere = ['TrainingClient', 'Page', 'ModelCreate', 'Uuid', 'page', 'computeStepMetrics', 'messageOf'];
    const internals = ['appendHistoryRow', 'planRetention', 'formatProgress', 'modelFiles', 'StreamAccumulator'];
    for (const name of [...elsewhere, ...internals]) expect(rootExports, name).not.toHaveProperty(name);
    expect(client.TrainingClient).toBeTypeOf('function');
  });

  it('names each thing in one entry: policyloop/training repeats nothing of the root', () => {
    const rootNames = new Set(names.get('policyloop'));
    const trainingNames = names.get('policyloop/training') ?? [];
    expect(trainingNames).toEqual(expect.arrayContaining(['LogBatcher', 'TrainableModelOptions', 'StepEndEvent']));
    expect(trainingNames.filter((name) => rootNames.has(name))).toEqual([]);
  });
});
