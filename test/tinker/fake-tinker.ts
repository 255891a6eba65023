/**
 * A scripted Tinker server behind an injected `fetch`, for the fast tier: it answers
 * `client/config` (with the flags a test gives) and `create_session` itself, hands every other
 * request to the test's handler, and records each request with its body bytes exactly as sent.
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { vi } from 'vitest';
import { DType, ForwardBackwardOutputSchema } from '../../src/backends/tinker/proto/tinker_public_pb.js';
import { TinkerClient } from '../../src/backends/tinker/index.js';
import type { TinkerClientOptions } from '../../src/backends/tinker/index.js';

/** The server this fake pretends to be. */
export const BASE_URL = 'http://tinker.test:8000';

/** One request as the server would see it. */
export interface WireRequest {
  readonly method: string;
  /** The path after `/api/v1/`, e.g. `retrieve_future`. */
  readonly route: string;
  readonly url: string;
  readonly headers: Headers;
  /** The body's bytes exactly as sent (empty when none). */
  readonly body: Uint8Array;
  readonly signal: AbortSignal | undefined;
  /** The body parsed as JSON. */
  json(): Record<string, unknown>;
}

/** What the handler answers: a response, or an error for `fetch` to throw (no answer at all). */
export type Handler = (request: WireRequest) => Response | Error | Promise<Response | Error>;

/** A JSON response. */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
}

/** A protobuf response, as `retrieve_future` gives sample and forward/backward results. */
export function protobuf(bytes: Uint8Array): Response {
  return new Response(bytes as unknown as BodyInit, { headers: { 'content-type': 'application/x-protobuf' } });
}

/** A forward_backward output of one batched record, as SkyRL and hosted Tinker send it. */
export function forwardBackwardOutput(rows: number[][], metrics: Record<string, number> = {}): Uint8Array {
  const data = Buffer.alloc(rows.flat().length * 4);
  rows.flat().forEach((value, index) => data.writeFloatLE(value, index * 4));
  const offsets = Buffer.alloc((rows.length + 1) * 8);
  let offset = 0;
  rows.forEach((row, index) => {
    offset += row.length * 4;
    offsets.writeBigInt64LE(BigInt(offset), (index + 1) * 8);
  });
  return toBinary(
    ForwardBackwardOutputSchema,
    create(ForwardBackwardOutputSchema, {
      lossFnOutputType: 'scalar',
      metrics,
      lossFnOutputs: [
        {
          numDatums: BigInt(rows.length),
          fields: {
            logprobs: { data: new Uint8Array(data), offsets: new Uint8Array(offsets), dtype: DType.DTYPE_FLOAT32 },
          },
        },
      ],
    }),
  );
}

/** The answer to a submitted mutating call: its future. */
export function future(requestId: string): Response {
  return json({ request_id: requestId, status: 'pending' });
}

/** A promise with its resolver outside. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/**
 * A fake Tinker server as a `fetch`: `client/config` answers `flags`, `create_session` answers
 * `session_1`, and every other request goes to `handler`.
 */
export function fakeTinker(handler: Handler, flags: Record<string, unknown> = {}) {
  const requests: WireRequest[] = [];
  const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = String(input);
    const raw = init?.body;
    const body =
      typeof raw === 'string'
        ? new TextEncoder().encode(raw)
        : raw instanceof Uint8Array
          ? new Uint8Array(raw)
          : new Uint8Array();
    const request: WireRequest = {
      method: init?.method ?? 'GET',
      route: url.slice(url.indexOf('/api/v1/') + '/api/v1/'.length),
      url,
      headers: new Headers(init?.headers),
      body,
      signal: init?.signal ?? undefined,
      json: () => JSON.parse(new TextDecoder().decode(body)) as Record<string, unknown>,
    };
    requests.push(request);
    if (init?.signal?.aborted) throw init.signal.reason;
    let reply: Response | Error;
    if (request.route === 'client/config') reply = json(flags);
    else if (request.route === 'create_session') reply = json({ type: 'create_session', session_id: 'session_1' });
    else reply = await handler(request);
    if (reply instanceof Error) throw reply;
    return reply;
  });
  return {
    fetch: fetch as unknown as typeof globalThis.fetch,
    requests,
    /** The requests sent to one route, in order. */
    to: (route: string) => requests.filter((request) => request.route === route),
  };
}

/** A `fetch` promise that never settles unless its signal aborts, like a long poll that gets no answer. */
export function hang(request: WireRequest): Promise<Response> {
  return new Promise((_, reject) => {
    request.signal?.addEventListener('abort', () => reject(request.signal?.reason));
  });
}

/** A client on the fake server, opened (flags read, session created). */
export async function openClient(
  server: ReturnType<typeof fakeTinker>,
  options: Partial<TinkerClientOptions> = {},
): Promise<TinkerClient> {
  const client = new TinkerClient({ baseURL: BASE_URL, apiKey: 'tml-test', fetch: server.fetch, ...options });
  await client.open();
  return client;
}

/** Settles `promise` into its value or its error, so that a rejection is never unhandled while timers advance. */
export function settle<T>(promise: Promise<T>): Promise<T | unknown> {
  return promise.then(
    (value) => value,
    (error: unknown) => error,
  );
}
