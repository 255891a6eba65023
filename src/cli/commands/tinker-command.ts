/**
 * The declaration of `policyloop tinker checkpoints list|delete`: the weights a Tinker server
 * keeps, and the ones no checkpoint of a data directory records; `tinker.ts` runs it.
 */
import type { Command } from 'commander';
import { DEFAULT_DATA_DIR } from '../../internal/env.js';
import type { CommandContext } from '../declaration.js';
import type { TinkerCheckpointsOptions } from './tinker.js';

const DEFAULT_TINKER_DATA_DIR = `${DEFAULT_DATA_DIR}/tinker`;

/** Adds `tinker checkpoints list|delete` (a Tinker server's saved weights) to the program. */
export function declareTinker(context: CommandContext): Command {
  const tinker = context.program.command('tinker').description('Look at what a Tinker server keeps');
  const checkpoints = tinker
    .command('checkpoints')
    .description(
      "List and delete a Tinker server's saved weights (sampler weights and resumable state of every training run); " +
        'a checkpoint no record of --data-dir names is marked orphaned (its model was deleted here, or another data directory made it)',
    );
  const withTinkerOptions = (command: Command): Command =>
    command
      .option('--server <url>', 'the Tinker server, without /api/v1 (default: $TINKER_BASE_URL, else hosted Tinker)')
      .option('--api-key <key>', 'its key (default: $TINKER_API_KEY)')
      .option(
        '--data-dir <dir>',
        "the TinkerBackend's dataDir, whose checkpoint records count",
        DEFAULT_TINKER_DATA_DIR,
      )
      .option('--json', 'one JSON line per checkpoint');
  withTinkerOptions(checkpoints.command('list').description("List the server's checkpoints"))
    .option('--orphaned', 'only the checkpoints no record of --data-dir names')
    .action(async (options: TinkerCheckpointsOptions) => {
      const { listTinkerCheckpoints } = await import('./tinker.js');
      context.setExitCode(await listTinkerCheckpoints(options));
    });
  withTinkerOptions(
    checkpoints
      .command('delete')
      .description('Delete checkpoints by their tinker:// path, or every orphaned one')
      .argument('[paths...]', 'tinker://<run>/<weights|sampler_weights>/<name> paths (as `list` prints them)'),
  )
    .option('--orphaned', 'delete every checkpoint no record of --data-dir names')
    .action(async (paths: string[], options: TinkerCheckpointsOptions) => {
      const { deleteTinkerCheckpoints } = await import('./tinker.js');
      context.setExitCode(await deleteTinkerCheckpoints(paths, options));
    });
  return tinker;
}
