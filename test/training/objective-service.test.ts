/**
 * The objective's parameters through the real local service and engine (`LocalBackend`): the
 * service resolves the KL reference (`klPenaltyReferenceStep`, `klPenaltyStepLag`) against the
 * model's checkpoints, and the step's metrics show each key where it acts (`train/kl_ref`,
 * `train/sequence_importance_ratio`); a reference the model does not have fails the job, saying so.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalBackend, TrainableModel } from 'policyloop';
import { checksumGroups } from './support/checksum-groups.js';

let dataDir: string;
let backend: LocalBackend;
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-objective-'));
  backend = await LocalBackend.start({ dataDir });
});
afterAll(async () => {
  await backend?.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe('the objective through the local service', () => {
  it('resolves the KL reference step against the checkpoints and reports kl_ref and the sequence ratios', async () => {
    const model = await new TrainableModel({
      project: 'objective',
      name: 'kl',
      baseModel: 'policyloop/tiny-chat',
    }).register(backend);
    const first = await model.train(await checksumGroups(model), { learningRate: 0.05 });
    expect(first.metrics['train/kl_ref']).toBeUndefined();
    // Against step 1 (the policy itself): 0. Against the base (step 0): not 0.
    const itself = await model.train(await checksumGroups(model), {
      klPenaltyCoef: 0.2,
      klPenaltyReferenceStep: 1,
      importanceSamplingLevel: 'sequence',
      learningRate: 1e-9,
    });
    expect(Math.abs(itself.metrics['train/kl_ref'] as number)).toBeLessThan(1e-5);
    expect(itself.metrics['train/sequence_importance_ratio']).toBeCloseTo(1, 4);
    const lagged = await model.train(await checksumGroups(model), { klPenaltyCoef: 0.2, klPenaltyStepLag: 2 });
    expect(Math.abs(lagged.metrics['train/kl_ref'] as number)).toBeGreaterThan(1e-4); // step 0: the base
    await expect(
      model.train(await checksumGroups(model), { klPenaltyCoef: 0.2, klPenaltyReferenceStep: 9 }),
    ).rejects.toThrow(/kl_penalty_reference_step 9 is not a step of this model yet \(it is at step 3\)/);
    expect(await model.getStep()).toBe(3);
  });
});
