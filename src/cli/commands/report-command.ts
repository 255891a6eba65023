/** The declaration of `policyloop report`: its argument, options and help; `report.ts` runs it. */
import type { Command } from 'commander';
import { type CommandContext, withClient, withCommonOptions } from '../declaration.js';

/** Adds `report` (one HTML file with the curves and sample trajectories) to the program. */
export function declareReport(context: CommandContext): Command {
  return withCommonOptions(
    context.program
      .command('report')
      .description('Write one self-contained HTML file with the curves and sample trajectories')
      .argument('<model>', 'model id or project/name'),
  )
    .requiredOption('-o, --output <file>', 'the HTML file to write')
    .option('--samples <n>', 'trajectories per split (default 4)')
    .option('--data-dir <dir>', 'read history.jsonl from here when the service keeps no history (hosted)')
    .action(
      withClient(context, async (client, options, reference: string) =>
        (await import('./report.js')).report(client, reference, options as never),
      ),
    );
}
