/**
 * Starts a real local service on loopback in a fresh data directory and calls it over HTTP.
 * Every JSON response is checked against both OpenAPI documents on the way (a mismatch throws),
 * so each test also proves the wire contract for the operations it touches.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, type ServeHandle, type ServeOptions } from '../../../src/server/index.js';
import { checkResponse } from './openapi-responses.js';

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

/** A running test server. */
export interface TestServer {
  readonly handle: ServeHandle;
  readonly dataDir: string;
  /** How many responses were checked against a contract document so far. */
  readonly contractChecks: () => number;
  /** Which `document METHOD template status` were checked so far (see `declaredResponses`). */
  readonly checkedOperations: () => ReadonlySet<string>;
  call<T = any>(method: string, path: string, options?: CallOptions): Promise<CallResult<T>>;
  /** Closes the server (idempotent); `removeData` deletes the data directory too. */
  close(removeData?: boolean): Promise<void>;
}

/** A fresh temporary directory. */
export function temporaryDirectory(prefix = 'policyloop-server-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Starts a service with `options` (port 0 and a fresh data directory unless given). */
export async function startServer(options: ServeOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? temporaryDirectory();
  const handle = await serve({ port: 0, ...options, dataDir });
  let checks = 0;
  const operations = new Set<string>();
  let closed = false;
  return {
    handle,
    dataDir,
    contractChecks: () => checks,
    checkedOperations: () => operations,
    async call(method, path, callOptions = {}) {
      const headers: Record<string, string> = { ...callOptions.headers };
      const auth = callOptions.auth ?? true;
      if (auth !== false) headers['authorization'] = `Bearer ${auth === true ? handle.apiKey : auth}`;
      let body: string | undefined = callOptions.raw;
      if (callOptions.body !== undefined) {
        body = JSON.stringify(callOptions.body);
        headers['content-type'] ??= 'application/json';
      }
      const response = await fetch(`${handle.url}${path}`, {
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
        await handle.close();
      }
      if (removeData && options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
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
