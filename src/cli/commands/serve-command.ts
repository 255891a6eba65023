/** The declaration of `policyloop serve`: its options and help; `serve.ts` runs it. */
import type { Command } from 'commander';
import { DEFAULT_DATA_DIR } from '../../internal/env.js';
import { type CommandContext, collect } from '../declaration.js';
import type { ServeOptions } from './serve.js';

/** Adds `serve` (the local service and its dashboard) to the program. */
export function declareServe(context: CommandContext): Command {
  return context.program
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
      const { serveCommand } = await import('./serve.js');
      context.setExitCode(await serveCommand(options));
    });
}
