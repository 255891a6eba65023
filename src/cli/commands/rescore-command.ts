/** The declaration of `policyloop rescore`: its argument, options and help; `rescore.ts` runs it. */
import type { Command } from 'commander';
import type { CommandContext } from '../declaration.js';
import type { RescoreCommandOptions } from './rescore.js';

/** Adds `rescore` (saved evaluation rows scored again, without the model) to the program. */
export function declareRescore(context: CommandContext): Command {
  return context.program
    .command('rescore')
    .summary("Score a saved evaluation again with an environment's current rubric, without calling the model")
    .description(
      "Recompute the rewards, rubric metrics and pass@k of an evaluation folder's results.jsonl with its " +
        "environment's current rubric (loaded again from metadata.json's env_id and env_args), or another " +
        "environment's (--env), into DIR/rescore-N (the next free N). The model is never called; the original " +
        'files are not touched.',
    )
    .argument('<dir>', 'an evaluation folder (the --out of policyloop eval)')
    .option('--env <env>', 'score with this environment instead (a file or a package name)')
    .option('--env-args <json>', "the environment's arguments, a JSON object (with --env)")
    .option('--threshold <t>', "a rollout is correct when its reward >= t (default: the evaluation's)")
    .option('--json', 'print the numbers as one JSON object')
    .action(async (directory: string, options: RescoreCommandOptions) => {
      const { rescoreCommand } = await import('./rescore.js');
      context.setExitCode(await rescoreCommand(directory, options));
    });
}
