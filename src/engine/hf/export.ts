/**
 * Exports a checkpoint of a Hugging Face base model: its LoRA adapter as PEFT writes one, or the
 * merged model (base weights + `scale · B·A` on every adapted layer) as a full model folder that
 * transformers and vLLM load without PEFT.
 */
import { copyFile, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { writeSafetensors } from '../safetensors.js';
import type { HostTensor } from '../safetensors.js';
import { CONFIG_FILE, forEachWeight, linearModulePath, readHfConfig } from './files.js';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, adapterConfig, loraName, loraScale, readAdapter } from './lora.js';

/** What to export. */
export interface ExportRequest {
  /** Folder of the base model. */
  readonly baseDirectory: string;
  /** Id of the base model (written as the adapter's `base_model_name_or_path`). */
  readonly baseModel: string;
  /** A checkpoint folder written by a training job (an adapter), or null for the base model. */
  readonly checkpointDirectory: string | null;
  /** Folder to write (created if needed). */
  readonly out: string;
  /** Write the merged model instead of the adapter. */
  readonly merged: boolean;
}

/** Files of a model folder that describe it besides its weights (copied into a merged export). */
const MODEL_FILES =
  /^(generation_config\.json|tokenizer\.json|tokenizer_config\.json|special_tokens_map\.json|chat_template\.jinja|vocab\.json|merges\.txt|tokenizer\.model)$/;

/** Writes the export and returns the files written (names inside `out`). */
export async function exportCheckpoint(request: ExportRequest): Promise<string[]> {
  const config = await readHfConfig(request.baseDirectory);
  await mkdir(request.out, { recursive: true });
  const adapter = request.checkpointDirectory ? await readAdapter(request.checkpointDirectory, config) : null;
  if (!request.merged) {
    if (!adapter)
      throw new Error(
        'This is the base model (step 0): it has no adapter to export; use --merged for a copy of the model.',
      );
    await copyFile(
      path.join(request.checkpointDirectory as string, ADAPTER_WEIGHTS_FILE),
      path.join(request.out, ADAPTER_WEIGHTS_FILE),
    );
    await writeFile(
      path.join(request.out, ADAPTER_CONFIG_FILE),
      `${JSON.stringify(adapterConfig(adapter.settings, request.baseModel), null, 2)}\n`,
    );
    return [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE];
  }
  const tensors = new Map<string, HostTensor>();
  const deltas = new Map<string, { a: HostTensor; b: HostTensor }>();
  if (adapter)
    for (let layer = 0; layer < config.layerCount; layer += 1)
      for (const module of adapter.settings.targetModules)
        deltas.set(`${linearModulePath(layer, module)}.weight`, {
          a: adapter.weights.get(loraName(layer, module, 'A')) as HostTensor,
          b: adapter.weights.get(loraName(layer, module, 'B')) as HostTensor,
        });
  const scale = adapter ? loraScale(adapter.settings) : 0;
  await forEachWeight(request.baseDirectory, (name, tensor) => {
    const delta = deltas.get(name);
    if (delta) {
      // W [out, in] += scale · (A [in, r] · B [r, out])ᵀ
      const [out, input] = tensor.shape as [number, number];
      const rank = delta.a.shape[1] as number;
      const data = tensor.data;
      for (let row = 0; row < out; row += 1)
        for (let column = 0; column < input; column += 1) {
          let sum = 0;
          for (let k = 0; k < rank; k += 1)
            sum += (delta.a.data[column * rank + k] as number) * (delta.b.data[k * out + row] as number);
          data[row * input + column] = (data[row * input + column] as number) + scale * sum;
        }
    }
    tensors.set(name, tensor);
  });
  await writeSafetensors(path.join(request.out, 'model.safetensors'), tensors, { format: 'pt' });
  const rawConfig = JSON.parse(await readFile(path.join(request.baseDirectory, CONFIG_FILE), 'utf8')) as Record<
    string,
    unknown
  >;
  // The merged weights are float32.
  const written = { ...rawConfig, torch_dtype: 'float32', ...('dtype' in rawConfig ? { dtype: 'float32' } : {}) };
  await writeFile(path.join(request.out, CONFIG_FILE), `${JSON.stringify(written, null, 2)}\n`);
  const files = [CONFIG_FILE, 'model.safetensors'];
  for (const entry of await readdir(request.baseDirectory)) {
    if (!MODEL_FILES.test(entry)) continue;
    await copyFile(path.join(request.baseDirectory, entry), path.join(request.out, entry));
    files.push(entry);
  }
  return files;
}
