/**
 * `policyloop export <model>[:step] --out DIR [--merged] [--data-dir .policyloop] [--model DIR ...]`:
 * writes one checkpoint of a model trained on a Hugging Face base model as a PEFT adapter folder
 * (`adapter_config.json` + `adapter_model.safetensors`), or with `--merged` as a full model folder
 * (base weights with the adapter merged in). Reads the local service's data directory.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_DATA_DIR } from '../../internal/env.js';

/** Options of `export` (parsed by commander in `main.ts`). */
export interface ExportOptions {
  /** Folder to write. */
  out: string;
  /** Write the merged model instead of the adapter. */
  merged?: boolean | undefined;
  /** The service's data directory. @default '.policyloop' */
  dataDir?: string | undefined;
  /** Base model folders given to `serve --model`. */
  model?: string[] | undefined;
}

/** The `export` subcommand for `<model>[:step]`; returns the exit code. */
export async function exportCommand(reference: string, options: ExportOptions): Promise<number> {
  const match = /^(.*?)(?::(\d+))?$/.exec(reference) as RegExpExecArray;
  const name = match[1] as string;
  const step = match[2] === undefined ? undefined : Number(match[2]);
  const dataDir = options.dataDir ?? DEFAULT_DATA_DIR;
  const { DATABASE_FILE } = await import('../../server/store.js');
  if (!existsSync(path.join(dataDir, DATABASE_FILE))) {
    process.stderr.write(`policyloop export: no local service data in ${path.resolve(dataDir)} (give --data-dir)\n`);
    return 1;
  }
  const { Store } = await import('../../server/store.js');
  const store = Store.openIn(dataDir);
  try {
    const parts = name.split('/');
    const model =
      parts.length === 1
        ? store.getModel(name)
        : parts.length === 3
          ? store.findModel(parts[0] as string, parts[1] as string, parts[2] as string)
          : store.findModelsByProjectAndName(parts[0] as string, parts[1] as string)[0];
    if (!model) {
      process.stderr.write(`policyloop export: no model ${JSON.stringify(name)} in ${path.resolve(dataDir)}\n`);
      return 1;
    }
    const checkpoints = store.listCheckpoints(model.id, { limit: 1_000_000, order: 'desc' })?.items ?? [];
    const checkpoint = step === undefined ? checkpoints[0] : checkpoints.find((candidate) => candidate.step === step);
    if (step !== undefined && step !== 0 && !checkpoint) {
      process.stderr.write(
        `policyloop export: ${name} has no checkpoint at step ${step} (steps: ${checkpoints.map((c) => c.step).join(', ') || 'none'})\n`,
      );
      return 1;
    }
    const checkpointDirectory = checkpoint && step !== 0 ? path.resolve(dataDir, checkpoint.path) : null;
    if (checkpointDirectory && existsSync(path.join(checkpointDirectory, 'tinker.json'))) {
      // Trained on a Tinker server (TinkerBackend): the adapter is the server's archive of its sampler weights.
      if (options.merged) {
        process.stderr.write(
          'policyloop export: --merged is not offered for models trained on a Tinker server; export the adapter and merge it with PEFT\n',
        );
        return 1;
      }
      const { exportTinkerCheckpoint } = await import('../../backends/tinker/index.js');
      const files = await exportTinkerCheckpoint({ checkpointDirectory, out: options.out });
      process.stdout.write(
        `wrote the adapter of ${model.entity}/${model.project}/${model.name} at step ${checkpoint?.step} (from its Tinker server) to ${path.resolve(options.out)}: ${files.join(', ')}\n`,
      );
      return 0;
    }
    const { ModelRegistry, exportCheckpoint, MODEL_CONFIGS } = await import('../../engine/index.js');
    if (MODEL_CONFIGS.has(model.base_model)) {
      process.stderr.write(
        `policyloop export: ${name} is trained on the built-in ${model.base_model}, whose checkpoints no other stack reads; export is for Hugging Face base models\n`,
      );
      return 1;
    }
    const registry = new ModelRegistry(options.model ?? []);
    const baseDirectory = registry.resolve(model.base_model);
    if (!baseDirectory) {
      process.stderr.write(`policyloop export: ${registry.describeMissing(model.base_model)}\n`);
      return 1;
    }
    const files = await exportCheckpoint({
      baseDirectory,
      baseModel: model.base_model,
      checkpointDirectory: checkpoint && step !== 0 ? path.resolve(dataDir, checkpoint.path) : null,
      out: options.out,
      merged: options.merged ?? false,
    });
    process.stdout.write(
      `wrote ${options.merged ? 'the merged model' : 'the adapter'} of ${model.entity}/${model.project}/${model.name} at step ${checkpoint && step !== 0 ? checkpoint.step : 0} to ${path.resolve(options.out)}: ${files.join(', ')}\n`,
    );
    return 0;
  } catch (error) {
    process.stderr.write(`policyloop export: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  } finally {
    store.close();
  }
}
