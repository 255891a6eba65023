/**
 * Reads a JSON request body under a size limit: a declared `Content-Length` over the limit is
 * refused before anything is read, and a streamed body is counted as it arrives and refused as
 * soon as it passes the limit, so an oversized body is never buffered whole.
 */
import { HttpError, RequestValidationError } from './http-error.js';

/** Marker for a request that sent no body at all. */
export const NO_BODY: unique symbol = Symbol('no body');

/**
 * Reads and parses the JSON body of `request`. Throws 413 ({@link HttpError}) over `maxBytes`,
 * 422 ({@link RequestValidationError}, type `json_invalid`) for bytes that are not JSON.
 * Returns {@link NO_BODY} for an empty body.
 */
export async function readJsonBody(request: Request, maxBytes: number): Promise<unknown> {
  return parseJsonBodyText(await readBodyText(request, maxBytes));
}

/** Parses a body read by {@link readBodyText} like {@link readJsonBody} does. */
export function parseJsonBodyText(text: string): unknown {
  if (text.trim() === '') return NO_BODY;
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const position = /position (\d+)/.exec(message)?.[1];
    throw new RequestValidationError([
      {
        loc: ['body', position === undefined ? text.length : Number(position)],
        msg: 'JSON decode error',
        type: 'json_invalid',
        ctx: { error: message },
      },
    ]);
  }
  if (nestingDepth(value, MAX_NESTING_DEPTH) > MAX_NESTING_DEPTH) {
    // Deeper values would overflow the stack when stored (JSON.stringify recurses).
    throw new RequestValidationError([
      { loc: ['body'], msg: `JSON nested deeper than ${MAX_NESTING_DEPTH} levels`, type: 'json_invalid' },
    ]);
  }
  return value;
}

/** Deepest nesting of arrays and objects a request body may have. */
export const MAX_NESTING_DEPTH = 256;

/**
 * Nesting depth of a parsed JSON value; stops counting past `limit`, so the recursion is never
 * deeper than `limit + 1` calls (a plain recursive walk allocates nothing, unlike a work stack).
 */
function nestingDepth(value: unknown, limit: number): number {
  if (value === null || typeof value !== 'object') return 0;
  if (limit < 0) return 1;
  let deepest = 0;
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index += 1) {
      const child: unknown = value[index];
      if (child !== null && typeof child === 'object') {
        const depth = nestingDepth(child, limit - 1);
        if (depth > deepest) deepest = depth;
        if (deepest > limit) break;
      }
    }
  } else {
    for (const key in value) {
      const child: unknown = (value as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object') {
        const depth = nestingDepth(child, limit - 1);
        if (depth > deepest) deepest = depth;
        if (deepest > limit) break;
      }
    }
  }
  return deepest + 1;
}

/** Reads the body as UTF-8 text under the limit. */
export async function readBodyText(request: Request, maxBytes: number): Promise<string> {
  const declared = request.headers.get('content-length');
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > maxBytes) {
    throw tooLarge(`Request body of ${declared} bytes is over the limit of ${maxBytes} bytes`);
  }
  const body = request.body;
  if (body === null) return '';
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let next: ReadableStreamReadResult<Uint8Array>;
    try {
      next = await reader.read();
    } catch (error) {
      // The client went away (or broke the framing) mid-body: its fault, not a server error.
      throw new HttpError(
        400,
        `Request body could not be read: ${error instanceof Error ? error.message : String(error)}`,
        { connection: 'close' },
      );
    }
    const { done, value } = next;
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(`Request body is over the limit of ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  const bytes = Buffer.concat(chunks, total);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new RequestValidationError([{ loc: ['body'], msg: 'Request body is not valid UTF-8', type: 'json_invalid' }]);
  }
}

function tooLarge(message: string): HttpError {
  // Closing the connection: the client may still be sending the rest of the body.
  return new HttpError(413, message, { connection: 'close' });
}
