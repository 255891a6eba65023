/**
 * The POSTs that write, wrapped so that they honour `Idempotency-Key`: the key is read and
 * checked, a key already answered gets its stored answer back, and a new answer is stored with the
 * write it answers (see `idempotency.ts` for the stored keys and the request hash).
 */
import type { Context } from 'hono';
import { callerOf } from './auth.js';
import { validationFailure } from './http-error.js';
import { hashRequest, IDEMPOTENCY_KEY_HEADER, MAX_IDEMPOTENCY_KEY_LENGTH, REPLAYED_HEADER } from './idempotency.js';
import type { RouteHandler } from './route-table.js';
import { readJsonBodyWithText, type ServiceContext } from './service-context.js';

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;
const HEADER_LOC = ['header', IDEMPOTENCY_KEY_HEADER.toLowerCase()] as const;

/** What a write route gets from {@link idempotentWrite}. */
export interface WriteRequest {
  /** The parsed JSON body, not yet validated against the route's schema. */
  readonly body: unknown;
  /** The body's text as received. */
  readonly text: string;
  /**
   * Runs `write` (synchronous store calls) and builds the 200 answer from its result with
   * `answer`. When the request carries an `Idempotency-Key`, the answer is stored for the key in
   * the same transaction as the write: neither is ever stored without the other.
   */
  commit<Result, Answer>(write: () => Result, answer: (result: Result) => Answer): { result: Result; answer: Answer };
}

/**
 * Wraps the handler of a POST that writes: validates an `Idempotency-Key`
 * header, reads the JSON body and, for a key already answered, replays the stored answer (with
 * `Idempotent-Replayed: true`) or refuses a different request with a 422, without calling
 * `handler`. A key whose request is still in flight is a 409. Only answers stored through
 * {@link WriteRequest.commit} are kept: an error (4xx or 5xx) leaves the key unused.
 * The route's API key check (the route table's middleware) has run before; its caller scopes the
 * keys. `checkPath` runs before anything else (a bad path id is refused before the body is read).
 */
export function idempotentWrite(
  service: ServiceContext,
  handler: (context: Context, request: WriteRequest) => Response | Promise<Response>,
  checkPath?: (context: Context) => void,
): RouteHandler {
  return async (context) => {
    const principal = callerOf(context);
    checkPath?.(context);
    const key = readIdempotencyKey(context);
    if (key === undefined) {
      const { value: body, text } = await readJsonBodyWithText(service, context);
      return await handler(context, { body, text, commit: (write, answer) => withAnswer(write(), answer) });
    }
    // Claimed before the body is read: a retry sent while the first attempt is still uploading
    // (a client timeout on a big log) must not run beside it.
    const slot = service.idempotency.claim(principal, key);
    try {
      const { value: body, text } = await readJsonBodyWithText(service, context);
      const method = context.req.method;
      // Paths differ only in the letter case of their UUIDs, which name the same resource.
      const path = context.req.path.toLowerCase();
      const requestHash = hashRequest(method, path, body, text);
      const stored = service.idempotency.find(principal, key);
      if (stored !== undefined) {
        if (stored.request_hash !== requestHash) {
          throw validationFailure(
            HEADER_LOC,
            `Expected the same request as the first one sent with this ${IDEMPOTENCY_KEY_HEADER} (${stored.method} ${stored.path} with the same JSON body), got a different one; use a new key for a new request`,
            'idempotency_key_reused',
          );
        }
        return context.body(stored.response_body, stored.status as 200, {
          'content-type': 'application/json',
          [REPLAYED_HEADER.toLowerCase()]: 'true',
        });
      }
      return await handler(context, {
        body,
        text,
        commit: (write, answer) =>
          service.store.transaction(() => {
            const done = withAnswer(write(), answer);
            service.idempotency.save({
              principal,
              key,
              request_hash: requestHash,
              method,
              path,
              status: 200,
              response_body: JSON.stringify(done.answer),
            });
            return done;
          }),
      });
    } finally {
      slot.release();
    }
  };
}

function withAnswer<Result, Answer>(
  result: Result,
  answer: (result: Result) => Answer,
): { result: Result; answer: Answer } {
  return { result, answer: answer(result) };
}

/** The request's key, or undefined without the header; a 422 unless 1..255 printable ASCII characters. */
function readIdempotencyKey(context: Context): string | undefined {
  const key = context.req.header(IDEMPOTENCY_KEY_HEADER);
  if (key === undefined) return undefined;
  if (key.length === 0)
    throw validationFailure(
      HEADER_LOC,
      `Expected \`${IDEMPOTENCY_KEY_HEADER}\` to be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, got an empty value`,
      'string_too_short',
    );
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH)
    throw validationFailure(
      HEADER_LOC,
      `Expected \`${IDEMPOTENCY_KEY_HEADER}\` to be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, got ${key.length} characters`,
      'string_too_long',
    );
  if (!PRINTABLE_ASCII.test(key))
    throw validationFailure(
      HEADER_LOC,
      `Expected \`${IDEMPOTENCY_KEY_HEADER}\` to be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, got ${JSON.stringify(key.slice(0, 100))}`,
      'string_pattern_mismatch',
    );
  return key;
}
