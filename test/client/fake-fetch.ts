/** A scripted `fetch` for unit tests: records every call and answers from a queue. */
import { vi } from 'vitest';

/** What the fake answers for one call: a Response, a thrown error, or a function of the request. */
export type Reply = Response | Error | ((request: RecordedRequest) => Response | Promise<Response>);

/** One call as the service would see it. */
export interface RecordedRequest {
  method: string;
  url: URL;
  headers: Headers;
  /** The body text exactly as sent ('' when none). */
  body: string;
  signal: AbortSignal | undefined;
}

/** A JSON response. */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/**
 * A fake `fetch` that answers with `replies` in order (the last one repeats) and records each
 * request in `requests`.
 */
export function fakeFetch(...replies: Reply[]) {
  const requests: RecordedRequest[] = [];
  let index = 0;
  const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const request: RecordedRequest = {
      method: init?.method ?? 'GET',
      url: new URL(String(input)),
      headers: new Headers(init?.headers),
      body: typeof init?.body === 'string' ? init.body : '',
      signal: init?.signal ?? undefined,
    };
    requests.push(request);
    const reply = replies[Math.min(index, replies.length - 1)];
    index += 1;
    if (reply === undefined) throw new Error('fakeFetch: no reply scripted');
    if (reply instanceof Error) throw reply;
    if (reply instanceof Response) return reply.clone();
    return reply(request);
  });
  return { fetch: fetch as unknown as typeof globalThis.fetch, requests, calls: () => requests.length };
}

/** A `fetch` that never answers but honours its signal, like a real one. */
export function hangingFetch() {
  const requests: RecordedRequest[] = [];
  const fetch = vi.fn(
    (input: RequestInfo | URL, init?: RequestInit) =>
      new Promise<Response>((_, reject) => {
        requests.push({
          method: init?.method ?? 'GET',
          url: new URL(String(input)),
          headers: new Headers(init?.headers),
          body: typeof init?.body === 'string' ? init.body : '',
          signal: init?.signal ?? undefined,
        });
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason));
      }),
  );
  return { fetch: fetch as unknown as typeof globalThis.fetch, requests, calls: () => requests.length };
}
