/**
 * `policyloop rescore DIR [--env <env>]`: the rows of an evaluation folder scored again with its
 * environment's current rubric (or another environment's), without the model, into
 * `DIR/rescore-N`.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { METADATA_FILE } from '../../environments/eval-files.js';
import { outJson, UsageError } from '../context.js';
import { asUsageError, loadForCommand, parseEnvArgs, printResults } from './eval.js';
import { finiteNumber } from './resources.js';

/** Options of `rescore` (declared in `rescore-command.ts`, parsed by commander). */
export interface RescoreCommandOptions {
  env?: string | undefined;
  envArgs?: string | undefined;
  threshold?: string | undefined;
  json?: boolean | undefined;
}

/** The `rescore` subcommand; resolves to the exit code. */
export async function rescoreCommand(directory: string, options: RescoreCommandOptions): Promise<number> {
  if (!existsSync(path.join(directory, METADATA_FILE))) {
    throw new UsageError(
      `${directory} holds no evaluation (no ${METADATA_FILE}): give the --out folder of policyloop eval`,
    );
  }
  if (options.envArgs !== undefined && options.env === undefined) {
    throw new UsageError("--env-args goes with --env (without it, the evaluation's own env_args are used)");
  }
  const threshold = options.threshold === undefined ? undefined : finiteNumber('--threshold', options.threshold);
  const environment =
    options.env === undefined ? undefined : await loadForCommand(options.env, parseEnvArgs(options.envArgs));
  const { rescore } = await import('../../environments/rescore.js');
  let result: Awaited<ReturnType<typeof rescore>>;
  try {
    result = await rescore(directory, { environment, envId: options.env, threshold });
  } catch (error) {
    throw asUsageError(error);
  }
  if (options.json) {
    outJson({ ...result.metadata, out_dir: result.outDir });
    return 0;
  }
  const { metadata } = result;
  printResults(
    [{ label: metadata.model, metadata, outDir: result.outDir }],
    `rescored with ${metadata.env_id}: ${metadata.num_examples} task(s) x ${metadata.rollouts_per_example} rollout(s), correct at reward >= ${metadata.threshold}`,
  );
  return 0;
}
