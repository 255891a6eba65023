/**
 * The service resolves the KL penalty's reference policy from `experimental_config` against a
 * model's checkpoints (src/server/kl-reference.ts) before handing the job to the engine.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { klReferenceOf } from '../../src/server/kl-reference.js';
import type { CheckpointRecord } from '../../src/server/store/index.js';

const dataDir = '/data';
const checkpoint = (step: number): CheckpointRecord => ({
  id: `c${step}`,
  model_id: 'm',
  step,
  metrics: {},
  path: `models/m/checkpoints/${step}`,
  created_at: '2026-11-29T00:00:00Z',
});
// Step 2 was pruned.
const checkpoints = [1, 3, 4, 5].map(checkpoint);
const at = (step: number) => ({ checkpointPath: path.resolve(dataDir, `models/m/checkpoints/${step}`) });

describe('klReferenceOf', () => {
  it('is undefined without a positive kl_penalty_coef, whatever else is set', () => {
    expect(klReferenceOf(null, checkpoints, 5, dataDir)).toBeUndefined();
    expect(klReferenceOf({ kl_penalty_coef: 0, kl_penalty_step_lag: 1 }, checkpoints, 5, dataDir)).toBeUndefined();
    expect(klReferenceOf({ kl_penalty_coef: null }, checkpoints, 5, dataDir)).toBeUndefined();
  });

  it('defaults to the base weights', () => {
    expect(klReferenceOf({ kl_penalty_coef: 0.1 }, checkpoints, 5, dataDir)).toEqual({ checkpointPath: null });
  });

  it('kl_penalty_reference_step: that checkpoint, 0 the base; a pruned or future step fails', () => {
    expect(klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_reference_step: 3 }, checkpoints, 5, dataDir)).toEqual(
      at(3),
    );
    expect(klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_reference_step: 0 }, checkpoints, 5, dataDir)).toEqual({
      checkpointPath: null,
    });
    expect(() =>
      klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_reference_step: 2 }, checkpoints, 5, dataDir),
    ).toThrow('kl_penalty_reference_step 2 has no checkpoint (deleted or pruned); the model keeps steps 1, 3, 4, 5.');
    expect(() =>
      klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_reference_step: 6 }, checkpoints, 5, dataDir),
    ).toThrow(/not a step of this model yet \(it is at step 5\)/);
  });

  it('kl_penalty_step_lag: max(0, current − lag), a pruned step falling back to the kept one before it', () => {
    expect(klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_step_lag: 1 }, checkpoints, 5, dataDir)).toEqual(at(4));
    expect(klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_step_lag: 3 }, checkpoints, 5, dataDir)).toEqual(at(1));
    expect(klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_step_lag: 0 }, checkpoints, 5, dataDir)).toEqual(at(5));
    expect(klReferenceOf({ kl_penalty_coef: 0.1, kl_penalty_step_lag: 9 }, checkpoints, 5, dataDir)).toEqual({
      checkpointPath: null,
    });
  });

  it('kl_ref_adapter_path: an existing folder; a missing one and two references fail', () => {
    const folder = mkdtempSync(path.join(os.tmpdir(), 'kl-ref-'));
    expect(klReferenceOf({ kl_penalty_coef: 0.1, kl_ref_adapter_path: folder }, checkpoints, 5, dataDir)).toEqual({
      checkpointPath: folder,
    });
    expect(() =>
      klReferenceOf({ kl_penalty_coef: 0.1, kl_ref_adapter_path: `${folder}/missing` }, checkpoints, 5, dataDir),
    ).toThrow(/kl_ref_adapter_path ".*missing" does not exist/);
    expect(() =>
      klReferenceOf(
        { kl_penalty_coef: 0.1, kl_penalty_reference_step: 1, kl_penalty_step_lag: 1 },
        checkpoints,
        5,
        dataDir,
      ),
    ).toThrow(/names the KL reference twice \(kl_penalty_reference_step and kl_penalty_step_lag\)/);
  });
});
