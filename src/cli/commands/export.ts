/**
 * `policyloop export <model>[:step] --out DIR [--merged] [--data-dir .policyloop] [--model DIR ...] [--base DIR]`:
 * writes one checkpoint of a model trained on a Hugging Face base model as a PEFT adapter folder
 * (`adapter_config.json` + `adapter_model.safetensors`), or with `--merged` as a full model folder
 * (base weights with the adapter merged in). Reads the local service's data directory, so the
 * service need not run. The base model is found by its id: a folder's absolute path (a model
 * trained on `serve --model DIR`), or `org/name` in the Hugging Face cache; `--base DIR` points at
 * a folder that has moved.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_DATA_DIR } from '../../internal/env.js';

/** Options of `export` (declared in `export-command.ts`, parsed by commander). */
export interface ExportOptions {
  /** Folder to write. */
  out: string;
  /** Write the merged model instead of the adapter. */
  merged?: boolean | undefined;
  /** The service's data directory. @default '.policyloop' */
  dataDir?: string | undefined;
  /** Base model folders given to `serve --model`. */
  model?: string[] | undefined;
  /** The base model's folder, when it is no longer where the model was trained on it. */
  base?: string | undefined;
}

/** The `export` subcommand for `<model>[:step]`; returns the exit code. */
export async function exportCommand(reference: string, options: ExportOptions): Promise<number> {
  const match = /^(.*?)(?::(\d+))?$/.exec(reference) as RegExpExecArray;
  const name = match[1] as string;
  const step = match[2] === undefined ? undefined : Number(match[2]);
  const dataDir = options.dataDir ?? DEFAULT_DATA_DIR;
  const { DATABASE_FILE } = await import('../../server/store/index.js');
  if (!existsSync(path.join(dataDir, DATABASE_FILE))) {
    process.stderr.write(`policyloop export: no local service data in ${path.resolve(dataDir)} (give --data-dir)\n`);
    return 1;
  }
  const { Store } = await import('../../server/store/index.js');
  const store = Store.openIn(dataDir);
  try {
    const parts = name.split('/');
    const model =
      parts.length === 1
        ? store.models.get(name)
        : parts.length === 3
          ? store.models.find(parts[0] as string, parts[1] as string, parts[2] as string)
          : store.models.findByProjectAndName(parts[0] as string, parts[1] as string)[0];
    if (!model) {
      process.stderr.write(`policyloop export: no model ${JSON.stringify(name)} in ${path.resolve(dataDir)}\n`);
      return 1;
    }
    const checkpoints = store.checkpoints.list(model.id, { limit: 1_000_000, order: 'desc' })?.items ?? [];
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
    const baseDirectory = findBaseFolder(model.base_model, reference, name, options, ModelRegistry);
    if (typeof baseDirectory !== 'string') {
      process.stderr.write(`policyloop export: ${baseDirectory.problem}\n`);
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

/**
 * The folder of the base model `baseModel` of the model named `name`: `--base` when given (and
 * whole), else where the registry finds it (`--model` folders, the absolute path the model was
 * trained on, the Hugging Face cache); otherwise a message naming the path expected and how to
 * point at the new one. The text files are not needed: an export reads config.json and the weights.
 */
function findBaseFolder(
  baseModel: string,
  reference: string,
  name: string,
  options: ExportOptions,
  Registry: typeof import('../../engine/hf/registry.js').ModelRegistry,
): string | { problem: string } {
  const registry = new Registry(options.model ?? [], process.env, { textFiles: false });
  if (options.base !== undefined) {
    const folder = path.resolve(options.base);
    const refused = registry.problemOf(folder);
    if (refused !== null) return { problem: `--base ${folder} is not a model folder the export can read: ${refused}` };
    return folder;
  }
  const found = registry.resolve(baseModel);
  if (found !== null) return found;
  const again = `policyloop export ${reference} --base NEW_DIR`;
  if (path.isAbsolute(baseModel)) {
    const refused = registry.problemOf(baseModel);
    return {
      problem:
        `${name} was trained on the base model folder ${baseModel} (given to \`serve --model\`), ` +
        `${refused === null || !existsSync(baseModel) ? 'which is not there any more' : `which cannot be read: ${refused}`}. ` +
        `If it moved, point at its new place: ${again}`,
    };
  }
  return { problem: `${registry.describeMissing(baseModel)} If the folder is elsewhere, point at it: ${again}` };
}
