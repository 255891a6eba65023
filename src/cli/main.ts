#!/usr/bin/env node
/**
 * The `policyloop` command, parsed by commander. Each command's module is loaded only when it
 * runs, so `policyloop --help` does not load the service or the engine. Exit codes: 0 success,
 * 1 the operation failed, 2 a usage error.
 * @module
 */
import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, Option } from 'commander';
import type { TrainingClient } from '../client/index.js';
import { DEFAULT_DATA_DIR } from '../internal/env.js';
import type { ExportOptions } from './commands/export.js';
import type { ServeOptions } from './commands/serve.js';
import type { CommonOptions } from './context.js';

/** The package's version, for `--version`. */
function packageVersion(): string {
  return (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
}

const COMMON_HELP = `
Connection (every command but serve):
  --base-url URL   the training API (default: $POLICYLOOP_BASE_URL, else the hosted service)
  --api-key KEY    its key (default: $POLICYLOOP_API_KEY, else $WANDB_API_KEY)
  --json           machine-readable output (JSON lines for lists and streams)`;

/** Adds `--base-url`, `--api-key` and `--json` to a command that talks to a service. */
function withCommonOptions(command: Command): Command {
  return command
    .option('--base-url <url>', 'the training API (default: $POLICYLOOP_BASE_URL, else the hosted service)')
    .option('--api-key <key>', 'its key (default: $POLICYLOOP_API_KEY, else $WANDB_API_KEY)')
    .option('--json', 'machine-readable output (JSON lines for lists and streams)');
}

/** Collects the values of a repeatable option (`--model a --model b`) in order. */
function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** Builds the program; `run` receives each action's exit code. */
function buildProgram(setExitCode: (code: number) => void): Command {
  const program = new Command('policyloop');
  program
    .usage('<command> [options]')
    .description('Train LLM agents with RL: the local service, and a look at models, jobs, metrics and trajectories.')
    .version(packageVersion(), '-v, --version')
    .addOption(new Option('--base-url <url>', 'the training API').hideHelp())
    .addOption(new Option('--api-key <key>', 'its key').hideHelp())
    .enablePositionalOptions()
    .exitOverride()
    .showHelpAfterError()
    .addHelpText(
      'after',
      `${COMMON_HELP}\n\nRun \`policyloop <command> --help\` for a command's options; docs/cli.md has examples.`,
    );

  /** The connection options of `command`: its own, else the program's (given before the command). */
  const common = (command: Command): CommonOptions => {
    const own = command.opts<CommonOptions>();
    const global = program.opts<CommonOptions>();
    return { baseUrl: own.baseUrl ?? global.baseUrl, apiKey: own.apiKey ?? global.apiKey, json: own.json };
  };
  /** Runs `work` with a client made from the command's options. */
  const withClient =
    <A extends unknown[]>(
      work: (client: TrainingClient, options: CommonOptions & Record<string, never>, ...args: A) => Promise<number>,
    ) =>
    async (...args: unknown[]): Promise<void> => {
      const command = args.at(-1) as Command;
      const positional = args.slice(0, -2) as A;
      const options = { ...command.opts(), ...common(command) } as CommonOptions & Record<string, never>;
      const { makeClient } = await import('./context.js');
      setExitCode(await work(makeClient(options), options, ...positional));
    };

  program
    .command('serve')
    .summary('Run the local training service and its dashboard on loopback')
    .description(
      'Run the local training service (the training API, an OpenAI-compatible inference API and a ' +
        'dashboard at http://HOST:PORT/, whose address it prints).',
    )
    .option('--host <host>', 'Interface to listen on', '127.0.0.1')
    .option('--port <port>', 'Port to listen on; 0 picks a free port', '8000')
    .option('--data-dir <dir>', 'Directory of the store and weight files', DEFAULT_DATA_DIR)
    .option(
      '--api-key <key>',
      'Accepted Bearer key; repeat for several (default: $POLICYLOOP_API_KEY, else the development key). ' +
        'The variable keeps the key out of ps.',
      collect,
    )
    .option(
      '--model <dir>',
      'A Hugging Face model folder to serve (Llama or Qwen3); repeat for several. Models in the Hugging Face ' +
        'cache (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub) are served without it.',
      collect,
    )
    .option(
      '--allow-public-dev-key',
      'Listen beyond loopback even with the public development key (refused otherwise: anyone who can reach ' +
        'the port could use it)',
    )
    .option(
      '--allowed-host <name>',
      "Also answer requests for this Host name (no port); repeat for several, '*' for any. Default: the " +
        '--host name, plus localhost, 127.0.0.1 and [::1] on loopback (other names are answered 421)',
      collect,
    )
    .option(
      '--training-data-root <dir>',
      "A directory whose files SFT jobs may read through file:// URLs; repeat for several (the data directory's " +
        'own SFT files are always readable)',
      collect,
    )
    .option('--allow-training-data-downloads', 'Let SFT jobs download http(s):// training data (public addresses only)')
    .option(
      '--print-openapi',
      'Write the OpenAPI document of the service these options start (what GET /openapi.json answers) to stdout and exit; nothing listens',
    )
    .option(
      '--allow-training-data-address <addr>',
      'An address or CIDR range (127.0.0.1, 10.0.0.0/8) downloads may reach although it is loopback, private ' +
        'or link-local; repeat for several',
      collect,
    )
    .action(async (options: ServeOptions) => {
      const { serveCommand } = await import('./commands/serve.js');
      setExitCode(await serveCommand(options));
    });

  program
    .command('export')
    .summary('Write a checkpoint of a Hugging Face base model as a PEFT adapter (or merged model)')
    .description(
      'Write a checkpoint of a model trained on a Hugging Face base model (Llama, Qwen3) to a folder: its ' +
        "LoRA adapter in PEFT's format (PeftModel.from_pretrained, vLLM --enable-lora), or with --merged the " +
        'whole model with the adapter merged in (transformers, vLLM without LoRA). Reads the local ' +
        "service's data directory (the service may be running).",
    )
    .argument(
      '<model>',
      'a model id, project/name or entity/project/name; :step picks a checkpoint (default: the latest)',
    )
    .requiredOption('--out <dir>', 'Folder to write (created if needed)')
    .option('--merged', 'Write the merged model (config, float32 weights, tokenizer files)', false)
    .option('--data-dir <dir>', "The service's data directory", DEFAULT_DATA_DIR)
    .option(
      '--model <dir>',
      'A base model folder given to `serve --model`; repeat for several (a folder the model was trained on is found by its path without it)',
      collect,
    )
    .option(
      '--base <dir>',
      'The base model folder to use, when it is no longer where the model was trained on it (moved, or another copy)',
    )
    .action(async (reference: string, options: ExportOptions) => {
      const { exportCommand } = await import('./commands/export.js');
      setExitCode(await exportCommand(reference, options));
    });

  withCommonOptions(program.command('health').description('Check that the service answers')).action(
    withClient(async (client, options) => (await import('./commands/resources.js')).health(client, options)),
  );

  const models = program.command('models').description('List, create and delete models');
  withCommonOptions(models.command('list').description('List the models of a local service, newest first'))
    .option('--project <project>', 'only this project')
    .option('--name <name>', 'only this name')
    .option('--entity <entity>', 'only this entity')
    .option('--limit <n>', 'at most this many')
    .action(
      withClient(async (client, options) => (await import('./commands/resources.js')).listModels(client, options)),
    );
  withCommonOptions(models.command('create').description('Get or create a model').argument('<project/name>'))
    .requiredOption('--base-model <model>', 'the base model to train from, e.g. policyloop/tiny-chat')
    .option('--entity <entity>', 'the owning entity (default: the service’s for the key)')
    .action(
      withClient(async (client, options, reference: string) =>
        (await import('./commands/resources.js')).createModel(client, reference, options as never),
      ),
    );
  withCommonOptions(
    models
      .command('delete')
      .description('Delete a model and its checkpoints')
      .argument('<model>', 'model id or project/name'),
  ).action(
    withClient(async (client, options, reference: string) =>
      (await import('./commands/resources.js')).deleteModel(client, reference, options),
    ),
  );

  const checkpoints = program.command('checkpoints').description("List and delete a model's checkpoints");
  withCommonOptions(
    checkpoints.command('list').description('List checkpoints by step').argument('<model>', 'model id or project/name'),
  ).action(
    withClient(async (client, options, reference: string) =>
      (await import('./commands/resources.js')).listCheckpoints(client, reference, options),
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
      withClient(async (client, options, reference: string) =>
        (await import('./commands/resources.js')).deleteCheckpoints(client, reference, options as never),
      ),
    );

  const jobs = program.command('jobs').description('Look at training jobs');
  withCommonOptions(jobs.command('get').description('Show a job').argument('<job-id>')).action(
    withClient(async (client, options, jobId: string) =>
      (await import('./commands/resources.js')).getJob(client, jobId, options),
    ),
  );
  withCommonOptions(jobs.command('events').description("Print a job's events").argument('<job-id>'))
    .option('-f, --follow', 'wait for new events until the job ends; exit 0 when it ended, 1 when it failed')
    .action(
      withClient(async (client, options, jobId: string) =>
        (await import('./commands/resources.js')).jobEvents(client, jobId, options),
      ),
    );

  withCommonOptions(
    program
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
      withClient(async (client, options, reference: string) =>
        (await import('./commands/history.js')).history(client, reference, options),
      ),
    );

  withCommonOptions(
    program
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
      withClient(async (client, options, reference: string, prompt: string) =>
        (await import('./commands/chat.js')).chat(client, reference, prompt, options),
      ),
    );

  withCommonOptions(
    program
      .command('report')
      .description('Write one self-contained HTML file with the curves and sample trajectories')
      .argument('<model>', 'model id or project/name'),
  )
    .requiredOption('-o, --output <file>', 'the HTML file to write')
    .option('--samples <n>', 'trajectories per split (default 4)')
    .option('--data-dir <dir>', 'read history.jsonl from here when the service keeps no history (hosted)')
    .action(
      withClient(async (client, options, reference: string) =>
        (await import('./commands/report.js')).report(client, reference, options as never),
      ),
    );

  return program;
}

/**
 * Runs the CLI with `argv` (without the node and script paths) and resolves to the exit code:
 * 0 success, 1 the operation failed (one line on stderr says why), 2 a usage error.
 * @example
 * process.exitCode = await main(['models', 'list', '--json']);
 */
export async function main(argv: readonly string[]): Promise<number> {
  let exitCode = 0;
  const program = buildProgram((code) => {
    exitCode = code;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and --version end with code 0; every parse error is a usage error.
      return error.exitCode === 0 ? 0 : 2;
    }
    const { errorLine, UsageError } = await import('./context.js');
    process.stderr.write(`policyloop: ${errorLine(error)}\n`);
    return error instanceof UsageError ? 2 : 1;
  }
}

/** True when this file is the process's entry script (also through npm's `bin` symlink). */
function isEntryScript(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

// Run only when executed as a script (not when imported by tests).
if (isEntryScript()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    async (error: unknown) => {
      const { errorLine } = await import('./context.js');
      process.stderr.write(`policyloop: ${errorLine(error)}\n`);
      process.exitCode = 1;
    },
  );
}
