/**
 * LoRA adapters on the linear layers of a Hugging Face model: settings from a job's config, the
 * initial weights, and checkpoints in PEFT's own format (`adapter_config.json` +
 * `adapter_model.safetensors` with PEFT's tensor names), which `PeftModel.from_pretrained` and
 * vLLM's `--enable-lora` load as they are.
 *
 * In memory an adapter of a layer is `A` `[in, rank]` and `B` `[rank, out]` (PEFT stores their
 * transposes, `lora_A.weight` `[rank, in]` and `lora_B.weight` `[out, rank]`).
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { TensorFlow } from '../tensorflow.js';
import { SeededRandom } from '../random.js';
import { readSafetensors, writeSafetensors } from '../safetensors.js';
import type { HostTensor } from '../safetensors.js';
import { readOptimizerFile, writeOptimizerFile } from '../weights.js';
import type { CheckpointMetadata, HostWeights, OptimizerState } from '../weights.js';
import type { HfModelConfig } from './config.js';
import { linearModulePath, linearShape, transposeHost } from './files.js';
import { LINEAR_MODULES } from './model.js';
import type { LinearModule, LoraPair, LoraTensors } from './model.js';

/** Rank, alpha and adapted layers of an adapter. */
export interface LoraSettings {
  readonly rank: number;
  readonly alpha: number;
  readonly targetModules: readonly LinearModule[];
  /** rsLoRA scaling (`alpha / sqrt(rank)`), only for adapters read from PEFT with `use_rslora`. */
  readonly rsLora?: boolean | undefined;
}

/** Defaults: rank 8, alpha 16, every linear layer of the blocks. */
export const DEFAULT_LORA_SETTINGS: LoraSettings = { rank: 8, alpha: 16, targetModules: LINEAR_MODULES };

/** PEFT's adapter config file. */
export const ADAPTER_CONFIG_FILE = 'adapter_config.json';
/** PEFT's adapter weights file. */
export const ADAPTER_WEIGHTS_FILE = 'adapter_model.safetensors';
/** AdamW moments of the adapter (policyloop's own, ignored by PEFT). */
export const ADAPTER_OPTIMIZER_FILE = 'optimizer.safetensors';

/** The `lora_*` keys of a job config. */
export interface LoraOptions {
  readonly lora_rank?: number | null | undefined;
  readonly lora_alpha?: number | null | undefined;
  readonly lora_target_modules?: readonly string[] | null | undefined;
}

/** Settings from a job's `lora_*` keys (defaults for absent ones); throws on an unknown module. */
export function loraSettingsOf(options: LoraOptions | null | undefined): LoraSettings {
  const modules = options?.lora_target_modules ?? DEFAULT_LORA_SETTINGS.targetModules;
  for (const module of modules)
    if (!(LINEAR_MODULES as readonly string[]).includes(module))
      throw new Error(
        `lora_target_modules: unknown module ${JSON.stringify(module)}, expected some of ${LINEAR_MODULES.join(', ')}.`,
      );
  if (modules.length === 0) throw new Error('lora_target_modules: expected at least one module, got [].');
  return {
    rank: options?.lora_rank ?? DEFAULT_LORA_SETTINGS.rank,
    alpha: options?.lora_alpha ?? DEFAULT_LORA_SETTINGS.alpha,
    targetModules: LINEAR_MODULES.filter((module) => modules.includes(module)),
  };
}

/** The factor of the LoRA update: `alpha / rank` (or `alpha / sqrt(rank)` with rsLoRA). */
export function loraScale(settings: LoraSettings): number {
  return settings.rsLora ? settings.alpha / Math.sqrt(settings.rank) : settings.alpha / settings.rank;
}

/** In-memory name of a LoRA matrix. */
export function loraName(layer: number, module: LinearModule, matrix: 'A' | 'B'): string {
  return `layers.${layer}.${module}.${matrix}`;
}

/** PEFT's tensor name of a LoRA matrix. */
export function peftName(layer: number, module: LinearModule, matrix: 'A' | 'B'): string {
  return `base_model.model.${linearModulePath(layer, module)}.lora_${matrix}.weight`;
}

/**
 * A fresh adapter, as PEFT initialises one: `A` uniform in ±1/sqrt(in) (Kaiming-uniform with
 * a = sqrt(5)), `B` zero, so the adapted model starts equal to the base model.
 */
export function initialLora(config: HfModelConfig, settings: LoraSettings, seed = 1): HostWeights {
  const random = new SeededRandom(seed);
  const weights: HostWeights = new Map();
  for (let layer = 0; layer < config.layerCount; layer += 1)
    for (const module of settings.targetModules) {
      const [out, input] = linearShape(config, module);
      const bound = 1 / Math.sqrt(input);
      const a = new Float32Array(input * settings.rank);
      for (let index = 0; index < a.length; index += 1) a[index] = (random.next() * 2 - 1) * bound;
      weights.set(loraName(layer, module, 'A'), { shape: [input, settings.rank], data: a });
      weights.set(loraName(layer, module, 'B'), {
        shape: [settings.rank, out],
        data: new Float32Array(settings.rank * out),
      });
    }
  return weights;
}

/** Uploads host LoRA weights (or the given tensors by name) as the model's adapters. */
export function loraTensors(
  config: HfModelConfig,
  settings: LoraSettings,
  byName: (name: string) => LoraPair['a'],
): LoraTensors {
  const layers: Partial<Record<LinearModule, LoraPair>>[] = [];
  for (let layer = 0; layer < config.layerCount; layer += 1) {
    const adapters: Partial<Record<LinearModule, LoraPair>> = {};
    for (const module of settings.targetModules)
      adapters[module] = { a: byName(loraName(layer, module, 'A')), b: byName(loraName(layer, module, 'B')) };
    layers.push(adapters);
  }
  return { scale: loraScale(settings), layers };
}

/** Uploads host LoRA weights as tensors (the caller disposes them with {@link disposeLora}). */
export function uploadLora(
  tf: TensorFlow,
  config: HfModelConfig,
  settings: LoraSettings,
  weights: HostWeights,
): LoraTensors {
  return loraTensors(config, settings, (name) => {
    const tensor = weights.get(name) as HostTensor;
    return tf.tensor2d(tensor.data, [tensor.shape[0] as number, tensor.shape[1] as number]);
  });
}

/** Disposes an adapter's tensors. */
export function disposeLora(lora: LoraTensors): void {
  for (const layer of lora.layers)
    for (const pair of Object.values(layer)) {
      pair?.a.dispose();
      pair?.b.dispose();
    }
}

/** PEFT's `adapter_config.json` for these settings. */
export function adapterConfig(settings: LoraSettings, baseModel: string): Record<string, unknown> {
  return {
    alpha_pattern: {},
    auto_mapping: null,
    base_model_name_or_path: baseModel,
    bias: 'none',
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    layers_pattern: null,
    layers_to_transform: null,
    lora_alpha: settings.alpha,
    lora_dropout: 0,
    modules_to_save: null,
    peft_type: 'LORA',
    r: settings.rank,
    rank_pattern: {},
    revision: null,
    target_modules: [...settings.targetModules],
    task_type: 'CAUSAL_LM',
    use_dora: false,
    use_rslora: settings.rsLora === true,
  };
}

/** Metadata of a policyloop checkpoint of a Hugging Face base model. */
export interface AdapterCheckpointMetadata extends CheckpointMetadata {
  readonly adapter: 'peft-lora';
}

async function writeAtomically(file: string, write: (temporary: string) => Promise<void>): Promise<void> {
  await write(`${file}.tmp`);
  await rename(`${file}.tmp`, file);
}

/**
 * Writes an adapter in PEFT's format into `directory` (created if needed), plus, when given, the
 * optimizer moments and `metadata.json` of a policyloop checkpoint.
 */
export async function writeAdapter(
  directory: string,
  config: HfModelConfig,
  settings: LoraSettings,
  weights: HostWeights,
  baseModel: string,
  extra?: { readonly optimizer: OptimizerState | null; readonly metadata: AdapterCheckpointMetadata },
): Promise<void> {
  await mkdir(directory, { recursive: true });
  const peft: HostWeights = new Map();
  for (let layer = 0; layer < config.layerCount; layer += 1)
    for (const module of settings.targetModules) {
      const a = weights.get(loraName(layer, module, 'A')) as HostTensor;
      const b = weights.get(loraName(layer, module, 'B')) as HostTensor;
      const [input, rank] = a.shape as [number, number];
      const out = b.shape[1] as number;
      peft.set(peftName(layer, module, 'A'), { shape: [rank, input], data: transposeHost(a.data, input, rank) });
      peft.set(peftName(layer, module, 'B'), { shape: [out, rank], data: transposeHost(b.data, rank, out) });
    }
  await writeAtomically(path.join(directory, ADAPTER_WEIGHTS_FILE), (file) =>
    writeSafetensors(file, peft, { format: 'pt' }),
  );
  await writeAtomically(path.join(directory, ADAPTER_CONFIG_FILE), (file) =>
    writeFile(file, `${JSON.stringify(adapterConfig(settings, baseModel), null, 2)}\n`),
  );
  if (!extra) return;
  if (extra.optimizer) await writeOptimizerFile(path.join(directory, ADAPTER_OPTIMIZER_FILE), extra.optimizer);
  await writeAtomically(path.join(directory, 'metadata.json'), (file) =>
    writeFile(file, `${JSON.stringify(extra.metadata, null, 2)}\n`),
  );
}

/**
 * Reads a PEFT LoRA adapter (ours or one PEFT wrote) for a model, checking its modules and shapes.
 * Throws an Error naming the file and what did not fit.
 */
export async function readAdapter(
  directory: string,
  config: HfModelConfig,
): Promise<{ settings: LoraSettings; weights: HostWeights }> {
  const configFile = path.join(directory, ADAPTER_CONFIG_FILE);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(await readFile(configFile, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new Error(
      `Expected a PEFT adapter config at ${configFile}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (raw['peft_type'] !== 'LORA')
    throw new Error(`${configFile}: expected peft_type "LORA", got ${JSON.stringify(raw['peft_type'])}.`);
  const targets = raw['target_modules'];
  const settings: LoraSettings = {
    ...loraSettingsOf({
      lora_rank: raw['r'] as number,
      lora_alpha: raw['lora_alpha'] as number,
      lora_target_modules: Array.isArray(targets)
        ? (targets as string[])
        : typeof targets === 'string'
          ? [targets]
          : null,
    }),
    rsLora: raw['use_rslora'] === true,
  };
  const { tensors } = await readSafetensors(path.join(directory, ADAPTER_WEIGHTS_FILE), {
    dtypes: ['F32', 'BF16', 'F16'],
  });
  const weights: HostWeights = new Map();
  for (let layer = 0; layer < config.layerCount; layer += 1)
    for (const module of settings.targetModules) {
      const [out, input] = linearShape(config, module);
      for (const matrix of ['A', 'B'] as const) {
        const name = peftName(layer, module, matrix);
        const tensor = tensors.get(name);
        const shape = matrix === 'A' ? [settings.rank, input] : [out, settings.rank];
        if (!tensor) throw new Error(`${directory}: the adapter lacks tensor ${name}.`);
        if (tensor.shape.join(',') !== shape.join(','))
          throw new Error(
            `${directory}: tensor ${name} has shape [${tensor.shape.join(', ')}], expected [${shape.join(', ')}].`,
          );
        weights.set(loraName(layer, module, matrix), {
          shape: [shape[1] as number, shape[0] as number],
          data: transposeHost(tensor.data, shape[0] as number, shape[1] as number),
        });
      }
    }
  return { settings, weights };
}

/** Reads the AdamW moments stored with an adapter checkpoint, or null when absent or not fitting. */
export async function readAdapterOptimizer(directory: string, weights: HostWeights): Promise<OptimizerState | null> {
  return readOptimizerFile(
    path.join(directory, ADAPTER_OPTIMIZER_FILE),
    [...weights].map(([name, tensor]) => ({ name, length: tensor.data.length })),
  );
}
