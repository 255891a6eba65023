/**
 * Where Hugging Face models are found: the Hugging Face cache (`HF_HUB_CACHE`, else
 * `HF_HOME/hub`, else `~/.cache/huggingface/hub`, in the `models--<org>--<name>/snapshots/<rev>/`
 * layout with `refs/main`), folders given explicitly (`policyloop serve --model DIR`), and a
 * folder named by its absolute path (the id of a `--model` folder). A folder the engine cannot
 * serve (see `folder-check.ts`) is not listed, and asking for it says why.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { hubCacheDirectory, snapshotOf } from '../../text/hub-cache.js';
import { type FolderCheckOptions, modelFolderProblem, SUPPORTED_FOLDERS } from './folder-check.js';

/** The id of a model folder: `org/name` inside a hub cache layout, else its absolute path. */
export function modelIdOfFolder(directory: string): string {
  const absolute = path.resolve(directory);
  const match = /[\\/]models--([^\\/]+)--([^\\/]+)[\\/]snapshots[\\/][^\\/]+[\\/]?$/.exec(absolute);
  return match ? `${match[1]}/${match[2]}` : absolute;
}

/** A folder found for an id that the engine cannot serve, and why. */
export interface RefusedFolder {
  readonly folder: string;
  readonly problem: string;
}

/**
 * Finds base models: explicit folders first, then the repositories of the hub cache; folders the
 * engine cannot serve are left out and remembered with the reason.
 */
export class ModelRegistry {
  /**
   * @param folders Explicit model folders (`serve --model DIR`).
   * @param env The environment that names the hub cache. @default process.env
   * @param check How folders are checked (`textFiles: false` when the text layer comes from elsewhere).
   */
  constructor(
    private readonly folders: readonly string[] = [],
    private readonly env: NodeJS.ProcessEnv = process.env,
    private readonly check: FolderCheckOptions = {},
  ) {}

  private scanned: {
    readonly at: number;
    readonly models: Map<string, string>;
    readonly refused: Map<string, RefusedFolder>;
  } | null = null;

  /**
   * Every model found (id to folder), explicit folders first. The cache is read again when the
   * last reading is older than a second (every chat completion asks for the list).
   */
  models(): Map<string, string> {
    return new Map(this.reading().models);
  }

  /** The folders found that the engine cannot serve, by id, with the reason (read like {@link models}). */
  refused(): Map<string, RefusedFolder> {
    return new Map(this.reading().refused);
  }

  private reading(): { models: Map<string, string>; refused: Map<string, RefusedFolder> } {
    const now = Date.now();
    if (this.scanned && now - this.scanned.at < 1000) return this.scanned;
    this.scanned = { at: now, ...this.scan() };
    return this.scanned;
  }

  /** Why the engine cannot serve the folder (checked as this registry checks folders), or null when it can. */
  problemOf(folder: string): string | null {
    return modelFolderProblem(folder, this.check);
  }

  private scan(): { models: Map<string, string>; refused: Map<string, RefusedFolder> } {
    const found = new Map<string, string>();
    const refused = new Map<string, RefusedFolder>();
    const consider = (id: string, folder: string): void => {
      if (found.has(id) || refused.has(id)) return;
      const problem = this.problemOf(folder);
      if (problem === null) found.set(id, path.resolve(folder));
      else refused.set(id, { folder: path.resolve(folder), problem });
    };
    for (const folder of this.folders) consider(modelIdOfFolder(folder), folder);
    const hub = hubCacheDirectory(this.env);
    let entries: string[] = [];
    try {
      entries = readdirSync(hub)
        .filter((name) => name.startsWith('models--'))
        .sort();
    } catch {
      return { models: found, refused };
    }
    for (const entry of entries) {
      const parts = entry.slice('models--'.length).split('--');
      const id = parts.join('/');
      const snapshot = snapshotOf(path.join(hub, entry));
      // A repository without a snapshot holding config.json is not a model download (a dataset, a half-made cache entry).
      if (snapshot && existsSync(path.join(snapshot, 'config.json'))) consider(id, snapshot);
    }
    return { models: found, refused };
  }

  /** Where the folder of `id` would be, whether or not the engine can serve it: explicit, an absolute path, or the cache. */
  private folderOf(id: string): string | null {
    for (const folder of this.folders) if (modelIdOfFolder(folder) === id) return path.resolve(folder);
    if (path.isAbsolute(id)) return existsSync(id) ? id : null;
    const parts = id.split('/');
    if (parts.length === 2 && parts.every((part) => /^[\w.-]+$/.test(part)))
      return snapshotOf(path.join(hubCacheDirectory(this.env), `models--${parts[0]}--${parts[1]}`));
    return null;
  }

  /**
   * The folder of a model id, or null (not found, or a folder the engine cannot serve:
   * {@link describeMissing} says which). An absolute path is the id of a `--model` folder: it
   * resolves to that folder even when it was not given again.
   */
  resolve(id: string): string | null {
    const folder = this.folderOf(id);
    return folder !== null && this.problemOf(folder) === null ? folder : null;
  }

  /** Where the engine looked for `id` and how to get it there, or why its folder is refused, for a 422. */
  describeMissing(id: string): string {
    const folder = this.folderOf(id);
    const problem = folder === null ? null : this.problemOf(folder);
    if (folder !== null && problem !== null)
      return `Base model ${JSON.stringify(id)} cannot be served from the folder ${folder}: ${problem} ${SUPPORTED_FOLDERS}`;
    if (path.isAbsolute(id))
      return (
        `Base model ${JSON.stringify(id)} is a model folder (given to \`policyloop serve --model\`) that is not there any more. ` +
        'If it moved, serve it from its new place with `policyloop serve --model NEW_DIR`; models trained on the old path are exported with `policyloop export MODEL --base NEW_DIR`.'
      );
    const hub = hubCacheDirectory(this.env);
    const looked = [
      ...this.folders.map((entry) => path.resolve(entry)),
      `${path.join(hub, `models--${id.replaceAll('/', '--')}`)} (the Hugging Face cache: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub)`,
    ];
    return (
      `Base model ${JSON.stringify(id)} was not found. The engine looked in ${looked.join('; ')}. ` +
      `Download it with \`huggingface-cli download ${id}\` (or \`hf download ${id}\`), or pass its folder with ` +
      `\`policyloop serve --model DIR\`. ${SUPPORTED_FOLDERS}`
    );
  }
}

/**
 * Checks the folders given to `serve --model` (option `models`): each must be one the engine can
 * serve. Returns the first refusal as a sentence naming the folder, the missing or broken file or
 * the architecture, and what the engine serves; null when every folder is fine.
 */
export function explicitFoldersProblem(folders: readonly string[], check: FolderCheckOptions = {}): string | null {
  for (const folder of folders) {
    const problem = modelFolderProblem(folder, check);
    if (problem !== null)
      return `Expected a model folder the engine can serve for --model (option \`models\`), got ${path.resolve(folder)}: ${problem} ${SUPPORTED_FOLDERS}`;
  }
  return null;
}
