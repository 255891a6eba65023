/**
 * Inference model names: a base model id, or a trained model as
 * `wandb-artifact:///<entity>/<project>/<name>` (newest checkpoint) or `...:step<N>` (pinned step).
 * The shorter `<entity>/<project>/<name>`, `<project>/<name>` and `<name>` forms are accepted too
 * when they name exactly one model.
 */
import type { PolicyRef } from '../engine/types.js';
import { HttpError } from './http-error.js';
import { basePolicyRef, policyRef } from './policy-refs.js';
import type { ModelRecord, Store } from './store/index.js';

/** Prefix of trained model names. */
export const ARTIFACT_PREFIX = 'wandb-artifact:///';

/** The canonical inference name of a model, optionally pinned to a step. */
export function inferenceName(model: ModelRecord, step?: number): string {
  const name = `${ARTIFACT_PREFIX}${model.entity}/${model.project}/${model.name}`;
  return step === undefined ? name : `${name}:step${step}`;
}

/** What a name resolves to. */
export interface ResolvedInferenceModel {
  readonly policy: PolicyRef;
  /** The trained model, or undefined for a base model. */
  readonly model: ModelRecord | undefined;
  /** The step whose weights these are: the checkpoint's, 0 for base weights. */
  readonly step: number;
}

/** Resolves `name` to the weights to sample from, or throws a 404 that says what exists. */
export function resolveInferenceModel(
  name: string,
  context: {
    readonly store: Store;
    readonly baseModels: readonly string[];
    readonly dataDir: string;
    readonly defaultEntity: string;
  },
): ResolvedInferenceModel {
  const { store, baseModels, dataDir, defaultEntity } = context;
  if (baseModels.includes(name)) return { policy: basePolicyRef(name), model: undefined, step: 0 };

  const pinned = /^(.*):step(\d+)$/.exec(name);
  const bare = pinned === null ? name : (pinned[1] as string);
  const step = pinned === null ? undefined : Number(pinned[2]);
  const model = findModel(store, bare, defaultEntity);
  if (model === undefined) {
    if (baseModels.includes(bare))
      throw new HttpError(404, `Base model ${bare} has no steps; call it as ${JSON.stringify(bare)}`);
    throw new HttpError(
      404,
      `Model ${JSON.stringify(name)} not found: expected a base model (${baseModels.join(', ')}) or ${ARTIFACT_PREFIX}<entity>/<project>/<name>[:step<N>] of a registered model`,
    );
  }
  if (step === undefined) {
    const newest = store.checkpoints.newest(model.id);
    return { policy: policyRef(dataDir, model, newest), model, step: newest?.step ?? 0 };
  }
  if (step === 0) return { policy: policyRef(dataDir, model, undefined), model, step: 0 };
  const checkpoint = store.checkpoints.get(model.id, step);
  if (checkpoint === undefined) {
    const steps = [0, ...store.checkpoints.all(model.id).map((existing) => existing.step)];
    // The step as written (a long one would print as 1e+23).
    throw new HttpError(
      404,
      `Model ${inferenceName(model)} has no checkpoint at step ${pinned?.[2] ?? step}; available steps: ${steps.join(', ')}`,
    );
  }
  return { policy: policyRef(dataDir, model, checkpoint), model, step };
}

function findModel(store: Store, name: string, defaultEntity: string): ModelRecord | undefined {
  const path = name.startsWith(ARTIFACT_PREFIX) ? name.slice(ARTIFACT_PREFIX.length) : name;
  const parts = path.split('/');
  if (parts.some((part) => part === '')) return undefined;
  if (parts.length === 3) return store.models.find(parts[0] as string, parts[1] as string, parts[2] as string);
  if (name.startsWith(ARTIFACT_PREFIX)) return undefined;
  if (parts.length === 2) {
    const inDefault = store.models.find(defaultEntity, parts[0] as string, parts[1] as string);
    if (inDefault !== undefined) return inDefault;
    return only(store.models.findByProjectAndName(parts[0] as string, parts[1] as string));
  }
  if (parts.length === 1) return only(store.models.findByName(parts[0] as string));
  return undefined;
}

function only(models: readonly ModelRecord[]): ModelRecord | undefined {
  return models.length === 1 ? models[0] : undefined;
}
