/** The declaration of `policyloop chat`: its arguments, options and help; `chat.ts` runs it. */
import type { Command } from 'commander';
import { type CommandContext, withClient, withCommonOptions } from '../declaration.js';

/** Adds `chat` (one chat completion from a model) to the program. */
export function declareChat(context: CommandContext): Command {
  return withCommonOptions(
    context.program
      .command('chat')
      .description('One chat completion from a model, printing the reply')
      .argument('<model>', 'model id, project/name, or an inference name')
      .argument('<prompt>', 'the user message'),
  )
    .option('--step <n>', 'a checkpoint step (default: the latest)')
    .option('--max-tokens <n>', 'longest reply, in tokens')
    .option('--temperature <t>', 'sampling temperature')
    .option('--system <text>', 'a system message before the prompt')
    .action(
      withClient(context, async (client, options, reference: string, prompt: string) =>
        (await import('./chat.js')).chat(client, reference, prompt, options),
      ),
    );
}
