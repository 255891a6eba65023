/**
 * The HTTP transport of the Tinker client (what the SDK's `InternalClientHolder` gives its
 * clients): one request to `{base}/api/v1/<route>` with the key and the SDK's headers, JSON or
 * protobuf bodies, a timeout per attempt, and retries of a missing answer, a 5xx or a 429.
 */
import { APIConnectionError, APIConnectionTimeoutError, APIError } from '../../client/errors.js';
import { retryDelay } from '../../client/retry-delay.js';
import { delay } from '../../internal/delay.js';
import { userAbortError } from '../../internal/errors.js';

/** The SDK version this client speaks as (the server may check it). */
export const TINKER_SDK_VERSION = '0.25.0';
/** The content type of protobuf bodies. */
export const PROTO = 'application/x-protobuf';

/** A request body: JSON, or protobuf bytes. */
export type Body = { readonly json: unknown } | { readonly protobuf: Uint8Array };

/** How the transport reaches the server (the part of `TinkerClientOptions` it uses). */
export interface HttpSettings {
  /** The server, without `/api/v1` (e.g. `http://127.0.0.1:8000`). */
  readonly baseURL: string;
  /** The key, sent as `X-API-Key`. */
  readonly apiKey: string;
  /** `fetch` to use. @default globalThis.fetch */
  readonly fetch?: typeof globalThis.fetch | undefined;
  /** Time allowed for one HTTP request that is not a long poll, in milliseconds. @default 60_000 */
  readonly timeout?: number | undefined;
  /** Retries of a request that got no answer, a 5xx or a 429. @default 4 */
  readonly maxRetries?: number | undefined;
  /** First wait before a retry, in milliseconds (doubling after, at most 8 s). @default 500 */
  readonly retryDelay?: number | undefined;
}

/** What one request may set besides its method, route and body. */
export interface SendOptions {
  readonly signal?: AbortSignal | undefined;
  /** Retries allowed. @default the settings' `maxRetries` (0 for a POST without an idempotency key) */
  readonly retries?: number | undefined;
  /** Sent as `X-Idempotency-Key`; lets a POST be retried. */
  readonly idempotencyKey?: string | undefined;
  /** The protobuf body is zstd-compressed. */
  readonly compressed?: boolean | undefined;
  /** Time allowed for one attempt, in milliseconds. @default the settings' `timeout` */
  readonly timeout?: number | undefined;
  /** @default 'application/json' */
  readonly accept?: string | undefined;
  readonly headers?: Record<string, string> | undefined;
  /** Resolve with the response whatever its status (no retry of 5xx and 429 either). */
  readonly raw?: boolean | undefined;
}

type Method = 'GET' | 'POST' | 'DELETE';

/** Whether `error` is an abort or a timeout of `fetch`. */
function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || error.name === 'TimeoutError');
}

/** `value` when it is a string. */
export function stringOrUndefined(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** A response's body as JSON, else as text; undefined when empty. */
export async function readBody(response: Response): Promise<unknown> {
  const text = await response.text().catch(() => '');
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * Requests to one Tinker server.
 * @example
 * const http = new TinkerHttp({ baseURL: 'http://127.0.0.1:8000', apiKey: 'tml-local' });
 * const flags = await http.json('POST', 'client/config', { sdk_version: TINKER_SDK_VERSION }, {});
 */
export class TinkerHttp {
  /** The server's API root, ending in `/api/v1`. */
  readonly apiURL: string;
  /** First wait before a retry, in milliseconds (the futures back off from it too). */
  readonly firstRetryDelay: number;
  private readonly fetchImpl: typeof globalThis.fetch;
  private readonly timeout: number;
  private readonly maxRetries: number;

  /** @param settings The server, its key, and the transport's limits. */
  constructor(private readonly settings: HttpSettings) {
    this.apiURL = `${settings.baseURL.replace(/\/+$/, '').replace(/\/api\/v1$/, '')}/api/v1`;
    this.fetchImpl = settings.fetch ?? globalThis.fetch;
    this.timeout = settings.timeout ?? 60_000;
    this.maxRetries = settings.maxRetries ?? 4;
    this.firstRetryDelay = settings.retryDelay ?? 500;
  }

  /**
   * Sends one request and parses its JSON answer (`{}` for 204 or an empty body). `protobuf`
   * sends `body` as the protobuf bytes it is.
   */
  async json(
    method: Method,
    route: string,
    body: unknown,
    options: Omit<SendOptions, 'raw'> & { readonly protobuf?: boolean | undefined },
  ): Promise<unknown> {
    const response = await this.send(
      method,
      route,
      body === undefined ? undefined : options.protobuf ? { protobuf: body as Uint8Array } : { json: body },
      options,
    );
    if (response.status === 204) return {};
    const text = await response.text();
    return text === '' ? {} : (JSON.parse(text) as unknown);
  }

  /**
   * Sends one request, retrying a missing answer, a 5xx or a 429 (a POST only with an idempotency
   * key). Resolves with the response (2xx, or any status when `raw`); throws the `APIError` of
   * other statuses.
   */
  async send(method: Method, route: string, body: Body | undefined, options: SendOptions): Promise<Response> {
    const url = `${this.apiURL}/${route}`;
    const { headers, payload } = this.request(body, options);
    const retriesAllowed =
      method !== 'POST' || options.idempotencyKey !== undefined ? (options.retries ?? this.maxRetries) : 0;
    const timeout = options.timeout ?? this.timeout;
    for (let attempt = 0; ; attempt += 1) {
      if (options.signal?.aborted) throw userAbortError(options.signal, `Tinker ${route}`);
      const attemptTimeout = AbortSignal.timeout(timeout);
      const signal = options.signal ? AbortSignal.any([options.signal, attemptTimeout]) : attemptTimeout;
      let response: Response;
      try {
        response = await this.fetchImpl(url, { method, headers, body: payload ?? null, signal, redirect: 'follow' });
      } catch (error) {
        if (options.signal?.aborted) throw userAbortError(options.signal, `Tinker ${route}`);
        const failure = attemptTimeout.aborted
          ? new APIConnectionTimeoutError({
              cause: error,
              timeout,
              message: `Tinker ${route} timed out: no response within ${timeout} ms from ${url}.`,
            })
          : new APIConnectionError({
              cause: error,
              message: `Tinker ${route}: no response from ${url} (${error instanceof Error && error.cause instanceof Error ? error.cause.message : isAbort(error) ? 'aborted' : String(error)}). Is the Tinker server running at ${this.settings.baseURL}?`,
            });
        if (attempt >= retriesAllowed) throw failure;
        await delay(retryDelay(attempt + 1, undefined, this.firstRetryDelay), options.signal);
        continue;
      }
      if (response.ok || options.raw) return response;
      const retryable = response.status === 429 || response.status >= 500;
      if (retryable && attempt < retriesAllowed) {
        await response.body?.cancel().catch(() => undefined);
        await delay(retryDelay(attempt + 1, response.headers, this.firstRetryDelay), options.signal);
        continue;
      }
      const errorBody = await readBody(response);
      throw APIError.generate(response.status, errorBody, `Tinker ${route} failed`, response.headers);
    }
  }

  /** The headers and payload of a request. */
  private request(
    body: Body | undefined,
    options: SendOptions,
  ): { headers: Record<string, string>; payload: BodyInit | undefined } {
    const headers: Record<string, string> = {
      'X-API-Key': this.settings.apiKey,
      Accept: options.accept ?? 'application/json',
      'User-Agent': `policyloop (Tinker SDK protocol ${TINKER_SDK_VERSION})`,
      ...options.headers,
    };
    let payload: BodyInit | undefined;
    if (body && 'json' in body) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body.json);
    } else if (body) {
      headers['Content-Type'] = PROTO;
      if (options.compressed) headers['Content-Encoding'] = 'zstd';
      payload = body.protobuf as unknown as BodyInit;
    }
    if (options.idempotencyKey) headers['X-Idempotency-Key'] = options.idempotencyKey;
    return { headers, payload };
  }
}
