/** The declaration of `policyloop eval`: its argument, options and help; `eval.ts` runs it. */
import type { Command } from 'commander';
import { DEFAULT_DATA_DIR } from '../../internal/env.js';
import { type CommandContext, collect } from '../declaration.js';
import type { EvalOptions } from './eval.js';

/** Adds `eval` (a model, or several side by side, measured on an environment) to the program. */
export function declareEval(context: CommandContext): Command {
  return context.program
    .command('eval')
    .summary("Measure a model (or several, side by side) on an environment's eval tasks: reward, rubric, pass@k")
    .description(
      "Evaluate models on the first tasks of an environment's evalDataset: each task -r times, -c rollouts in " +
        'flight. Prints reward mean and std, each rubric function, the error count, pass@k and pass^k; writes ' +
        'results.jsonl and metadata.json after every group (several models: one subfolder each). The model runs ' +
        'on the embedded local service (--data-dir), or at any OpenAI-compatible endpoint with --base-url. ' +
        'Ctrl-C stops and keeps what finished: the same command with --resume DIR in place of --out DIR finishes it.',
    )
    .argument('<env>', 'the environment: a file (.ts, .js, .mjs) or a package name, as loadEnvironment takes it')
    .option(
      '-m, --model <name>',
      'a model: a base model (policyloop/tiny-chat), a trained model project/name[:stepN], or a name the --base-url endpoint serves; repeat to compare',
      collect,
    )
    .option(
      '--base-url <url>',
      'an OpenAI-compatible endpoint (e.g. https://api.openai.com/v1) instead of the local service',
    )
    .option('--api-key <key>', "the endpoint's key (default: $OPENAI_API_KEY)")
    .option('--data-dir <dir>', "the embedded local service's data directory", DEFAULT_DATA_DIR)
    .option('-n, --examples <n>', 'the first n tasks of evalDataset (default: all)')
    .option('-r, --rollouts-per-example <r>', 'rollouts of each task (pass@k for k = 1, 2, 4, ... up to r; default: 1)')
    .option('-c, --concurrency <c>', 'rollouts in flight', '8')
    .option('--env-args <json>', 'arguments of the environment, a JSON object (loadEnvironment(env, args))')
    .option('--threshold <t>', 'a rollout is correct (pass@k) when its reward >= t (default: 0.5)')
    .option('--temperature <t>', 'sampling temperature of every model call')
    .option('--max-tokens <n>', 'longest reply of every model call, in tokens')
    .option('--timeout <seconds>', 'limit of one rollout; past it the rollout is an error row (default: 300)')
    .option('--out <dir>', 'the folder to write (default: evals/<env>-<date>)')
    .option('--resume <dir>', 'finish the run in this folder (the same command, --resume in place of --out)')
    .option('--json', 'print the numbers as JSON lines, one object per model')
    .action(async (env: string, options: EvalOptions) => {
      const { evalCommand } = await import('./eval.js');
      context.setExitCode(await evalCommand(env, options));
    });
}
