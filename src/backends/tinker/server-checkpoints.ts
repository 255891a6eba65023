/**
 * The weights a Tinker server keeps, against what a data directory records: deleting a model (or a
 * checkpoint) of a `TinkerBackend` deletes its local records, and `pruneCheckpoints` deletes its
 * server weights too, but weights whose local records are gone some other way (a data directory
 * removed, a run killed between saving and recording) stay on the server. This lists them, marked
 * `orphaned`, so they can be deleted (`policyloop tinker checkpoints list|delete`).
 */
import type { Dirent } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { TINKER_CHECKPOINT_FILE } from './checkpoint-record.js';
import type { TinkerCheckpointRecord } from './checkpoint-record.js';
import type { TinkerClient } from './tinker-client.js';
import type { SubmitOptions, TinkerCheckpoint } from './types.js';

/** A checkpoint on the server, with its training run and whether the data directory records it. */
export interface ServerCheckpoint extends TinkerCheckpoint {
  /** The training run (training model) it belongs to. */
  readonly trainingRunId: string;
  /** The run's base model. */
  readonly baseModel: string;
  /**
   * True when no checkpoint record (`tinker.json`) under the data directory names it: its model
   * or checkpoint was deleted here, or another data directory (another script, another machine)
   * made it. Only the data directories you use tell which.
   */
  readonly orphaned: boolean;
}

/** Options of {@link listServerCheckpoints}. */
export interface ListServerCheckpointsOptions extends SubmitOptions {
  /** The data directory of the `TinkerBackend` whose records count (its `dataDir`). */
  readonly dataDir: string;
}

/**
 * Every checkpoint (sampler weights and saved state) of every training run on the server, each
 * marked `orphaned` when no checkpoint record under `dataDir` names it.
 * @example
 * const client = new TinkerClient({ baseURL: 'http://127.0.0.1:8000', apiKey: 'tml-local' });
 * const orphaned = (await listServerCheckpoints(client, { dataDir: '.policyloop/tinker' })).filter((c) => c.orphaned);
 * for (const checkpoint of orphaned) await client.deleteCheckpoint(checkpoint.tinkerPath);
 */
export async function listServerCheckpoints(
  client: TinkerClient,
  options: ListServerCheckpointsOptions,
): Promise<ServerCheckpoint[]> {
  const [runs, recorded] = await Promise.all([
    client.listTrainingRuns({ signal: options.signal }),
    recordedTinkerPaths(options.dataDir),
  ]);
  const checkpoints: ServerCheckpoint[] = [];
  for (const run of runs) {
    for (const checkpoint of await client.listCheckpoints(run.trainingRunId, { signal: options.signal }))
      checkpoints.push({
        ...checkpoint,
        trainingRunId: run.trainingRunId,
        baseModel: run.baseModel,
        orphaned: !recorded.has(canonicalTinkerPath(checkpoint.tinkerPath)),
      });
  }
  return checkpoints;
}

/**
 * The `tinker://` paths (sampler weights and saved state) the checkpoint records under `dataDir`
 * name, in the canonical `tinker://<run>/<weights|sampler_weights>/<name>` form.
 * @example
 * const paths = await recordedTinkerPaths('.policyloop/tinker');
 */
export async function recordedTinkerPaths(dataDir: string): Promise<Set<string>> {
  const paths = new Set<string>();
  const visit = async (directory: string): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(directory, { withFileTypes: true });
    } catch {
      return;
    }
    await Promise.all(
      entries.map(async (entry) => {
        const full = path.join(directory, entry.name);
        if (entry.isDirectory()) return visit(full);
        if (entry.name !== TINKER_CHECKPOINT_FILE) return;
        try {
          const record = JSON.parse(await readFile(full, 'utf8')) as Partial<TinkerCheckpointRecord>;
          if (typeof record.samplerPath === 'string') paths.add(canonicalTinkerPath(record.samplerPath));
          if (typeof record.statePath === 'string') paths.add(canonicalTinkerPath(record.statePath));
        } catch {
          // Not a record this code wrote: it names nothing.
        }
      }),
    );
  };
  await visit(path.resolve(dataDir));
  return paths;
}

/** SkyRL records sampler weights as `tinker://<run>/<name>`; its listing, as hosted Tinker, as `tinker://<run>/sampler_weights/<name>`. */
function canonicalTinkerPath(tinkerPath: string): string {
  return tinkerPath.replace(/^tinker:\/\/([^/]+)\/(?!sampler_weights\/|weights\/)/, 'tinker://$1/sampler_weights/');
}
