/**
 * Why a Responses or Messages request cannot be translated into chat completions, and how the
 * refusal reaches the caller: as an HTTP error in the API's own shape (OpenAI's
 * `{error: {message, type, param, code}}`, Anthropic's `{type: 'error', error: {type, message}}`),
 * which every SDK turns into its own `BadRequestError` with the message. Nothing is sent to the
 * model and nothing is recorded for a refused request.
 */

/** The APIs a recording `fetch` translates into chat completions. */
export type TranslatedApi = 'responses' | 'messages';

/** A request the translation refuses: a feature chat completions cannot carry, or a malformed body. */
export class TranslationError extends Error {
  override readonly name = 'TranslationError';

  /**
   * @param message What was expected and what came, or which feature is not supported.
   * @param param The request field at fault (`tools[2].type`), or null.
   * @param status The HTTP status of the refusal.
   */
  constructor(
    message: string,
    readonly param: string | null = null,
    readonly status = 400,
  ) {
    super(message);
  }
}

/** What each API calls its translation into, for the messages below. */
const API_NAMES: Record<TranslatedApi, string> = {
  responses: 'the Responses API',
  messages: "Anthropic's Messages API",
};

/**
 * A refusal of `feature` (named as the API names it): chat completions, which the training service
 * speaks and which the trajectory records, have no such thing.
 * @example
 * unsupported('responses', 'The built-in web search tool (`web_search`)', 'tools[0].type', 'offer a function tool instead');
 */
export function unsupported(
  api: TranslatedApi,
  feature: string,
  param: string | null,
  hint?: string,
): TranslationError {
  const named = feature.charAt(0).toLowerCase() + feature.slice(1);
  return new TranslationError(
    `Unsupported: ${named}. policyloop translates ${API_NAMES[api]} into chat completions ` +
      `(what the training service serves and what the trajectory records), which cannot carry it` +
      (hint === undefined ? '.' : `; ${hint}.`),
    param,
  );
}

/** A malformed request: `param` was expected to be `expected` and was `got`. */
export function malformed(param: string, expected: string, got: string): TranslationError {
  return new TranslationError(`Expected \`${param}\` to be ${expected}, got ${got}`, param);
}

/** The OpenAI error `type` of an HTTP status. */
function openAIErrorType(status: number): string {
  if (status === 400 || status === 404 || status === 410 || status === 413 || status === 422)
    return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  return 'api_error';
}

/** The Anthropic error `type` of an HTTP status. */
function anthropicErrorType(status: number): string {
  if (status === 400 || status === 410 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 529) return 'overloaded_error';
  return 'api_error';
}

/**
 * The JSON error body of `api` for `status` with `message`.
 * @example
 * errorBody('messages', 400, 'bad'); // { type: 'error', error: { type: 'invalid_request_error', message: 'bad' } }
 */
export function errorBody(api: TranslatedApi | 'chat', status: number, message: string, param: string | null = null) {
  if (api === 'messages') return { type: 'error', error: { type: anthropicErrorType(status), message } };
  return { error: { message, type: openAIErrorType(status), param, code: null } };
}

/** An HTTP error response in `api`'s shape. */
export function errorResponse(
  api: TranslatedApi | 'chat',
  status: number,
  message: string,
  param: string | null = null,
): Response {
  return new Response(JSON.stringify(errorBody(api, status, message, param)), {
    status,
    headers: { 'content-type': 'application/json' },
  });
}

/** The refusal `error` as an HTTP error response in `api`'s shape. */
export function translationErrorResponse(api: TranslatedApi, error: TranslationError): Response {
  return errorResponse(api, error.status, error.message, error.param);
}

/**
 * The message of an error answer of the chat-completions endpoint: OpenAI's `error.message`, the
 * training API's `detail`, or the text itself.
 */
export function upstreamErrorMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; detail?: unknown; message?: unknown };
    if (typeof parsed.error === 'object' && typeof parsed.error?.message === 'string') return parsed.error.message;
    if (typeof parsed.error === 'string') return parsed.error;
    if (typeof parsed.detail === 'string') return parsed.detail;
    if (parsed.detail !== undefined) return JSON.stringify(parsed.detail);
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON: the text is the message
  }
  return text === '' ? 'the chat-completions endpoint answered with an empty body' : text;
}

/**
 * An error answer of the chat-completions endpoint as `api` would have answered it: same status,
 * the message in `api`'s error shape.
 */
export async function translatedErrorResponse(api: TranslatedApi, response: Response): Promise<Response> {
  const text = await response.text().catch(() => '');
  const translated = errorResponse(api, response.status, upstreamErrorMessage(text));
  const requestId = response.headers.get('x-request-id');
  if (requestId !== null) translated.headers.set('x-request-id', requestId);
  return translated;
}
