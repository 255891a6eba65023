/**
 * The root entry `policyloop` is what a user script imports: every error class a script may catch
 * is there, the wire schemas other than `Trajectory` and `TrajectoryGroup` are not (they are in
 * `policyloop/schema`), and neither are the building blocks the library uses internally.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as client from '../../src/client/index.js';
import * as root from '../../src/index.js';
import * as internalErrors from '../../src/internal/errors.js';
import * as rewards from '../../src/rewards/reward-errors.js';
import * as rollout from '../../src/rollout/rollout-errors.js';
import * as schema from '../../src/schema/index.js';
import * as training from '../../src/training/errors.js';

const rootExports = root as Record<string, unknown>;

function errorClasses(module: object): Array<[string, unknown]> {
  return Object.entries(module).filter(([, value]) => typeof value === 'function' && value.prototype instanceof Error);
}

describe('the root entry', () => {
  it('exports every error class of the parts a script uses (the same classes)', () => {
    const parts = { client, internalErrors, rewards, rollout, training };
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
});
