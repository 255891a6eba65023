/**
 * What a recording `fetch` reads of a request before deciding what to do with it: which API it
 * speaks (chat completions, or an API it translates into chat completions), and its body text.
 */

/** The first argument of `fetch`. */
export type FetchInput = Parameters<typeof globalThis.fetch>[0];

/** The APIs a recording `fetch` handles: chat completions as they are, the others translated. */
export type RequestApi = 'chat' | 'responses' | 'messages';

/** The URL of a `fetch` input, as text. */
export function inputURL(input: FetchInput): string {
  return typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
}

/**
 * Which API a request speaks: `POST …/chat/completions` is `chat`, `POST …/responses` the
 * Responses API and `POST …/v1/messages` Anthropic's Messages API (query strings and a trailing
 * `/` allowed); anything else (other paths, other methods) is undefined and passes through.
 */
export function requestApi(input: FetchInput, init: RequestInit | undefined): RequestApi | undefined {
  const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
  if (method !== 'POST' && method.toUpperCase() !== 'POST') return undefined;
  const url = inputURL(input);
  let pathname: string;
  try {
    pathname = new URL(url).pathname;
  } catch {
    pathname = url.split('?')[0] ?? url;
  }
  if (pathname.endsWith('/')) pathname = pathname.replace(/\/+$/, '');
  if (pathname.endsWith('/chat/completions')) return 'chat';
  if (pathname.endsWith('/responses')) return 'responses';
  if (pathname.endsWith('/v1/messages')) return 'messages';
  return undefined;
}

/** The JSON text of a request body, or undefined when it is not text we can read without consuming it. */
export async function bodyText(input: FetchInput, init: RequestInit | undefined): Promise<string | undefined> {
  const body = init?.body;
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array) return new TextDecoder().decode(body);
  if (body instanceof ArrayBuffer) return new TextDecoder().decode(new Uint8Array(body));
  if (body === undefined && input instanceof Request && input.body !== null) return input.clone().text();
  return undefined;
}
