/**
 * Parameter names, shapes and the deterministic initialisation of a model's weights, plus the
 * checkpoint files written per training job.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ModelConfig } from './model-config.js';
import { SeededRandom } from './random.js';
import { readSafetensors, writeSafetensors } from './safetensors.js';
import type { HostTensor } from './safetensors.js';

/** Weights of a model by parameter name, in host memory. */
export type HostWeights = Map<string, HostTensor>;

/** File of the weights inside a checkpoint directory. */
export const WEIGHTS_FILE = 'model.safetensors';
/** File of the AdamW moments inside a checkpoint directory (lets the next job continue them). */
export const OPTIMIZER_FILE = 'optimizer.safetensors';
/** File of the checkpoint's metadata. */
export const METADATA_FILE = 'metadata.json';

interface ParameterSpec {
  readonly name: string;
  readonly shape: readonly number[];
  /** Standard deviation of the normal init, or a constant fill when `fill` is set. */
  readonly std: number;
  readonly fill?: number | undefined;
}

/** The parameters of a model, in a fixed order (the order of initialisation). */
export function parameterSpecs(config: ModelConfig): ParameterSpec[] {
  const d = config.modelDimension;
  const f = config.feedForwardDimension;
  const residualStd = 0.02 / Math.sqrt(2 * config.layerCount);
  const specs: ParameterSpec[] = [
    { name: 'token_embedding', shape: [config.vocabularySize, d], std: 0.1 },
    { name: 'position_embedding', shape: [config.contextLength, d], std: 0.1 },
  ];
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    const prefix = `layers.${layer}`;
    specs.push(
      { name: `${prefix}.attention_norm.scale`, shape: [d], std: 0, fill: 1 },
      { name: `${prefix}.attention_norm.bias`, shape: [d], std: 0, fill: 0 },
      { name: `${prefix}.attention.qkv`, shape: [d, 3 * d], std: 1 / Math.sqrt(d) },
      { name: `${prefix}.attention.output`, shape: [d, d], std: residualStd * 5 },
      { name: `${prefix}.mlp_norm.scale`, shape: [d], std: 0, fill: 1 },
      { name: `${prefix}.mlp_norm.bias`, shape: [d], std: 0, fill: 0 },
      { name: `${prefix}.mlp.up`, shape: [d, f], std: 1 / Math.sqrt(d) },
      { name: `${prefix}.mlp.up_bias`, shape: [f], std: 0, fill: 0 },
      { name: `${prefix}.mlp.down`, shape: [f, d], std: residualStd * 5 },
      { name: `${prefix}.mlp.down_bias`, shape: [d], std: 0, fill: 0 },
    );
  }
  specs.push(
    { name: 'final_norm.scale', shape: [d], std: 0, fill: 1 },
    { name: 'final_norm.bias', shape: [d], std: 0, fill: 0 },
    // Small output weights: the fresh model's next-token distribution is close to uniform.
    { name: 'output', shape: [d, config.vocabularySize], std: 0.02 },
    { name: 'output_bias', shape: [config.vocabularySize], std: 0, fill: 0 },
  );
  return specs;
}

/** Number of trainable parameters of a model. */
export function parameterCount(config: ModelConfig): number {
  return parameterSpecs(config).reduce((sum, spec) => sum + spec.shape.reduce((a, b) => a * b, 1), 0);
}

/** The base weights of a model: deterministic in its config and seed. */
export function initialWeights(config: ModelConfig): HostWeights {
  const random = new SeededRandom(config.seed);
  const weights: HostWeights = new Map();
  for (const spec of parameterSpecs(config)) {
    const size = spec.shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(size);
    if (spec.fill !== undefined) data.fill(spec.fill);
    else for (let index = 0; index < size; index += 1) data[index] = random.normal() * spec.std;
    weights.set(spec.name, { shape: spec.shape, data });
  }
  return weights;
}

/** Checks that weights match a model's parameters, naming the first mismatch. */
export function checkWeights(config: ModelConfig, weights: HostWeights, source: string): void {
  for (const spec of parameterSpecs(config)) {
    const tensor = weights.get(spec.name);
    if (!tensor) throw new Error(`Checkpoint ${source} lacks tensor ${spec.name} of base model ${config.id}.`);
    if (tensor.shape.join(',') !== spec.shape.join(',')) {
      throw new Error(
        `Checkpoint ${source}: tensor ${spec.name} has shape [${tensor.shape.join(', ')}], expected [${spec.shape.join(', ')}] for ${config.id}.`,
      );
    }
  }
}

/** What `metadata.json` of a checkpoint holds. */
export interface CheckpointMetadata {
  readonly format: 'policyloop-checkpoint';
  readonly base_model: string;
  readonly step: number;
  readonly kind: 'rl' | 'sft';
  readonly training_config: unknown;
  readonly optimizer_steps: number;
  readonly metrics: Record<string, number>;
  readonly created_at: string;
}

/** The AdamW state carried from job to job. */
export interface OptimizerState {
  readonly step: number;
  readonly firstMoments: HostWeights;
  readonly secondMoments: HostWeights;
}

/**
 * Writes a checkpoint directory: `model.safetensors`, `optimizer.safetensors`, `metadata.json`.
 * Files are written under temporary names and renamed, so a reader never sees half a file.
 */
export async function writeCheckpoint(
  directory: string,
  weights: HostWeights,
  optimizer: OptimizerState | null,
  metadata: CheckpointMetadata,
): Promise<void> {
  await mkdir(directory, { recursive: true });
  const weightsPath = path.join(directory, WEIGHTS_FILE);
  await writeSafetensors(`${weightsPath}.tmp`, weights, {
    format: 'pt',
    base_model: metadata.base_model,
    step: String(metadata.step),
  });
  await rename(`${weightsPath}.tmp`, weightsPath);
  if (optimizer) await writeOptimizerFile(path.join(directory, OPTIMIZER_FILE), optimizer);
  const metadataPath = path.join(directory, METADATA_FILE);
  await writeFile(`${metadataPath}.tmp`, `${JSON.stringify(metadata, null, 2)}\n`);
  await rename(`${metadataPath}.tmp`, metadataPath);
}

/**
 * Writes AdamW moments as `m.<name>` and `v.<name>` with the step as `adam_step` (built-in
 * checkpoints and LoRA adapters alike), under a temporary name then renamed.
 */
export async function writeOptimizerFile(file: string, optimizer: OptimizerState): Promise<void> {
  const moments: HostWeights = new Map();
  for (const [name, tensor] of optimizer.firstMoments) moments.set(`m.${name}`, tensor);
  for (const [name, tensor] of optimizer.secondMoments) moments.set(`v.${name}`, tensor);
  await writeSafetensors(`${file}.tmp`, moments, { adam_step: String(optimizer.step) });
  await rename(`${file}.tmp`, file);
}

/** Reads a checkpoint's weights, checked against the model's parameters. */
export async function readCheckpointWeights(config: ModelConfig, directory: string): Promise<HostWeights> {
  const { tensors } = await readSafetensors(path.join(directory, WEIGHTS_FILE));
  checkWeights(config, tensors, directory);
  return tensors;
}

/** Reads a checkpoint's AdamW state, or null when it has none (or it does not fit). */
export async function readOptimizerState(config: ModelConfig, directory: string): Promise<OptimizerState | null> {
  return readOptimizerFile(
    path.join(directory, OPTIMIZER_FILE),
    parameterSpecs(config).map((spec) => ({ name: spec.name })),
  );
}

/**
 * Reads the AdamW moments `m.<name>` and `v.<name>` of each expected weight from an optimizer
 * file (built-in checkpoints and LoRA adapters alike), or null when the file cannot be read or a
 * moment is missing or, where a `length` is given, its first moment has another size.
 */
export async function readOptimizerFile(
  file: string,
  expected: readonly { readonly name: string; readonly length?: number | undefined }[],
): Promise<OptimizerState | null> {
  let contents;
  try {
    contents = await readSafetensors(file);
  } catch {
    return null;
  }
  const firstMoments: HostWeights = new Map();
  const secondMoments: HostWeights = new Map();
  for (const { name, length } of expected) {
    const m = contents.tensors.get(`m.${name}`);
    const v = contents.tensors.get(`v.${name}`);
    if (!m || !v || (length !== undefined && m.data.length !== length)) return null;
    firstMoments.set(name, m);
    secondMoments.set(name, v);
  }
  return { step: Number(contents.metadata['adam_step'] ?? 0), firstMoments, secondMoments };
}

/** Reads a checkpoint's `metadata.json`. */
export async function readCheckpointMetadata(directory: string): Promise<CheckpointMetadata> {
  return JSON.parse(await readFile(path.join(directory, METADATA_FILE), 'utf8')) as CheckpointMetadata;
}
