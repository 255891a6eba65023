/**
 * The request engine under every client method: headers, per-attempt timeout, abort, retries
 * with backoff, error mapping and lenient response validation.
 */
import { z } from 'zod';
import { abortReason, delay } from '../internal/delay.js';
import { isRetryableError, userAbortError } from '../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  ResponseValidationError,
} from './errors.js';
import type { RequestOptions } from './options.js';
import { retryDelay } from './retry-delay.js';
import { buildURL } from './url.js';
import { VERSION } from './version.js';

/** HTTP methods the contract uses. */
export type HTTPMethod = 'GET' | 'POST' | 'DELETE';

/** One operation to perform. */
export interface RequestSpec<Output> {
  /** HTTP method. */
  method: HTTPMethod;
  /** Path relative to the base URL, path parameters already encoded: `/preview/models/abc/log`. */
  path: string;
  /** The path as documented, for messages: `/preview/models/{model_id}/log`. */
  template: string;
  /** Base URL override (the inference API has its own). */
  baseURL?: string | undefined;
  /** Query parameters; undefined values are left out. */
  query?: Record<string, string | number | undefined> | undefined;
  /** The JSON body, already validated. */
  body?: unknown;
  /** The JSON body as text, already serialized (and validated by whoever built it); wins over `body`. */
  rawBody?: string | undefined;
  /** Schema of a 2xx body, applied leniently (unknown keys pass). */
  response: z.ZodType<Output>;
  /** Name of that schema, for messages. */
  responseName: string;
  /** Headers of this operation (e.g. `OpenAI-Project`), below the call's own. */
  headers?: Record<string, string> | undefined;
}

/** Settings the transport needs from the client. */
export interface TransportSettings {
  /** Sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** Base URL of the training API, ending in `/v1`. */
  baseURL: string;
  /** Default time per attempt, in milliseconds. */
  timeout: number;
  /** Default retries after the first attempt. */
  maxRetries: number;
  /** Default first backoff step, in milliseconds. */
  retryDelay: number;
  /** The `fetch` to send requests with. */
  fetch: typeof fetch;
  /** Headers sent with every request. */
  defaultHeaders: Record<string, string>;
}

/** Performs requests for the client. Internal: use {@link TrainingClient}. */
export class Transport {
  readonly #settings: TransportSettings;

  /** @param settings The client's resolved settings. */
  constructor(settings: TransportSettings) {
    this.#settings = settings;
  }

  /** Base URL of the training API. */
  get baseURL(): string {
    return this.#settings.baseURL;
  }

  /**
   * Sends the request, retrying where it is safe, and returns the validated body.
   * The last error is thrown unchanged when retries run out (its message says how many attempts).
   */
  async request<Output>(spec: RequestSpec<Output>, requestOptions?: RequestOptions): Promise<Output> {
    const options = checkRequestOptions(requestOptions);
    const timeout = options.timeout ?? this.#settings.timeout;
    const maxRetries = options.maxRetries ?? this.#settings.maxRetries;
    const initialDelay = options.retryDelay ?? this.#settings.retryDelay;
    // A POST without an idempotency key may already have taken effect: never send it twice.
    const mayRetry = spec.method !== 'POST' || options.idempotencyKey !== undefined;
    const operation = `${spec.method} ${new URL(spec.baseURL ?? this.#settings.baseURL).pathname}${spec.template}`;
    const signal = options.signal;
    for (let attempt = 1; ; attempt += 1) {
      if (signal?.aborted) throw userAbortError(signal, 'Request');
      let error: unknown;
      try {
        return await this.#attempt(spec, options, timeout, operation);
      } catch (caught) {
        error = caught;
      }
      const retryable = isRetryableError(error);
      if (!retryable || !mayRetry || attempt > maxRetries) {
        if (retryable && attempt > 1 && error instanceof Error) {
          error.message += ` (gave up after ${attempt} attempts)`;
        }
        throw error;
      }
      const wait = retryDelay(attempt, error instanceof APIError ? error.headers : undefined, initialDelay);
      try {
        await delay(wait, signal);
      } catch {
        throw userAbortError(signal, 'Request (while waiting to retry)');
      }
    }
  }

  /** One attempt: fetch and read the body under one timeout; map failures to our errors. */
  async #attempt<Output>(
    spec: RequestSpec<Output>,
    options: RequestOptions,
    timeout: number,
    operation: string,
  ): Promise<Output> {
    const controller = new AbortController();
    let timedOut = false;
    const onUserAbort = (): void => controller.abort(abortReason(options.signal));
    options.signal?.addEventListener('abort', onUserAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException('The attempt timed out', 'TimeoutError'));
    }, timeout);
    // A fetch that ignores its signal must still not hang the call: race it against the abort.
    const aborted = new Promise<never>((_, reject) => {
      controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
    });
    aborted.catch(() => undefined);
    const failure = (cause: unknown): Error => {
      if (options.signal?.aborted)
        return new APIUserAbortError({ cause: abortReason(options.signal), message: 'Request was aborted.' });
      if (timedOut) return new APIConnectionTimeoutError({ cause, timeout });
      return new APIConnectionError({ cause });
    };
    try {
      let response: Response;
      try {
        response = await Promise.race([
          this.#settings.fetch(buildURL(spec.baseURL ?? this.#settings.baseURL, spec.path, spec.query), {
            method: spec.method,
            headers: this.#headers(spec, options),
            ...(spec.rawBody !== undefined
              ? { body: spec.rawBody }
              : spec.body === undefined
                ? {}
                : { body: JSON.stringify(spec.body) }),
            signal: controller.signal,
          }),
          aborted,
        ]);
      } catch (cause) {
        throw failure(cause);
      }
      let text: string;
      try {
        text = await Promise.race([response.text(), aborted]);
      } catch (cause) {
        throw failure(cause);
      }
      if (!response.ok) {
        throw APIError.generate(response.status, parseErrorBody(text), response.statusText, response.headers);
      }
      return parseSuccess(spec, response, text, operation);
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onUserAbort);
    }
  }

  #headers(spec: RequestSpec<unknown>, options: RequestOptions): Headers {
    const headers = new Headers({
      Accept: 'application/json',
      'User-Agent': `policyloop/${VERSION}`,
      'X-Policyloop-Version': VERSION,
    });
    if (spec.body !== undefined || spec.rawBody !== undefined) headers.set('Content-Type', 'application/json');
    for (const [name, value] of Object.entries(this.#settings.defaultHeaders)) headers.set(name, value);
    for (const [name, value] of Object.entries(spec.headers ?? {})) headers.set(name, value);
    for (const [name, value] of Object.entries(options.headers ?? {})) headers.set(name, value);
    if (options.idempotencyKey !== undefined) headers.set('Idempotency-Key', options.idempotencyKey);
    // Set last so that no header option can leak or replace the key by accident.
    headers.set('Authorization', `Bearer ${this.#settings.apiKey}`);
    return headers;
  }
}

/** The check of {@link RequestOptions}; left-out values fall back to the client's settings. */
const RequestOptionsSchema = optionsSchema<RequestOptions>()({
  signal: option.signal().optional(),
  timeout: option.timeout().optional(),
  maxRetries: option.retryCount().optional(),
  retryDelay: option.retryDelay().optional(),
  headers: z.record(z.string(), z.string()).optional(),
  idempotencyKey: option.nonEmptyString().optional(),
});

const NO_OPTIONS: RequestOptions = Object.freeze({});

/**
 * Checks the per-call options before any request: a bad value, or a key that is no option,
 * rejects with `InvalidArgumentError` naming `options.<name>`, and nothing is sent.
 */
export function checkRequestOptions(value: RequestOptions | undefined): RequestOptions {
  // Most calls pass none: no parse for them.
  if (value === undefined) return NO_OPTIONS;
  return parseOptions(RequestOptionsSchema, value, { prefixed: true });
}

function parseErrorBody(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function parseSuccess<Output>(spec: RequestSpec<Output>, response: Response, text: string, operation: string): Output {
  let json: unknown;
  try {
    json = text.trim() === '' ? null : JSON.parse(text);
  } catch {
    throw new ResponseValidationError({
      operation,
      schema: spec.responseName,
      issues: [],
      rawBody: text,
      status: response.status,
      headers: response.headers,
      message: `Response of ${operation} is not JSON (expected ${spec.responseName}): ${text.slice(0, 80)}`,
    });
  }
  const parsed = spec.response.safeParse(json);
  if (parsed.success) return parsed.data;
  throw new ResponseValidationError({
    operation,
    schema: spec.responseName,
    issues: parsed.error.issues,
    rawBody: text,
    body: json,
    status: response.status,
    headers: response.headers,
  });
}
