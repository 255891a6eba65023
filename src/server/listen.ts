/** Listens on a TCP port with `@hono/node-server` (a thin adapter around the `fetch` handler). */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import { InvalidArgumentError } from '../internal/errors.js';
import { createApp, type App } from './app.js';
import { errorBody } from './http-error.js';
import { checkAllowedHosts, HostCheck, isLoopbackHost } from './host-check.js';
import { DEV_API_KEY, parseServeOptions, type ServeOptions } from './options.js';

/** A listening service. */
export interface ServeHandle {
  /** `http://HOST:PORT` (no trailing slash). */
  readonly url: string;
  /** `url + '/v1'`: what an OpenAI-compatible client takes as `baseURL`. */
  readonly baseURL: string;
  /** A key the service accepts (the first configured one). */
  readonly apiKey: string;
  /** The port it listens on (the chosen one when asked for port 0). */
  readonly port: number;
  /** The service behind the port. */
  readonly app: App;
  /**
   * Stops listening, lets in-flight requests finish (at most `timeoutMs`, default 10 s), then
   * closes the service (jobs get their terminal events, the store is closed).
   */
  close(timeoutMs?: number): Promise<void>;
}

/**
 * Starts the local service and listens on `host:port` (default `127.0.0.1:8000`; port 0 picks a
 * free port). Refuses to listen beyond loopback with the public development key unless
 * `allowPublicDevKey` is set, and answers only requests whose `Host` is one of its names
 * (see `allowedHosts`).
 * @example
 * const server = await serve({ port: 0, dataDir: '/tmp/policyloop' });
 * const client = new OpenAI({ baseURL: server.baseURL, apiKey: server.apiKey });
 * await server.close();
 */
export async function serve(options?: ServeOptions): Promise<ServeHandle> {
  const { host, port, allowPublicDevKey, allowedHosts, ...appOptions } = parseServeOptions(options);
  checkAllowedHosts(allowedHosts);
  // The development key is in the docs: beyond loopback anyone could train, sample and delete.
  if (appOptions.apiKeys.includes(DEV_API_KEY) && !isLoopbackHost(host) && !allowPublicDevKey)
    throw new InvalidArgumentError(
      'host',
      `Refusing to listen on ${host} with the public development key (${DEV_API_KEY}): anyone who can reach the port could use it. ` +
        'Configure your own key (`apiKeys`, `--api-key` or POLICYLOOP_API_KEY), listen on 127.0.0.1, ' +
        'or opt in with `allowPublicDevKey: true` (`--allow-public-dev-key`).',
    );
  const hosts = new HostCheck(host, allowedHosts);
  const app = await createApp(appOptions);
  let stopping = false;
  const answer = async (request: Request): Promise<Response> => {
    // A request without Host (HTTP/1.0) is for the address it reached.
    const hostHeader = request.headers.get('host') ?? new URL(request.url).host;
    const response = hosts.allows(hostHeader) ? await app.fetch(request) : misdirected(hostHeader, hosts);
    // While closing, tell the client not to reuse the connection (it is about to be closed).
    if (stopping) {
      try {
        response.headers.set('connection', 'close');
      } catch {
        // Immutable headers: the finish hook below still closes the connection.
      }
    }
    return response;
  };
  const server = createAdaptorServer({ fetch: answer, hostname: host }) as Server;
  try {
    await new Promise<void>((resolveListen, rejectListen) => {
      server.once('error', rejectListen);
      server.listen(port, host, () => {
        server.off('error', rejectListen);
        resolveListen();
      });
    });
  } catch (error) {
    await app.close();
    throw error;
  }
  // Once closing, a keep-alive connection that finishes its response is closed at once, rather
  // than held open until the client's keep-alive timer (seconds) lets `server.close` finish.
  server.on('request', (_request, response) => {
    response.once('finish', () => {
      if (stopping) setImmediate(() => server.closeIdleConnections());
    });
  });
  const address = server.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${urlHost}:${address.port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    baseURL: `${url}/v1`,
    apiKey: appOptions.apiKeys[0] ?? DEV_API_KEY,
    port: address.port,
    app,
    close(timeoutMs = 10_000): Promise<void> {
      closing ??= (async () => {
        stopping = true;
        await new Promise<void>((resolveClose) => {
          const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
          server.close(() => {
            clearTimeout(timer);
            resolveClose();
          });
          server.closeIdleConnections();
        });
        // Requests still running after their connections were cut get a short grace.
        await app.close(1_000);
      })();
      return closing;
    },
  };
}

/** The answer to a request whose `Host` is not one of the service's names (421 Misdirected Request). */
function misdirected(hostHeader: string, hosts: HostCheck): Response {
  const shown = JSON.stringify(hostHeader.length > 100 ? `${hostHeader.slice(0, 100)}...` : hostHeader);
  return Response.json(
    errorBody(
      421,
      `This service does not answer the host name ${shown}: it answers ${hosts.describe()} (any port). ` +
        'To serve another name, add it with --allowed-host NAME (the `allowedHosts` option).',
    ),
    { status: 421 },
  );
}
