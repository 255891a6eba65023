/** The declaration of `policyloop export`: its argument, options and help; `export.ts` runs it. */
import type { Command } from 'commander';
import { DEFAULT_DATA_DIR } from '../../internal/env.js';
import { type CommandContext, collect } from '../declaration.js';
import type { ExportOptions } from './export.js';

/** Adds `export` (a checkpoint as a PEFT adapter or a merged model folder) to the program. */
export function declareExport(context: CommandContext): Command {
  return context.program
    .command('export')
    .summary('Write a checkpoint of a Hugging Face base model as a PEFT adapter (or merged model)')
    .description(
      'Write a checkpoint of a model trained on a Hugging Face base model (Llama, Qwen3) to a folder: its ' +
        "LoRA adapter in PEFT's format (PeftModel.from_pretrained, vLLM --enable-lora), or with --merged the " +
        'whole model with the adapter merged in (transformers, vLLM without LoRA). Reads the local ' +
        "service's data directory (the service may be running).",
    )
    .argument(
      '<model>',
      'a model id, project/name or entity/project/name; :step picks a checkpoint (default: the latest)',
    )
    .requiredOption('--out <dir>', 'Folder to write (created if needed)')
    .option('--merged', 'Write the merged model (config, float32 weights, tokenizer files)', false)
    .option('--data-dir <dir>', "The service's data directory", DEFAULT_DATA_DIR)
    .option(
      '--model <dir>',
      'A base model folder given to `serve --model`; repeat for several (a folder the model was trained on is found by its path without it)',
      collect,
    )
    .option(
      '--base <dir>',
      'The base model folder to use, when it is no longer where the model was trained on it (moved, or another copy)',
    )
    .action(async (reference: string, options: ExportOptions) => {
      const { exportCommand } = await import('./export.js');
      context.setExitCode(await exportCommand(reference, options));
    });
}
