/** Errors that route handlers throw to answer with a given status; the app's error handler renders them. */
import { escapeControl, hasControlCharacter } from '../internal/control-characters.js';
import type { ValidationError } from '../schema/index.js';

/** An error answered as `{"detail": message}` with its status (401, 404, 409, 413, 503, ...). */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    /** HTTP status to answer with. */
    readonly status: number,
    message: string,
    /** Extra response headers (e.g. `Allow`, `WWW-Authenticate`). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

/** A request that failed validation: answered 422 in the FastAPI shape `{"detail": [{loc, msg, type}]}`. */
export class RequestValidationError extends Error {
  override readonly name = 'RequestValidationError';
  constructor(
    /** The FastAPI-style issues, each with its `loc` starting at `body`, `query` or `path`. */
    readonly issues: readonly ValidationError[],
  ) {
    super(describeIssues(issues));
  }
}

/** Validation issues as one line: `body.temperature: Too big; query.limit: ...`. */
function describeIssues(issues: readonly ValidationError[]): string {
  return issues.map((issue) => `${issue.loc.join('.')}: ${issue.msg}`).join('; ');
}

/**
 * Throws a 422 naming `loc` when `value` holds a control character (ESC, BEL, backspace, ...):
 * names are printed by terminals and logs, where such characters rewrite what an operator sees.
 */
export function refuseControlCharacters(loc: readonly (string | number)[], value: string): void {
  if (!hasControlCharacter(value)) return;
  const field = String(loc[loc.length - 1] ?? 'value');
  throw validationFailure(
    loc,
    `Expected a ${field} without control characters (such as ESC, BEL or backspace), got "${escapeControl(value.length > 200 ? `${value.slice(0, 200)}...` : value)}"`,
    'string_pattern_mismatch',
  );
}

/** Builds a single-issue 422 error. */
export function validationFailure(
  loc: readonly (string | number)[],
  msg: string,
  type = 'value_error',
): RequestValidationError {
  return new RequestValidationError([{ loc: [...loc], msg, type }]);
}

/**
 * The body of every error response: FastAPI's `detail` (the contract's shape, which our client
 * reads) plus an OpenAI-style `error` object, so that the `openai` SDK and agent frameworks show the
 * reason ("404 Model ... not found") instead of "status code (no body)". Extra keys are allowed by
 * the contract.
 */
export function errorBody(
  status: number,
  detail: string | readonly ValidationError[],
): { detail: string | readonly ValidationError[]; error: { message: string; type: string; code: number } } {
  const message = typeof detail === 'string' ? detail : describeIssues(detail);
  return { detail, error: { message, type: errorType(status), code: status } };
}

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}
