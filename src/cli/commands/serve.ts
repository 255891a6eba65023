/**
 * `policyloop serve [--host 127.0.0.1] [--port 8000] [--data-dir .policyloop] [--api-key KEY ...] [--model DIR ...] [--print-openapi]`
 * plus the security options (`--allow-public-dev-key`, `--allowed-host`, `--training-data-root`,
 * `--allow-training-data-downloads`, `--allow-training-data-address`; see docs/server.md)
 * (keys default to `POLICYLOOP_API_KEY`, then the development key):
 * runs the local service until SIGINT/SIGTERM, then stops cleanly (in-flight requests finish,
 * jobs get their terminal events, the store is closed).
 */
import { escapeControl } from '../../internal/control-characters.js';
import { ENV, readEnv } from '../../internal/env.js';
import { InvalidArgumentError } from '../../internal/errors.js';
import { describeEngineRuntime } from '../../engine/onnx/onnx-runtime.js';

/** The options of `policyloop serve`, as commander parsed them (`serve-command.ts` declares them). */
export interface ServeOptions {
  /** `--host`: the interface to listen on. */
  host: string;
  /** `--port`: the port, as typed (checked here). */
  port: string;
  /** `--data-dir`: the store and weight files. */
  dataDir: string;
  /** `--api-key` (repeatable): accepted Bearer keys. */
  apiKey?: string[] | undefined;
  /** `--model` (repeatable): Hugging Face model folders to serve. */
  model?: string[] | undefined;
  /** `--allow-public-dev-key`. */
  allowPublicDevKey?: boolean | undefined;
  /** `--allowed-host` (repeatable). */
  allowedHost?: string[] | undefined;
  /** `--training-data-root` (repeatable). */
  trainingDataRoot?: string[] | undefined;
  /** `--allow-training-data-downloads`. */
  allowTrainingDataDownloads?: boolean | undefined;
  /** `--allow-training-data-address` (repeatable). */
  allowTrainingDataAddress?: string[] | undefined;
  /** `--print-openapi`: write the service's OpenAPI document and exit. */
  printOpenapi?: boolean | undefined;
}

/**
 * Runs `policyloop serve` with its parsed options until SIGINT/SIGTERM; resolves to the exit code
 * (2 for a bad port, an empty key, the public development key beyond loopback, or a --model folder
 * the engine cannot serve). With `--print-openapi` it writes the service's OpenAPI document and
 * returns 0 without listening.
 */
export async function serveCommand(values: ServeOptions): Promise<number> {
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port) || port > 65_535) {
    process.stderr.write(`policyloop serve: expected --port between 0 and 65535, got ${JSON.stringify(values.port)}\n`);
    return 2;
  }
  const fromEnvironment = readEnv(ENV.apiKey);
  const apiKeys = values.apiKey ?? (fromEnvironment === undefined ? undefined : [fromEnvironment]);
  if (apiKeys?.some((key) => key === '')) {
    process.stderr.write('policyloop serve: expected a non-empty --api-key\n');
    return 2;
  }

  const { serve, DEV_API_KEY, isLoopbackHost, openApiDocument } = await import('../../server/index.js');
  if (values.printOpenapi === true) {
    try {
      const document = await openApiDocument({
        host: values.host,
        port,
        dataDir: values.dataDir,
        models: values.model ?? [],
        trainingDataRoots: values.trainingDataRoot,
        allowTrainingDataDownloads: values.allowTrainingDataDownloads === true,
        trainingDataAllowedAddresses: values.allowTrainingDataAddress,
      });
      process.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
      return 0;
    } catch (error) {
      if (!(error instanceof TypeError || error instanceof InvalidArgumentError)) throw error;
      process.stderr.write(`policyloop serve: ${escapeControl(error.message)}\n`);
      return 2;
    }
  }
  const publicDevKey = (apiKeys ?? [DEV_API_KEY]).includes(DEV_API_KEY) && !isLoopbackHost(values.host);
  if (publicDevKey && values.allowPublicDevKey !== true) {
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
      dataDir: values.dataDir,
      apiKeys,
      models: values.model ?? [],
      allowPublicDevKey: values.allowPublicDevKey === true,
      allowedHosts: values.allowedHost,
      trainingDataRoots: values.trainingDataRoot,
      allowTrainingDataDownloads: values.allowTrainingDataDownloads === true,
      trainingDataAllowedAddresses: values.allowTrainingDataAddress,
      logger: {
        info: (message) => process.stderr.write(`[policyloop] ${message}\n`),
        warn: (message) => process.stderr.write(`[policyloop] warning: ${message}\n`),
        error: (message) => process.stderr.write(`[policyloop] error: ${message}\n`),
      },
    });
  } catch (error) {
    // A malformed --allowed-host or --allow-training-data-address, or a --model folder the engine
    // cannot serve, is a usage error; the rest (a port in use) is not.
    const usage =
      (error instanceof TypeError && error.message.startsWith('Expected ')) ||
      (error instanceof InvalidArgumentError && error.argument === 'models');
    if (!usage) throw error;
    process.stderr.write(`policyloop serve: ${escapeControl((error as Error).message)}\n`);
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
  if (values.apiKey === undefined && fromEnvironment !== undefined) {
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
  // What the engine computes on: onnxruntime, or the tfjs-wasm fallback and why.
  const runtime = server.app.engine.runtime?.();
  if (runtime) process.stdout.write(`engine runtime: ${describeEngineRuntime(runtime)}\n`);
  return await exited;
}
