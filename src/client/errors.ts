/**
 * The client's error tree. Everything extends {@link PolicyloopError}:
 *
 * - {@link APIError}: the service answered with a non-2xx status; one subclass per status
 *   (400, 401, 403, 404, 409, 422, 429, >=500), built by {@link APIError.generate};
 * - {@link APIConnectionError} (and its {@link APIConnectionTimeoutError}): no answer came;
 * - {@link APIUserAbortError}: the caller's signal aborted (the one abort error of every layer);
 * - {@link InvalidArgumentError}: a bad argument, caught before any request;
 * - {@link ResponseValidationError}: a 2xx answer that breaks the contract;
 * - {@link MissingApiKeyError}: no key at construction.
 */
import { z } from 'zod';
import { ValidationError } from '../schema/index.js';
import { describeValue } from '../internal/describe-value.js';
import { formatPath, valueAtPath } from '../internal/format-issues.js';
import { isRetryableStatus, PolicyloopError } from '../internal/errors.js';

export { APIUserAbortError, InvalidArgumentError, PolicyloopError } from '../internal/errors.js';

/**
 * The service answered with a non-2xx status. `status`, response `headers`, the parsed `body`
 * (JSON when it parsed, else the text) and the `requestId` (from `x-request-id`) are kept.
 * `retryable` is true for 408, 409, 429 and 5xx.
 * @example
 * try {
 *   await client.jobs.retrieve(jobId);
 * } catch (error) {
 *   if (error instanceof NotFoundError) console.log('no such job', error.requestId);
 * }
 */
export class APIError extends PolicyloopError {
  /** The HTTP status code. */
  readonly status: number;
  /** The response headers. */
  readonly headers: Headers;
  /** The response body: parsed JSON when it was JSON, else its text (`undefined` when empty). */
  readonly body: unknown;
  /** The service's id of this request (`x-request-id`), to quote in bug reports. */
  readonly requestId: string | undefined;

  /**
   * Prefer {@link APIError.generate}, which picks the subclass of the status.
   * @param status The HTTP status code.
   * @param body The parsed response body (JSON, else text; `undefined` when empty).
   * @param message Fallback text (e.g. the status text) when the body says nothing readable.
   * @param headers The response headers.
   */
  constructor(status: number, body: unknown, message: string | undefined, headers: HeadersInit | undefined) {
    super(makeMessage(status, body, message), { retryable: isRetryableStatus(status) });
    this.status = status;
    this.headers = new Headers(headers);
    this.body = body;
    this.requestId = this.headers.get('x-request-id') ?? undefined;
  }

  /**
   * Builds the error subclass that matches `status`: the one factory every non-2xx answer goes
   * through. `message` is a fallback (e.g. the status text) used when the body carries no `detail`.
   * @example
   * const error = APIError.generate(404, { detail: 'Model not found' }, undefined, {});
   * error instanceof NotFoundError; // true
   * error.message; // '404 Model not found'
   */
  static generate(status: number, body: unknown, message?: string, headers?: HeadersInit): APIError {
    if (status === 400) return new BadRequestError(status, body, message, headers);
    if (status === 401) return new AuthenticationError(status, body, message, headers);
    if (status === 403) return new PermissionDeniedError(status, body, message, headers);
    if (status === 404) return new NotFoundError(status, body, message, headers);
    if (status === 409) return new ConflictError(status, body, message, headers);
    if (status === 422) return new UnprocessableEntityError(status, body, message, headers);
    if (status === 429) return new RateLimitError(status, body, message, headers);
    if (status >= 500) return new InternalServerError(status, body, message, headers);
    return new APIError(status, body, message, headers);
  }
}

/** 400: the service could not read the request. */
export class BadRequestError extends APIError {}
/** 401: the API key is missing, wrong or expired. */
export class AuthenticationError extends APIError {}
/** 403: the key is valid but may not do this (e.g. another entity's model). */
export class PermissionDeniedError extends APIError {}
/** 404: no such model, checkpoint or job. */
export class NotFoundError extends APIError {}
/** 409: a conflict, e.g. a model name that exists (register with `return_existing: true` to get it). Retryable. */
export class ConflictError extends APIError {}
/** 429: rate limited. Retryable; the client honours `Retry-After`. */
export class RateLimitError extends APIError {}
/** 5xx: the service failed. Retryable. */
export class InternalServerError extends APIError {}

/**
 * 422: the service rejected the request's shape. `issues` is the parsed `detail` list:
 * each `{loc, msg, type}` says where (`loc` starts with `body`, `query` or `path`) and what.
 * @example
 * if (error instanceof UnprocessableEntityError) {
 *   for (const issue of error.issues) console.log(issue.loc.join('.'), issue.msg);
 * }
 */
export class UnprocessableEntityError extends APIError {
  /** The validation issues from the body's `detail` (empty when the body had none we could read). */
  readonly issues: ValidationError[];

  /** Like {@link APIError}'s; also parses `body.detail` into {@link issues}. */
  constructor(status: number, body: unknown, message: string | undefined, headers: HeadersInit | undefined) {
    super(status, body, message, headers);
    this.issues = parseValidationIssues(body) ?? [];
  }
}

/** Options of the errors raised when no answer came. */
export interface ConnectionErrorOptions {
  /** What failed, e.g. the `fetch` TypeError. */
  cause?: unknown;
  /** Overrides the default message. */
  message?: string | undefined;
}

/**
 * No answer came: DNS, refused connection, reset, TLS... `cause` holds the underlying error.
 * Retryable (but a POST without an idempotency key is still not retried: it may have arrived).
 */
export class APIConnectionError extends PolicyloopError {
  /** @param options The underlying `cause` and an optional message. */
  constructor(options: ConnectionErrorOptions = {}) {
    super(options.message ?? 'Connection error: no response from the training service.', {
      cause: options.cause,
      retryable: true,
    });
  }
}

/** One attempt took longer than its `timeout` (ms) and was cancelled. Retryable. */
export class APIConnectionTimeoutError extends APIConnectionError {
  /** @param options The underlying `cause`, the `timeout` that ran out (ms, for the message) and an optional message. */
  constructor(options: ConnectionErrorOptions & { timeout?: number | undefined } = {}) {
    super({
      cause: options.cause,
      message:
        options.message ??
        (options.timeout === undefined
          ? 'Request timed out.'
          : `Request timed out: no complete response within the ${options.timeout} ms timeout.`),
    });
  }
}

/** What {@link ResponseValidationError} keeps about the response. */
export interface ResponseValidationErrorOptions {
  /** The operation, e.g. `GET /v1/preview/training-jobs/{training_job_id}`. */
  operation: string;
  /** The schema the response should match, e.g. `TrainingJobResponse`. */
  schema: string;
  /** The zod issues (empty when the body was not JSON at all). */
  issues: z.core.$ZodIssue[];
  /** The raw response text. */
  rawBody: string;
  /** The parsed JSON, when it parsed. */
  body?: unknown;
  /** The HTTP status. */
  status: number;
  /** The response headers. */
  headers: Headers;
  /** Overrides the default message (used for non-JSON bodies). */
  message?: string | undefined;
}

/**
 * A 2xx response that violates the contract. The message names the first offending field path
 * and what it held; `issues`, the raw `rawBody`, `status`, `headers` and `requestId` are kept.
 * Not retryable: the same request would get the same answer.
 */
export class ResponseValidationError extends PolicyloopError {
  /** The operation that got the response. */
  readonly operation: string;
  /** The schema the response failed. */
  readonly schema: string;
  /** The path of the first offending field, as in code: `data[0].step`; `(root)` for the whole body. */
  readonly path: string;
  /** The zod issues. */
  readonly issues: z.core.$ZodIssue[];
  /** The response text as received. */
  readonly rawBody: string;
  /** The response body parsed as JSON (`undefined` when it was not JSON). */
  readonly body: unknown;
  /** The HTTP status. */
  readonly status: number;
  /** The response headers. */
  readonly headers: Headers;
  /** The service's id of the request (`x-request-id`). */
  readonly requestId: string | undefined;

  /** @param options The operation, the schema, the zod issues and the response. */
  constructor(options: ResponseValidationErrorOptions) {
    const first = options.issues[0];
    const path = first === undefined ? '(root)' : formatPath(first.path);
    const message =
      options.message ??
      (first === undefined
        ? `Response of ${options.operation} does not match ${options.schema}.`
        : `Response of ${options.operation} does not match ${options.schema}: at ${path}, ${first.message} ` +
          `(got ${describeValue(valueAtPath(options.body, first.path))})` +
          (options.issues.length > 1 ? `; and ${options.issues.length - 1} more issue(s)` : ''));
    super(message);
    this.operation = options.operation;
    this.schema = options.schema;
    this.path = path;
    this.issues = options.issues;
    this.rawBody = options.rawBody;
    this.body = options.body;
    this.status = options.status;
    this.headers = options.headers;
    this.requestId = options.headers.get('x-request-id') ?? undefined;
  }
}

/** No API key was given and none is in the environment. Raised by the client's constructor. */
export class MissingApiKeyError extends PolicyloopError {
  /** The message names the option and both environment variables. */
  constructor() {
    super(
      'No API key: pass `apiKey` to `new TrainingClient({ apiKey })`, or set the POLICYLOOP_API_KEY ' +
        'or WANDB_API_KEY environment variable (POLICYLOOP_API_KEY wins when both are set).',
    );
  }
}

const ValidationIssues = z.array(ValidationError);

function parseValidationIssues(body: unknown): ValidationError[] | undefined {
  if (body === null || typeof body !== 'object' || !('detail' in body)) return undefined;
  const parsed = ValidationIssues.safeParse(body.detail);
  return parsed.success ? parsed.data : undefined;
}

/** `<status> <what the body says>`; 422 lists the first issues; never includes request headers. */
function makeMessage(status: number, body: unknown, fallback: string | undefined): string {
  const issues = parseValidationIssues(body);
  if (issues !== undefined && issues.length > 0) {
    const shown = issues.slice(0, 3).map((issue) => `${issue.loc.join('.')}: ${issue.msg}`);
    const more = issues.length > 3 ? `; and ${issues.length - 3} more` : '';
    return `${status} ${shown.join('; ')}${more}`;
  }
  if (body !== null && typeof body === 'object' && 'detail' in body && typeof body.detail === 'string') {
    return `${status} ${body.detail}`;
  }
  // OpenAI-compatible services and gateways answer `{error: {message}}`, `{error: "..."}` or `{message}`.
  const openAIMessage = errorObjectMessage(body);
  if (openAIMessage !== undefined) return `${status} ${openAIMessage}`;
  if (typeof body === 'string' && body.trim() !== '') {
    const text = body.trim().replace(/\s+/g, ' ');
    return `${status} ${text.length > 200 ? `${text.slice(0, 199)}…` : text}`;
  }
  if (body !== undefined && body !== null && typeof body !== 'string') return `${status} ${describeValue(body, 200)}`;
  if (fallback !== undefined && fallback !== '') return `${status} ${fallback}`;
  return `${status} status code (no body)`;
}

/** The message of an OpenAI-style error body, when it has one. */
function errorObjectMessage(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const record = body as Record<string, unknown>;
  const error = record['error'];
  if (error !== null && typeof error === 'object') {
    const message = (error as Record<string, unknown>)['message'];
    if (typeof message === 'string' && message.trim() !== '') return message;
  }
  if (typeof error === 'string' && error.trim() !== '') return error;
  const message = record['message'];
  if (typeof message === 'string' && message.trim() !== '') return message;
  return undefined;
}
