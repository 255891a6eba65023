/**
 * `policyloop serve [--host 127.0.0.1] [--port 8000] [--data-dir .policyloop] [--api-key KEY ...] [--model DIR ...]`
 * (keys default to `POLICYLOOP_API_KEY`, then the development key):
 * runs the local service until SIGINT/SIGTERM, then stops cleanly (in-flight requests finish,
 * jobs get their terminal events, the store is closed).
 */
import { parseArgs } from 'node:util';
import { ENV, readEnv } from '../../internal/env.js';
import type { Command } from '../command.js';

const HELP = `Usage: policyloop serve [options]

Run the local training service (the training API, an OpenAI-compatible inference API and a
dashboard at http://HOST:PORT/, whose address it prints).

Options:
  --host HOST        Interface to listen on (default 127.0.0.1)
  --port PORT        Port to listen on; 0 picks a free port (default 8000)
  --data-dir DIR     Directory of the store and weight files (default .policyloop)
  --api-key KEY      Accepted Bearer key; repeat for several (default: $POLICYLOOP_API_KEY,
                     else the development key). The variable keeps the key out of ps.
  --model DIR        A Hugging Face model folder to serve (Llama or Qwen3); repeat for several.
                     Models in the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub,
                     ~/.cache/huggingface/hub) are served without it.
  -h, --help         Show this help`;

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '::1']);

/** The `serve` subcommand. */
export const serveCommand: Command = {
  async run(argv) {
    let values;
    try {
      ({ values } = parseArgs({
        args: [...argv],
        options: {
          host: { type: 'string', default: '127.0.0.1' },
          port: { type: 'string', default: '8000' },
          'data-dir': { type: 'string', default: '.policyloop' },
          'api-key': { type: 'string', multiple: true },
          model: { type: 'string', multiple: true },
          help: { type: 'boolean', short: 'h', default: false },
        },
        allowPositionals: false,
        strict: true,
      }));
    } catch (error) {
      process.stderr.write(`policyloop serve: ${error instanceof Error ? error.message : String(error)}\n\n${HELP}\n`);
      return 2;
    }
    if (values.help) {
      process.stdout.write(`${HELP}\n`);
      return 0;
    }
    const port = Number(values.port);
    if (!/^\d+$/.test(values.port) || port > 65_535) {
      process.stderr.write(
        `policyloop serve: expected --port between 0 and 65535, got ${JSON.stringify(values.port)}\n`,
      );
      return 2;
    }
    const fromEnvironment = readEnv(ENV.apiKey);
    const apiKeys = values['api-key'] ?? (fromEnvironment === undefined ? undefined : [fromEnvironment]);
    if (apiKeys?.some((key) => key === '')) {
      process.stderr.write('policyloop serve: expected a non-empty --api-key\n');
      return 2;
    }

    const { serve, DEV_API_KEY } = await import('../../server/index.js');
    const server = await serve({
      host: values.host,
      port,
      dataDir: values['data-dir'],
      apiKeys,
      models: values.model ?? [],
      logger: {
        info: (message) => process.stderr.write(`[policyloop] ${message}\n`),
        warn: (message) => process.stderr.write(`[policyloop] warning: ${message}\n`),
        error: (message) => process.stderr.write(`[policyloop] error: ${message}\n`),
      },
    });
    // Signal handlers first: a supervisor may send SIGTERM as soon as it reads the ready line.
    const exited = new Promise<number>((resolveExit) => {
      let stopping = false;
      const stop = (signal: NodeJS.Signals): void => {
        if (stopping) {
          // A second signal means "now": skip the clean shutdown.
          process.stderr.write(`policyloop: ${signal} again, exiting without waiting\n`);
          process.exit(1);
        }
        stopping = true;
        process.stderr.write(`policyloop: ${signal}, stopping\n`);
        server.close().then(
          () => resolveExit(0),
          (error: unknown) => {
            process.stderr.write(
              `policyloop: error while stopping: ${error instanceof Error ? error.message : String(error)}\n`,
            );
            resolveExit(1);
          },
        );
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
    process.stdout.write(`policyloop listening on ${server.url}\n`);
    if (values['api-key'] === undefined && fromEnvironment !== undefined) {
      process.stdout.write(`using the API key from ${ENV.apiKey}\n`);
    } else if (apiKeys === undefined) {
      process.stdout.write(`using the development API key ${DEV_API_KEY} (pass --api-key KEY to set your own)\n`);
      // The development key is public: reachable beyond this machine, anyone could train and read files.
      if (!LOOPBACK_HOSTS.has(values.host))
        process.stderr.write(
          `policyloop: warning: listening on ${values.host} with the public development key; pass --api-key KEY\n`,
        );
    }
    // The development key is public, so the link may carry it (in the fragment, which the browser
    // never sends); a key of the user's own is typed into the page's form instead.
    process.stdout.write(
      `dashboard: ${server.url}/${apiKeys === undefined ? `#key=${encodeURIComponent(DEV_API_KEY)}` : ''}\n`,
    );
    return await exited;
  },
};
