/**
 * The declarations of `policyloop health`, `models`, `checkpoints` and `jobs`: their arguments,
 * options and help; `resources.ts` runs them.
 */
import type { Command } from 'commander';
import { type CommandContext, withClient, withCommonOptions } from '../declaration.js';

/** Loads the handlers when a command runs (not for `--help`). */
const handlers = () => import('./resources.js');

/** Adds `health` (does the service answer) to the program. */
export function declareHealth(context: CommandContext): Command {
  return withCommonOptions(context.program.command('health').description('Check that the service answers')).action(
    withClient(context, async (client, options) => (await handlers()).health(client, options)),
  );
}

/** Adds `models list|create|delete` to the program. */
export function declareModels(context: CommandContext): Command {
  const models = context.program.command('models').description('List, create and delete models');
  withCommonOptions(models.command('list').description('List the models of a local service, newest first'))
    .option('--project <project>', 'only this project')
    .option('--name <name>', 'only this name')
    .option('--entity <entity>', 'only this entity')
    .option('--limit <n>', 'at most this many')
    .action(withClient(context, async (client, options) => (await handlers()).listModels(client, options)));
  withCommonOptions(models.command('create').description('Get or create a model').argument('<project/name>'))
    .requiredOption('--base-model <model>', 'the base model to train from, e.g. policyloop/tiny-chat')
    .option('--entity <entity>', 'the owning entity (default: the service’s for the key)')
    .action(
      withClient(context, async (client, options, reference: string) =>
        (await handlers()).createModel(client, reference, options as never),
      ),
    );
  withCommonOptions(
    models
      .command('delete')
      .description('Delete a model and its checkpoints')
      .argument('<model>', 'model id or project/name'),
  ).action(
    withClient(context, async (client, options, reference: string) =>
      (await handlers()).deleteModel(client, reference, options),
    ),
  );
  return models;
}

/** Adds `checkpoints list|delete` to the program. */
export function declareCheckpoints(context: CommandContext): Command {
  const checkpoints = context.program.command('checkpoints').description("List and delete a model's checkpoints");
  withCommonOptions(
    checkpoints.command('list').description('List checkpoints by step').argument('<model>', 'model id or project/name'),
  ).action(
    withClient(context, async (client, options, reference: string) =>
      (await handlers()).listCheckpoints(client, reference, options),
    ),
  );
  withCommonOptions(
    checkpoints
      .command('delete')
      .description('Delete checkpoints by step')
      .argument('<model>', 'model id or project/name'),
  )
    .requiredOption('--steps <steps>', 'comma-separated steps, e.g. 1,2')
    .action(
      withClient(context, async (client, options, reference: string) =>
        (await handlers()).deleteCheckpoints(client, reference, options as never),
      ),
    );
  return checkpoints;
}

/** Adds `jobs get|events` to the program. */
export function declareJobs(context: CommandContext): Command {
  const jobs = context.program.command('jobs').description('Look at training jobs');
  withCommonOptions(jobs.command('get').description('Show a job').argument('<job-id>')).action(
    withClient(context, async (client, options, jobId: string) => (await handlers()).getJob(client, jobId, options)),
  );
  withCommonOptions(jobs.command('events').description("Print a job's events").argument('<job-id>'))
    .option('-f, --follow', 'wait for new events until the job ends; exit 0 when it ended, 1 when it failed')
    .action(
      withClient(context, async (client, options, jobId: string) =>
        (await handlers()).jobEvents(client, jobId, options),
      ),
    );
  return jobs;
}
