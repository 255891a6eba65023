/** The declaration of `policyloop history`: its argument, options and help; `history.ts` runs it. */
import type { Command } from 'commander';
import { type CommandContext, withClient, withCommonOptions } from '../declaration.js';

/** Adds `history` (the latest metrics per step) to the program. */
export function declareHistory(context: CommandContext): Command {
  return withCommonOptions(
    context.program
      .command('history')
      .description('The latest metrics per step')
      .argument('<model>', 'model id or project/name'),
  )
    .option('--split <split>', 'only this split (train, val, sft, ...)')
    .option(
      '--metric <name...>',
      'only these metrics (val/reward, or reward for every split); repeat or comma-separate',
    )
    .option('--data-dir <dir>', 'read history.jsonl from here when the service keeps no history (hosted)')
    .action(
      withClient(context, async (client, options, reference: string) =>
        (await import('./history.js')).history(client, reference, options),
      ),
    );
}
