/** Builds the engine's {@link PolicyRef} for a model at a step (base weights at step 0). */
import { resolve } from 'node:path';
import type { PolicyRef } from '../engine/types.js';
import type { CheckpointRecord, ModelRecord } from './store/index.js';

/**
 * The weights of `model` at `checkpoint`, or its base weights when there is no checkpoint.
 * Base weights share the base model's cache key, so every model at step 0 reuses one copy.
 */
export function policyRef(dataDir: string, model: ModelRecord, checkpoint: CheckpointRecord | undefined): PolicyRef {
  if (checkpoint === undefined) return { baseModel: model.base_model, checkpointPath: null, key: model.base_model };
  return {
    baseModel: model.base_model,
    checkpointPath: resolve(dataDir, checkpoint.path),
    key: `${model.id}:${checkpoint.step}`,
  };
}

/** The policy of a base model id. */
export function basePolicyRef(baseModel: string): PolicyRef {
  return { baseModel, checkpointPath: null, key: baseModel };
}
