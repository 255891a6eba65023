/**
 * A local service in a fresh data directory, called in process through its `fetch` handler
 * ({@link startApp}, what most tests need) or over HTTP on loopback ({@link startServer}, for tests
 * that need a socket: streaming over a real connection, the Host check, clients that go through
 * the network). Both call it the same way, and every JSON response is checked against both
 * published OpenAPI documents and the service's own (`GET /openapi.json`) on the way (a mismatch
 * throws), so each test also proves the wire contract for the operations it touches.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type App,
  createApp,
  DEV_API_KEY,
  serve,
  type ServeHandle,
  type ServeOptions,
  type ServerOptions,
} from 'policyloop/server';
import { afterEach } from 'vitest';
import { checkOwnResponse, checkResponse } from './openapi-responses.js';

/** A response as the tests look at it. */
export interface CallResult<T = any> {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** Parsed JSON body (undefined when the body is not JSON). */
  readonly body: T;
}

/** Options of one call. */
export interface CallOptions {
  /** JSON body (serialized) or raw text. */
  readonly body?: unknown;
  readonly raw?: string;
  /** false: no Authorization header; a string: that key. @default the server's key */
  readonly auth?: boolean | string;
  readonly headers?: Record<string, string>;
}

/** A service under test, however it is reached. */
export interface TestService {
  readonly dataDir: string;
  /** A key the service accepts (the first configured one). */
  readonly apiKey: string;
  /** How many responses were checked against a contract document so far. */
  readonly contractChecks: () => number;
  /** Which `document METHOD template status` were checked so far (see `declaredResponses`). */
  readonly checkedOperations: () => ReadonlySet<string>;
  /** Sends one request with the key (unless `auth: false`), checks a JSON answer against the contract. */
  call<T = any>(method: string, path: string, options?: CallOptions): Promise<CallResult<T>>;
  /** Sends a request as given (no key added, nothing checked); `path` starts with `/`. */
  request(path: string, init?: RequestInit): Promise<Response>;
  /** Closes the service (idempotent); `removeData` deletes the data directory too. */
  close(removeData?: boolean): Promise<void>;
}

/** A service listening on a loopback port. */
export interface TestServer extends TestService {
  readonly handle: ServeHandle;
}

/** A service called in process through its `fetch` handler (no socket). */
export interface TestApp extends TestService {
  readonly app: App;
  /** A `fetch` that the app answers, whatever the URL's origin: for clients that take a `fetch` option. */
  readonly fetch: typeof fetch;
}

/** A fresh temporary directory. */
export function temporaryDirectory(prefix = 'policyloop-server-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Starts a service with `options` listening on loopback (port 0 and a fresh data directory unless given). */
export async function startServer(options: ServeOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? temporaryDirectory();
  const handle = await serve({ port: 0, ...options, dataDir });
  const service = testService({
    dataDir,
    ownsDataDir: options.dataDir === undefined,
    apiKey: handle.apiKey,
    send: (path, init) => fetch(`${handle.url}${path}`, init),
    close: () => handle.close(),
  });
  return { ...service, handle };
}

/**
 * Creates a service with `options` (a fresh data directory unless given) and calls it in process,
 * through `App.fetch`: no port, no socket, no Host check.
 */
export async function startApp(options: ServerOptions = {}): Promise<TestApp> {
  const dataDir = options.dataDir ?? temporaryDirectory();
  const app = await createApp({ ...options, dataDir });
  const service = testService({
    dataDir,
    ownsDataDir: options.dataDir === undefined,
    apiKey: options.apiKeys?.[0] ?? DEV_API_KEY,
    send: (path, init) => app.fetch(new Request(`http://127.0.0.1${path}`, init)),
    close: () => app.close(),
  });
  const answer = (input: string | URL | Request, init?: RequestInit): Promise<Response> =>
    app.fetch(new Request(input, init));
  return { ...service, app, fetch: answer as typeof fetch };
}

/** {@link startApp} and {@link startServer} whose services {@link closedAfterEach} closes. */
export interface ClosedAfterEach {
  readonly startApp: (options?: ServerOptions) => Promise<TestApp>;
  readonly startServer: (options?: ServeOptions) => Promise<TestServer>;
}

/**
 * {@link startApp} and {@link startServer} for one test file, every service they start closed
 * after each test (this call registers the `afterEach`). `defaults` makes options every service
 * starts with, afresh for each (a stand-in engine, say); a call's own options win.
 */
export function closedAfterEach(defaults: () => ServerOptions = () => ({})): ClosedAfterEach {
  const open: TestService[] = [];
  afterEach(async () => {
    for (const service of open.splice(0)) await service.close();
  });
  const track = <T extends TestService>(service: T): T => {
    open.push(service);
    return service;
  };
  return {
    startApp: async (options = {}) => track(await startApp({ ...defaults(), ...options })),
    startServer: async (options = {}) => track(await startServer({ ...defaults(), ...options })),
  };
}

function testService(parts: {
  dataDir: string;
  ownsDataDir: boolean;
  apiKey: string;
  send: (path: string, init?: RequestInit) => Promise<Response>;
  close: () => Promise<void>;
}): TestService {
  const { dataDir, apiKey, send } = parts;
  let checks = 0;
  const operations = new Set<string>();
  let closed = false;
  return {
    dataDir,
    apiKey,
    contractChecks: () => checks,
    checkedOperations: () => operations,
    request: send,
    async call(method, path, callOptions = {}) {
      const headers: Record<string, string> = { ...callOptions.headers };
      const auth = callOptions.auth ?? true;
      if (auth !== false) headers['authorization'] = `Bearer ${auth === true ? apiKey : auth}`;
      let body: string | undefined = callOptions.raw;
      if (callOptions.body !== undefined) {
        body = JSON.stringify(callOptions.body);
        headers['content-type'] ??= 'application/json';
      }
      const response = await send(path, {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
      });
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      if (parsed !== undefined && (response.headers.get('content-type') ?? '').includes('application/json')) {
        const pathname = new URL(path, 'http://local').pathname;
        const own = checkOwnResponse(method, pathname, response.status, parsed);
        if (own !== undefined && own.length > 0)
          throw new Error(
            `${method} ${pathname} ${response.status} does not match the service's own document (GET /openapi.json): ${own.join('; ')}\n${text.slice(0, 2000)}`,
          );
        for (const check of checkResponse(method, pathname, response.status, parsed)) {
          if (!check.checked) continue;
          checks += 1;
          if (check.operation !== undefined) operations.add(check.operation);
          if (check.errors.length > 0) {
            throw new Error(
              `${method} ${pathname} ${response.status} does not match ${check.document}: ${check.errors.join('; ')}\n${text.slice(0, 2000)}`,
            );
          }
        }
      }
      return { status: response.status, headers: response.headers, text, body: parsed as any };
    },
    async close(removeData = true) {
      if (!closed) {
        closed = true;
        await parts.close();
      }
      if (removeData && parts.ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Polls `read` until `done` holds, at most `timeoutMs`. */
export async function waitFor<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 30_000,
  intervalMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`Timed out after ${timeoutMs} ms; last value: ${JSON.stringify(value).slice(0, 1000)}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
