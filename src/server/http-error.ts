/** Errors that route handlers throw to answer with a given status; the app's error handler renders them. */
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
    super(issues.map((issue) => `${issue.loc.join('.')}: ${issue.msg}`).join('; '));
  }
}

/** Builds a single-issue 422 error. */
export function validationFailure(loc: readonly (string | number)[], msg: string, type = 'value_error'): RequestValidationError {
  return new RequestValidationError([{ loc: [...loc], msg, type }]);
}
