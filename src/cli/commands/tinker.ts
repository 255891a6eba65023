/**
 * `policyloop tinker checkpoints list [--orphaned]` and `policyloop tinker checkpoints delete
 * [paths...] [--orphaned]`: a Tinker server's saved weights (`listServerCheckpoints` of
 * `policyloop/tinker`), each marked orphaned when no checkpoint record of the data directory
 * names it, and their deletion.
 */
import { HOSTED_TINKER_URL } from '../../backends/tinker/defaults.js';
import { ENV, readEnv } from '../../internal/env.js';
import { out, outJson, table, UsageError } from '../context.js';

/** Options of `tinker checkpoints list|delete` (declared in `tinker-command.ts`). */
export interface TinkerCheckpointsOptions {
  /** The Tinker server. @default $TINKER_BASE_URL, else hosted Tinker */
  server?: string | undefined;
  /** Its key. @default $TINKER_API_KEY */
  apiKey?: string | undefined;
  /** The TinkerBackend's data directory. @default '.policyloop/tinker' */
  dataDir: string;
  /** Only (list) or every (delete) orphaned checkpoint. */
  orphaned?: boolean | undefined;
  /** JSON lines. */
  json?: boolean | undefined;
}

async function open(options: TinkerCheckpointsOptions) {
  const server = (options.server ?? readEnv(ENV.tinkerBaseURL) ?? HOSTED_TINKER_URL).replace(/\/+$/, '');
  const apiKey = options.apiKey ?? readEnv(ENV.tinkerApiKey);
  if (apiKey === undefined && server === HOSTED_TINKER_URL)
    throw new UsageError(
      'No API key for hosted Tinker: set TINKER_API_KEY or pass --api-key (or --server for a self-hosted one)',
    );
  const { TinkerClient, listServerCheckpoints } = await import('../../tinker.js');
  // The REST calls need no session (no heartbeat is started).
  const client = new TinkerClient({ baseURL: server, apiKey: apiKey ?? 'tml-policyloop-self-hosted', maxRetries: 2 });
  return { client, server, list: () => listServerCheckpoints(client, { dataDir: options.dataDir }) };
}

/** `tinker checkpoints list`; returns the exit code. */
export async function listTinkerCheckpoints(options: TinkerCheckpointsOptions): Promise<number> {
  const { client, list } = await open(options);
  try {
    const checkpoints = (await list()).filter((checkpoint) => options.orphaned !== true || checkpoint.orphaned);
    if (options.json === true) {
      for (const checkpoint of checkpoints) outJson(checkpoint);
      return 0;
    }
    if (checkpoints.length === 0) {
      out(options.orphaned === true ? 'no orphaned checkpoints' : 'no checkpoints');
      return 0;
    }
    out(
      table(
        ['tinker_path', 'type', 'time', 'orphaned'],
        checkpoints.map((checkpoint) => [
          checkpoint.tinkerPath,
          checkpoint.checkpointType,
          checkpoint.time ?? '',
          checkpoint.orphaned ? 'yes' : 'no',
        ]),
      ),
    );
    return 0;
  } finally {
    await client.close();
  }
}

/** `tinker checkpoints delete`; returns the exit code (1 when a deletion failed). */
export async function deleteTinkerCheckpoints(
  paths: readonly string[],
  options: TinkerCheckpointsOptions,
): Promise<number> {
  if ((paths.length === 0) === (options.orphaned !== true))
    throw new UsageError('Give the tinker:// paths to delete, or --orphaned (not both)');
  const { client, list } = await open(options);
  try {
    const targets =
      options.orphaned === true
        ? (await list()).filter((checkpoint) => checkpoint.orphaned).map((checkpoint) => checkpoint.tinkerPath)
        : paths;
    let failed = 0;
    for (const target of targets) {
      try {
        const deleted = await client.deleteCheckpoint(target);
        if (options.json === true) outJson({ tinkerPath: target, deleted });
        else out(`${deleted ? 'deleted' : 'already gone'} ${target}`);
      } catch (error) {
        failed += 1;
        process.stderr.write(
          `policyloop tinker: could not delete ${target}: ${error instanceof Error ? error.message : String(error)}\n`,
        );
      }
    }
    if (targets.length === 0 && options.json !== true) out('no orphaned checkpoints');
    return failed === 0 ? 0 : 1;
  } finally {
    await client.close();
  }
}
