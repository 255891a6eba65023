/**
 * `policyloop serve [--host 127.0.0.1] [--port 8000] [--data-dir .policyloop] [--api-key KEY ...] [--model DIR ...]`
 * plus the security options (`--allow-public-dev-key`, `--allowed-host`, `--training-data-root`,
 * `--allow-training-data-downloads`, `--allow-training-data-address`; see docs/server.md)
 * (keys default to `POLICYLOOP_API_KEY`, then the development key):
 * runs the local service until SIGINT/SIGTERM, then stops cleanly (in-flight requests finish,
 * jobs get their terminal events, the store is closed).
 */
import { parseArgs } from 'node:util';
import { escapeControl } from '../../internal/control-characters.js';
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
  --allow-public-dev-key
                     Listen beyond loopback even with the public development key (refused
                     otherwise: anyone who can reach the port could use it)
  --allowed-host NAME
                     Also answer requests for this Host name (no port); repeat for several,
                     '*' for any. Default: the --host name, plus localhost, 127.0.0.1 and
                     [::1] on loopback (other names are answered 421)
  --training-data-root DIR
                     A directory whose files SFT jobs may read through file:// URLs; repeat
                     for several (the data directory's own SFT files are always readable)
  --allow-training-data-downloads
                     Let SFT jobs download http(s):// training data (public addresses only)
  --allow-training-data-address ADDR
                     An address or CIDR range (127.0.0.1, 10.0.0.0/8) downloads may reach
                     although it is loopback, private or link-local; repeat for several
  -h, --help         Show this help`;

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
          'allow-public-dev-key': { type: 'boolean', default: false },
          'allowed-host': { type: 'string', multiple: true },
          'training-data-root': { type: 'string', multiple: true },
          'allow-training-data-downloads': { type: 'boolean', default: false },
          'allow-training-data-address': { type: 'string', multiple: true },
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

    const { serve, DEV_API_KEY, isLoopbackHost } = await import('../../server/index.js');
    const publicDevKey = (apiKeys ?? [DEV_API_KEY]).includes(DEV_API_KEY) && !isLoopbackHost(values.host);
    if (publicDevKey && !values['allow-public-dev-key']) {
      process.stderr.write(
        `policyloop serve: refusing to listen on ${escapeControl(values.host)} with the public development key ${DEV_API_KEY}: ` +
          'anyone who can reach the port could train, sample and delete models. Pass --api-key KEY ' +
          `(or set ${ENV.apiKey}), listen on 127.0.0.1, or pass --allow-public-dev-key to do it anyway.\n`,
      );
      return 2;
    }
    let server: Awaited<ReturnType<typeof serve>>;
    try {
      server = await serve({
        host: values.host,
        port,
        dataDir: values['data-dir'],
        apiKeys,
        models: values.model ?? [],
        allowPublicDevKey: values['allow-public-dev-key'],
        allowedHosts: values['allowed-host'],
        trainingDataRoots: values['training-data-root'],
        allowTrainingDataDownloads: values['allow-training-data-downloads'],
        trainingDataAllowedAddresses: values['allow-training-data-address'],
        logger: {
          info: (message) => process.stderr.write(`[policyloop] ${message}\n`),
          warn: (message) => process.stderr.write(`[policyloop] warning: ${message}\n`),
          error: (message) => process.stderr.write(`[policyloop] error: ${message}\n`),
        },
      });
    } catch (error) {
      // A malformed --allowed-host or --allow-training-data-address is a usage error; the rest (a port in use) is not.
      if (!(error instanceof TypeError && error.message.startsWith('Expected '))) throw error;
      process.stderr.write(`policyloop serve: ${escapeControl(error.message)}\n`);
      return 2;
    }
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
    }
    // Opted in with --allow-public-dev-key: say it on every start.
    if (publicDevKey)
      process.stderr.write(
        `policyloop: warning: listening on ${escapeControl(values.host)} with the public development key (--allow-public-dev-key): anyone who can reach the port can use the service\n`,
      );
    // The development key is public, so the link may carry it (in the fragment, which the browser
    // never sends); a key of the user's own is typed into the page's form instead.
    process.stdout.write(
      `dashboard: ${server.url}/${apiKeys === undefined ? `#key=${encodeURIComponent(DEV_API_KEY)}` : ''}\n`,
    );
    return await exited;
  },
};
