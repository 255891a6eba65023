/**
 * Where a model's text files (tokenizer, chat template) are found: a folder named by its path, or
 * the Hugging Face cache (`HF_HUB_CACHE`, else `HF_HOME/hub`, else `~/.cache/huggingface/hub`, in
 * the `models--<org>--<name>/snapshots/<rev>/` layout with `refs/main`).
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EngineInputError } from './input-error.js';

/** The Hugging Face hub cache directory for an environment. */
export function hubCacheDirectory(env: NodeJS.ProcessEnv = process.env): string {
  if (env['HF_HUB_CACHE']) return env['HF_HUB_CACHE'];
  if (env['HF_HOME']) return path.join(env['HF_HOME'], 'hub');
  return path.join(os.homedir(), '.cache', 'huggingface', 'hub');
}

/** The snapshot folder of a cached repository: `refs/main`'s revision, else the newest snapshot. */
export function snapshotOf(repository: string): string | null {
  const snapshots = path.join(repository, 'snapshots');
  const ref = path.join(repository, 'refs', 'main');
  if (existsSync(ref)) {
    const revision = readFileSync(ref, 'utf8').trim();
    const folder = path.join(snapshots, revision);
    if (existsSync(folder)) return folder;
  }
  if (!existsSync(snapshots)) return null;
  const candidates = readdirSync(snapshots)
    .map((name) => path.join(snapshots, name))
    .filter((folder) => statSync(folder).isDirectory())
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  return candidates[0] ?? null;
}

/**
 * The folder holding the `tokenizer.json` of base model `id`: `id` itself when it is a folder
 * path, else its snapshot in the Hugging Face cache. Throws an {@link EngineInputError} naming
 * where it looked and how to get the files (only the tokenizer files are needed, not the weights).
 * @example
 * const folder = textFolderOf('Qwen/Qwen3-8B'); // ~/.cache/huggingface/hub/models--Qwen--Qwen3-8B/snapshots/<rev>
 */
export function textFolderOf(id: string, env: NodeJS.ProcessEnv = process.env): string {
  const looked: string[] = [];
  if (path.isAbsolute(id) || id.startsWith('.')) {
    const folder = path.resolve(id);
    if (existsSync(path.join(folder, 'tokenizer.json'))) return folder;
    looked.push(folder);
  } else {
    const repository = path.join(hubCacheDirectory(env), `models--${id.replaceAll('/', '--')}`);
    const snapshot = snapshotOf(repository);
    if (snapshot && existsSync(path.join(snapshot, 'tokenizer.json'))) return snapshot;
    looked.push(snapshot ?? repository);
  }
  throw new EngineInputError(
    `No tokenizer.json for base model ${JSON.stringify(id)}: looked in ${looked.join(', ')}. The text layer renders and tokenizes on this machine, so it needs the model's tokenizer files (not its weights): run \`hf download ${path.isAbsolute(id) ? '<repo>' : id} --include "tokenizer*" "*.json"\` (set HF_HUB_CACHE or HF_HOME to use another cache), or name a folder that has them.`,
    ['body', 'model'],
  );
}
