/**
 * A loopback HTTP proxy in front of a real service that fails a share of the requests on purpose,
 * each in one of the ways a network or a busy service fails a client: a 503 before the request is
 * forwarded, a connection reset before the service saw the request, a connection reset after the
 * service handled it (the answer is read from the service, then the client's socket is destroyed,
 * so the write happened but the client cannot know), and a delay before forwarding.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** The ways a request is treated. */
export type FaultKind = 'pass' | '503' | 'reset-before' | 'reset-after' | 'delay';

/** Options of {@link startFaultProxy}. */
export interface FaultProxyOptions {
  /** The service's origin, `http://127.0.0.1:PORT`. */
  readonly target: string;
  /** Share of requests that get a fault, split evenly over the four kinds. @default 0.2 */
  readonly faultRate?: number;
  /** Seed of the generator that picks faults (a failure reproduces with the same seed). @default 12 */
  readonly seed?: number;
  /** Shortest and longest delay of a `delay` fault, in milliseconds. @default [50, 300] */
  readonly delayMs?: readonly [number, number];
  /** Which requests may get a fault. @default every request */
  readonly applies?: (method: string, path: string) => boolean;
}

/** A running proxy. */
export interface FaultProxy {
  /** `http://127.0.0.1:PORT` of the proxy. */
  readonly url: string;
  /** How many requests got each treatment. */
  readonly counts: Record<FaultKind, number>;
  close(): Promise<void>;
}

/** Small deterministic generator (mulberry32). */
export function seededRandom(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let value = Math.imul(state ^ (state >>> 15), 1 | state);
    value = (value + Math.imul(value ^ (value >>> 7), 61 | value)) ^ value;
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Starts the proxy on a free loopback port. */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const target = new URL(options.target);
  const rate = options.faultRate ?? 0.2;
  const [minDelay, maxDelay] = options.delayMs ?? [50, 300];
  const next = seededRandom(options.seed ?? 12);
  const counts: Record<FaultKind, number> = { pass: 0, '503': 0, 'reset-before': 0, 'reset-after': 0, delay: 0 };
  const sockets = new Set<Socket>();

  const pick = (method: string, path: string): FaultKind => {
    if (options.applies !== undefined && !options.applies(method, path)) return 'pass';
    const roll = next();
    if (roll >= rate) return 'pass';
    const kinds: FaultKind[] = ['503', 'reset-before', 'reset-after', 'delay'];
    return kinds[Math.min(kinds.length - 1, Math.floor((roll / rate) * kinds.length))] as FaultKind;
  };

  const forward = (
    request: IncomingMessage,
    onResponse: (status: number, headers: IncomingMessage['headers'], body: Buffer) => void,
  ): void => {
    const upstream = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: request.method,
        path: request.url,
        headers: request.headers,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => onResponse(response.statusCode ?? 502, response.headers, Buffer.concat(chunks)));
        response.on('error', () => request.socket.destroy());
      },
    );
    upstream.on('error', () => request.socket.destroy());
    request.pipe(upstream);
  };

  const relay = (response: ServerResponse) => (status: number, headers: IncomingMessage['headers'], body: Buffer) => {
    const { connection: _connection, 'keep-alive': _keepAlive, 'transfer-encoding': _encoding, ...rest } = headers;
    response.writeHead(status, { ...rest, 'content-length': String(body.length) });
    response.end(body);
  };

  const server = createServer((request, response) => {
    const kind = pick(request.method ?? 'GET', new URL(request.url ?? '/', 'http://proxy').pathname);
    counts[kind] += 1;
    switch (kind) {
      case '503':
        // Answered without reading the body: drop the connection afterwards so the unread body cannot confuse the next request.
        response.writeHead(503, { 'content-type': 'application/json', connection: 'close' });
        response.end(JSON.stringify({ detail: 'injected fault: service unavailable' }));
        return;
      case 'reset-before':
        request.socket.destroy();
        return;
      case 'reset-after':
        forward(request, () => request.socket.destroy());
        return;
      case 'delay':
        setTimeout(() => forward(request, relay(response)), minDelay + next() * (maxDelay - minDelay));
        return;
      default:
        forward(request, relay(response));
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
