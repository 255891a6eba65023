/**
 * A recording `fetch`: what agent frameworks that build their own HTTP calls (the AI SDK, LangChain,
 * Mastra, the OpenAI Agents SDK through an `openai` client) are given, so that their chat
 * completions land in the rollout's trajectory exactly as `captureCompletions` records them.
 */
import { functionOption, optionsObject } from '../internal/options.js';
import type { Choice } from '../schema/index.js';
import type { ChatCompletionCreateBody } from '../schema/chat-client.js';
import { firstChoice, record, withDefaults } from './capture-completions.js';
import { currentRolloutScope, type RolloutScope } from './rollout-scope.js';
import { StreamRecorder } from './stream-accumulator.js';

/** Options of {@link captureFetch}. */
export interface CaptureFetchOptions {
  /**
   * The `fetch` that does the requests.
   * @default globalThis.fetch
   */
  fetch?: typeof globalThis.fetch | undefined;
  /**
   * Request parameters filled into every chat-completions body where the body has no value of its
   * own (a key that is missing, `undefined` or `null`; `model` also when it is `''`): the same rule
   * as `captureCompletions`. Training needs `logprobs: true`. A function is called for every
   * request.
   * @default {}
   * @example
   * { logprobs: true, model: model.inferenceName() }
   */
  defaults?: Readonly<Record<string, unknown>> | (() => Readonly<Record<string, unknown>>) | undefined;
}

type FetchInput = Parameters<typeof globalThis.fetch>[0];

/** True for `POST <anything>/chat/completions` (query strings allowed). */
function isChatCompletions(input: FetchInput, init: RequestInit | undefined): boolean {
  const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
  if (method !== 'POST') return false;
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  let pathname: string;
  try {
    pathname = new URL(url).pathname;
  } catch {
    pathname = url.split('?')[0] ?? url;
  }
  return pathname.replace(/\/+$/, '').endsWith('/chat/completions');
}

/** The JSON text of a request body, or undefined when it is not text we can read without consuming it. */
async function bodyText(input: FetchInput, init: RequestInit | undefined): Promise<string | undefined> {
  const body = init?.body;
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array) return new TextDecoder().decode(body);
  if (body instanceof ArrayBuffer) return new TextDecoder().decode(new Uint8Array(body));
  if (body === undefined && input instanceof Request && input.body !== null) return input.clone().text();
  return undefined;
}

/**
 * Reads `data:` events of a server-sent event stream as its bytes pass by, calling `onEvent` with
 * each event's data text (`[DONE]` left out).
 */
class EventStreamReader {
  readonly #decoder = new TextDecoder();
  #buffer = '';
  #data: string[] = [];

  constructor(private readonly onEvent: (data: string) => void) {}

  push(bytes: Uint8Array): void {
    this.#buffer += this.#decoder.decode(bytes, { stream: true });
    this.#drain();
  }

  end(): void {
    this.#buffer += this.#decoder.decode();
    this.#drain();
    if (this.#buffer !== '') this.#line(this.#buffer);
    this.#buffer = '';
    this.#line('');
  }

  #drain(): void {
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.#buffer);
      // A lone '\r' at the end may be the start of '\r\n': wait for the next bytes.
      if (match === null || (match[0] === '\r' && match.index === this.#buffer.length - 1)) return;
      const line = this.#buffer.slice(0, match.index);
      this.#buffer = this.#buffer.slice(match.index + match[0].length);
      this.#line(line);
    }
  }

  #line(line: string): void {
    if (line === '') {
      if (this.#data.length > 0) {
        const data = this.#data.join('\n');
        this.#data = [];
        if (data.trim() !== '[DONE]') this.onEvent(data);
      }
      return;
    }
    if (line.startsWith('data:')) this.#data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
}

/**
 * The response with its SSE body passed through a reader that adds every chunk to a
 * {@link StreamRecorder}, which records the Choice once, at the chunk with choice 0's
 * `finish_reason` (before the caller sees that chunk), or at the end of the stream. A cancelled
 * stream records nothing; the caller's stream is never held back.
 */
function recordingStream(response: Response, onChoice: (choice: Choice | null) => void): Response {
  const body = response.body;
  if (body === null) return response;
  const recorder = new StreamRecorder(onChoice);
  const events = new EventStreamReader((data) => {
    if (recorder.recorded) return;
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      return;
    }
    recorder.add(chunk);
  });
  const recording = new TransformStream<Uint8Array, Uint8Array>({
    transform(bytes, controller) {
      if (!recorder.recorded) events.push(bytes);
      controller.enqueue(bytes);
    },
    flush() {
      if (recorder.recorded) return;
      events.end();
      recorder.end();
    },
  });
  return new Response(body.pipeThrough(recording), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** Records a 2xx response of the chat-completions request `body` into `scope`'s rollout. */
async function recordResponse(
  scope: RolloutScope,
  body: ChatCompletionCreateBody,
  response: Response,
): Promise<Response> {
  if (!response.ok) return response;
  const type = response.headers.get('content-type') ?? '';
  const streamed = type.includes('text/event-stream') || (type === '' && body.stream === true);
  if (streamed) return recordingStream(response, (choice) => record(scope, body, choice));
  // JSON: read a copy to the end before handing the response over, so the Choice is in the
  // trajectory before the caller can act on it (and before the rollout can end).
  let parsed: unknown;
  try {
    parsed = await response.clone().json();
  } catch {
    return response;
  }
  record(scope, body, firstChoice(parsed));
  return response;
}

/**
 * Returns a standard `fetch` that records the chat completions an agent framework makes through it.
 * Inside a rollout (`gatherTrajectoryGroups`, `recordTrajectory`), every `POST …/chat/completions`
 * gets `defaults` filled in where its JSON body leaves them out (the rule of `captureCompletions`),
 * and a 2xx answer is recorded into the rollout's trajectory: the request's messages and tools, as
 * the framework sent them, then the first Choice of the response with its logprobs, as the service
 * sent it (a JSON body is read to the end first; a `text/event-stream` body is passed through
 * unchanged and recorded once, as soon as the chunk carrying the first choice's `finish_reason` has
 * been read, so a framework that stops reading there is recorded). Non-2xx answers, attempts that
 * fail (and that the framework retries), and streams cancelled before their `finish_reason` record
 * nothing. Requests without a `signal` get the rollout's signal. Outside a rollout only the
 * defaults are filled in; every other request (other paths, other methods, bodies that are not
 * JSON) passes through untouched.
 * @example
 * import { createOpenAI } from '@ai-sdk/openai';
 * const provider = createOpenAI({
 *   baseURL: model.inferenceBaseURL,
 *   apiKey: model.inferenceApiKey,
 *   fetch: captureFetch({ defaults: { logprobs: true } }),
 * });
 * const llm = provider.chat(model.inferenceName()); // chat completions, not the Responses API
 */
export function captureFetch(options: CaptureFetchOptions = {}): typeof globalThis.fetch {
  optionsObject('options', options);
  const inner =
    options.fetch === undefined
      ? (...args: Parameters<typeof globalThis.fetch>) => globalThis.fetch(...args)
      : functionOption<typeof globalThis.fetch>('fetch', options.fetch);
  const defaults =
    options.defaults === undefined
      ? {}
      : typeof options.defaults === 'function'
        ? functionOption<() => Readonly<Record<string, unknown>>>('defaults', options.defaults)
        : optionsObject('defaults', options.defaults);
  const recordingFetch = async (input: FetchInput, init?: RequestInit): Promise<Response> => {
    if (!isChatCompletions(input, init)) return inner(input, init);
    const text = await bodyText(input, init);
    let parsed: unknown;
    try {
      parsed = text === undefined ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return inner(input, init);
    const body = withDefaults(
      parsed as ChatCompletionCreateBody,
      typeof defaults === 'function' ? defaults() : defaults,
    );
    const scope = currentRolloutScope();
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    headers.delete('content-length'); // the body changed length
    const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined) ?? scope?.signal;
    const url = input instanceof Request ? input.url : input;
    const method = init?.method ?? (input instanceof Request ? input.method : 'POST');
    const request: RequestInit = { ...init, method, headers, body: JSON.stringify(body) };
    if (signal !== undefined) request.signal = signal;
    const response = await inner(url, request);
    if (scope === undefined) return response;
    return recordResponse(scope, body, response);
  };
  return recordingFetch as typeof globalThis.fetch;
}
