/**
 * Where Hugging Face models are found: the Hugging Face cache (`HF_HUB_CACHE`, else
 * `HF_HOME/hub`, else `~/.cache/huggingface/hub`, in the `models--<org>--<name>/snapshots/<rev>/`
 * layout with `refs/main`), and folders given explicitly (`policyloop serve --model DIR`).
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SUPPORTED_ARCHITECTURES } from './config.js';

/** The Hugging Face hub cache directory for an environment. */
export function hubCacheDirectory(env: NodeJS.ProcessEnv = process.env): string {
  if (env['HF_HUB_CACHE']) return env['HF_HUB_CACHE'];
  if (env['HF_HOME']) return path.join(env['HF_HOME'], 'hub');
  return path.join(os.homedir(), '.cache', 'huggingface', 'hub');
}

function isModelFolder(directory: string): boolean {
  const file = path.join(directory, 'config.json');
  if (!existsSync(file)) return false;
  try {
    const config = JSON.parse(readFileSync(file, 'utf8')) as { architectures?: unknown };
    const architecture = Array.isArray(config.architectures) ? config.architectures[0] : undefined;
    return typeof architecture === 'string' && (SUPPORTED_ARCHITECTURES as readonly string[]).includes(architecture);
  } catch {
    return false;
  }
}

/** The snapshot folder of a cached repository: `refs/main`'s revision, else the newest snapshot. */
function snapshotOf(repository: string): string | null {
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

/** The id of a model folder: `org/name` inside a hub cache layout, else its absolute path. */
export function modelIdOfFolder(directory: string): string {
  const absolute = path.resolve(directory);
  const match = /[\\/]models--([^\\/]+)--([^\\/]+)[\\/]snapshots[\\/][^\\/]+[\\/]?$/.exec(absolute);
  return match ? `${match[1]}/${match[2]}` : absolute;
}

/** Finds base models: explicit folders first, then the repositories of the hub cache. */
export class ModelRegistry {
  constructor(
    private readonly folders: readonly string[] = [],
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  private scanned: { readonly at: number; readonly models: Map<string, string> } | null = null;

  /**
   * Every model found (id to folder), explicit folders first. The cache is read again when the
   * last reading is older than a second (every chat completion asks for the list).
   */
  models(): Map<string, string> {
    const now = Date.now();
    if (this.scanned && now - this.scanned.at < 1000) return new Map(this.scanned.models);
    const models = this.scan();
    this.scanned = { at: now, models };
    return new Map(models);
  }

  private scan(): Map<string, string> {
    const found = new Map<string, string>();
    for (const folder of this.folders)
      if (isModelFolder(folder)) found.set(modelIdOfFolder(folder), path.resolve(folder));
    const hub = hubCacheDirectory(this.env);
    let entries: string[] = [];
    try {
      entries = readdirSync(hub)
        .filter((name) => name.startsWith('models--'))
        .sort();
    } catch {
      return found;
    }
    for (const entry of entries) {
      const parts = entry.slice('models--'.length).split('--');
      const id = parts.join('/');
      if (found.has(id)) continue;
      const snapshot = snapshotOf(path.join(hub, entry));
      if (snapshot && isModelFolder(snapshot)) found.set(id, snapshot);
    }
    return found;
  }

  /** The folder of a model id, or null. */
  resolve(id: string): string | null {
    for (const folder of this.folders)
      if (modelIdOfFolder(folder) === id && isModelFolder(folder)) return path.resolve(folder);
    const parts = id.split('/');
    if (parts.length === 2 && parts.every((part) => /^[\w.-]+$/.test(part))) {
      const snapshot = snapshotOf(path.join(hubCacheDirectory(this.env), `models--${parts[0]}--${parts[1]}`));
      if (snapshot && isModelFolder(snapshot)) return snapshot;
    }
    return null;
  }

  /** Where the engine looked for `id` and how to get it there, for a "not found" answer. */
  describeMissing(id: string): string {
    const hub = hubCacheDirectory(this.env);
    const looked = [
      ...this.folders.map((folder) => path.resolve(folder)),
      `${path.join(hub, `models--${id.replaceAll('/', '--')}`)} (the Hugging Face cache: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)`,
    ];
    return (
      `Base model ${JSON.stringify(id)} was not found. The engine looked in ${looked.join('; ')}. ` +
      `Download it with \`huggingface-cli download ${id}\` (or \`hf download ${id}\`), or pass its folder with ` +
      '`policyloop serve --model DIR`. Supported architectures: ' +
      `${SUPPORTED_ARCHITECTURES.join(', ')}.`
    );
  }
}
