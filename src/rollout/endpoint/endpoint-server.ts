/**
 * The per-rollout endpoint's HTTP side: one listener per process on 127.0.0.1, started by the first
 * gather that can forward (it has a model) and closed with the last. Each rollout that asks for
 * `context.endpoint` gets its own URL prefix (`/rollouts/<id>`); a call under it is answered by the
 * rollout's model (through its recording `fetch`, in the rollout's async context, so it lands in
 * that rollout's trajectory as an in-process captured call would). Its key is random per process
 * and is never the training key.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorBody } from '../translate/translation-error.js';

/** How one rollout's calls are answered. */
export interface EndpointRoute {
  /** A name for messages (`rollout 3 of group 1 (attempt 0)`). */
  readonly name: string;
  /** Aborts when the rollout is cancelled or times out: so do its calls in flight. */
  readonly signal: AbortSignal;
  /**
   * Answers a call: `api` and the parsed JSON `body` (for `GET /models`, `body` is undefined).
   * Runs in the rollout's async context.
   */
  answer(request: EndpointCall): Promise<Response>;
}

/** One call to a rollout's endpoint. */
export interface EndpointCall {
  /** What was called. */
  readonly api: 'chat' | 'responses' | 'messages' | 'models';
  /** The JSON body (absent for `GET /models`). */
  readonly body: Record<string, unknown> | undefined;
  /** Aborts when the caller hangs up, or the rollout is cancelled or times out. */
  readonly signal: AbortSignal;
}

/** Ended rollouts remembered for their 410 (older ones, past this many, get 404 like unknown ids). */
const ENDED_NAMES = 16_384;
/** The largest request body read, in bytes. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** The most time a caller may take to send its request body. */
const BODY_TIMEOUT_MS = 60_000;

/** The shared listener while gathers use it. */
let shared: EndpointServer | undefined;

/**
 * The process's endpoint server. Use {@link EndpointServer.acquire} / `release()` around a gather,
 * `register()` / `end()` around a rollout.
 */
export class EndpointServer {
  /** The key every call must carry (`Authorization: Bearer` or `x-api-key`). */
  readonly key = `pl-endpoint-${randomBytes(24).toString('base64url')}`;
  readonly #server: Server;
  #origin = '';
  #users = 0;
  #next = 1;
  readonly #active = new Map<string, EndpointRoute>();
  readonly #ended = new Map<string, string>();
  /** Settles once the listener listens (and `origin` is known). */
  readonly #ready: Promise<void>;

  private constructor() {
    this.#server = createServer((request, response) => {
      this.#handle(request, response).catch(() => {
        if (!response.headersSent) this.#json(response, 500, 'chat', 'The rollout endpoint failed to answer');
        else response.destroy();
      });
    });
    // Keep-alive connections of finished children must not hold the process open.
    this.#server.unref();
    this.#ready = this.#listen();
    this.#ready.catch(() => undefined);
  }

  async #listen(): Promise<void> {
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    this.#origin = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /**
   * The process's listener, started if needed; counts a user until {@link release}.
   * @example
   * const server = await EndpointServer.acquire();
   * try { ... } finally { await server.release(); }
   */
  static async acquire(): Promise<EndpointServer> {
    let server = shared;
    if (server === undefined) {
      server = new EndpointServer();
      shared = server;
    }
    server.#users += 1;
    try {
      await server.#ready;
    } catch (error) {
      if (shared === server) shared = undefined;
      throw error;
    }
    return server;
  }

  /** `http://127.0.0.1:<port>`. */
  get origin(): string {
    return this.#origin;
  }

  /** Stops counting one user; the last one closes the listener (and drops every connection). */
  async release(): Promise<void> {
    this.#users -= 1;
    if (this.#users > 0) return;
    if (shared === this) shared = undefined;
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  /** Gives `route` a path of its own: returns its id (`/rollouts/<id>`). */
  register(route: EndpointRoute): string {
    // A counter (for people) and a random part: one rollout's agent cannot guess another's path.
    const id = `${this.#next}-${randomBytes(6).toString('hex')}`;
    this.#next += 1;
    this.#active.set(id, route);
    return id;
  }

  /** The rollout `id` ended: its calls get 410 from now on. */
  end(id: string): void {
    const route = this.#active.get(id);
    if (route === undefined) return;
    this.#active.delete(id);
    this.#ended.set(id, route.name);
    if (this.#ended.size > ENDED_NAMES) this.#ended.delete(this.#ended.keys().next().value as string);
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const target = request.url ?? '/';
    const query = target.indexOf('?');
    const pathname = query < 0 ? target : target.slice(0, query);
    const match = /^\/rollouts\/([^/]+)(\/.*)?$/.exec(pathname);
    const rest = (match?.[2] ?? '').replace(/\/+$/, '');
    const api = apiOf(request.method ?? 'GET', rest);
    const shape = api === 'messages' || request.headers['anthropic-version'] !== undefined ? 'messages' : 'chat';
    if (!this.#authorized(request)) {
      this.#json(
        response,
        401,
        shape,
        'Expected the rollout endpoint key (context.endpoint.apiKey) as a bearer key or x-api-key, got another',
      );
      return;
    }
    if (match === null) {
      this.#json(response, 404, shape, `No rollout path: expected /rollouts/<id>/v1/..., got ${pathname}`);
      return;
    }
    const id = match[1] as string;
    const route = this.#active.get(id);
    if (route === undefined) {
      const name = this.#ended.get(id);
      if (name !== undefined)
        this.#json(response, 410, shape, `The ${name} has ended: its endpoint (/rollouts/${id}) answers no more calls`);
      else this.#json(response, 404, shape, `No rollout ${id} in this process (or it ended long ago)`);
      return;
    }
    if (api === undefined) {
      this.#json(
        response,
        404,
        shape,
        `${request.method} ${rest || '/'} is not served: a rollout endpoint answers POST /v1/chat/completions, ` +
          'POST /v1/responses, POST /v1/messages and GET /v1/models',
      );
      return;
    }
    let body: Record<string, unknown> | undefined;
    if (api !== 'models') {
      const text = await readBody(request);
      if (text === undefined) {
        this.#json(response, 413, shape, `Expected a request body of at most ${MAX_BODY_BYTES} bytes, got more`);
        return;
      }
      try {
        const parsed: unknown = JSON.parse(text);
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
        body = parsed as Record<string, unknown>;
      } catch {
        this.#json(response, 400, shape, 'Expected a JSON object as the request body, got something else');
        return;
      }
    }
    // One controller a call: the caller hanging up, or the rollout ending early, aborts it.
    const stop = new AbortController();
    const onClose = (): void => {
      if (!response.writableFinished) stop.abort(new Error('the caller hung up'));
    };
    const onRolloutAbort = (): void => stop.abort(route.signal.reason);
    response.once('close', onClose);
    if (route.signal.aborted) onRolloutAbort();
    else route.signal.addEventListener('abort', onRolloutAbort, { once: true });
    try {
      let answer: Response;
      try {
        answer = await route.answer({ api, body, signal: stop.signal });
      } catch (error) {
        if (response.destroyed) return;
        const message = error instanceof Error ? error.message : String(error);
        this.#json(response, 502, shape, `The model's endpoint could not be reached: ${message}`);
        return;
      }
      await send(answer, response, stop.signal);
    } finally {
      route.signal.removeEventListener('abort', onRolloutAbort);
      response.off('close', onClose);
    }
  }

  #authorized(request: IncomingMessage): boolean {
    const bearer = request.headers.authorization;
    if (bearer === `Bearer ${this.key}`) return true;
    return request.headers['x-api-key'] === this.key;
  }

  #json(response: ServerResponse, status: number, shape: 'chat' | 'messages', message: string): void {
    const text = JSON.stringify(errorBody(shape, status, message));
    response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    response.end(text);
  }
}

/** What a method and path (after `/rollouts/<id>`) call, or undefined for what is not served. */
function apiOf(method: string, rest: string): EndpointCall['api'] | undefined {
  if (method === 'GET' && rest === '/v1/models') return 'models';
  if (method !== 'POST') return undefined;
  if (rest === '/v1/chat/completions') return 'chat';
  if (rest === '/v1/responses') return 'responses';
  if (rest === '/v1/messages') return 'messages';
  return undefined;
}

/** The request body as text, or undefined past {@link MAX_BODY_BYTES}; rejects on hang-up or past {@link BODY_TIMEOUT_MS}. */
async function readBody(request: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  const timer = setTimeout(() => request.destroy(new Error('the request body took too long')), BODY_TIMEOUT_MS);
  try {
    for await (const chunk of request) {
      const bytes = chunk as Buffer;
      size += bytes.length;
      if (size > MAX_BODY_BYTES) return undefined;
      chunks.push(bytes);
    }
  } finally {
    clearTimeout(timer);
  }
  return chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8');
}

/**
 * Sends `answer` to the caller: a JSON (or any non-stream) body in one write with its length, an
 * event stream as it comes.
 */
async function send(answer: Response, response: ServerResponse, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string | number> = {};
  for (const name of ['content-type', 'x-request-id', 'cache-control']) {
    const value = answer.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  if (answer.body === null || !(answer.headers.get('content-type') ?? '').includes('text/event-stream')) {
    let text: string;
    try {
      text = await answer.text();
    } catch {
      response.destroy();
      return;
    }
    headers['content-length'] = Buffer.byteLength(text);
    response.writeHead(answer.status, headers);
    response.end(text);
    return;
  }
  response.writeHead(answer.status, headers);
  const reader = answer.body.getReader();
  const cancel = (): void => {
    reader.cancel().catch(() => undefined);
  };
  signal.addEventListener('abort', cancel, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!response.write(value)) await once(response, 'drain', { signal });
    }
    response.end();
  } catch {
    response.destroy();
  } finally {
    signal.removeEventListener('abort', cancel);
  }
}
