/**
 * A recording `fetch`: what agent frameworks that build their own HTTP calls (the AI SDK, LangChain,
 * Mastra, the OpenAI Agents SDK through an `openai` client, the Anthropic SDK) are given, so that
 * their chat completions land in the rollout's trajectory exactly as `captureCompletions` records
 * them. Responses API and Messages API calls are translated into chat completions on the way
 * (`./translate/`) and recorded the same way.
 */
import { z } from 'zod';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import type { Choice } from '../schema/index.js';
import type { ChatCompletionCreateBody } from '../schema/chat-client.js';
import { firstChoice, record, withDefaults } from './capture-completions.js';
import { currentRolloutScope, type RolloutScope } from './rollout-scope.js';
import { EventStreamReader } from './event-stream-reader.js';
import { bodyText, type FetchInput, inputURL, requestApi } from './fetch-request.js';
import { ConversationStore } from './translate/conversation-store.js';
import { translatedExchange } from './translate/translated-exchange.js';
import { StreamRecorder } from './stream-accumulator.js';

/** Responses a recording `fetch` keeps for `previous_response_id` outside rollouts (the newest). */
const OUTSIDE_ROLLOUT_RESPONSES = 1000;

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
  defaults?: CaptureDefaults | undefined;
}

/** Request parameters, or a function returning them (called for every request). */
type CaptureDefaults = Readonly<Record<string, unknown>> | (() => Readonly<Record<string, unknown>>);

/** The check of {@link CaptureFetchOptions}, made once when the `fetch` is made. */
const CaptureFetchOptionsSchema = optionsSchema<CaptureFetchOptions>()({
  fetch: option.function<typeof globalThis.fetch>().optional(),
  defaults: z
    .union(
      [option.function<() => Readonly<Record<string, unknown>>>(), option.options<Readonly<Record<string, unknown>>>()],
      {
        error: 'an object of request parameters, or a function returning one',
      },
    )
    .default({}),
});

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
 *
 * `POST …/responses` (the Responses API) and `POST …/v1/messages` (Anthropic's Messages API) are
 * translated: each becomes one chat-completions request to `…/chat/completions` beside it (with
 * `defaults` filled in), recorded as above, and answered in the caller's API, as JSON or as its
 * typed stream events. `previous_response_id` and `item_reference` resolve against the responses
 * the same rollout made (outside rollouts, the newest 1,000 this `fetch` made). What chat
 * completions cannot carry (built-in tools, `background`, `conversation`, images, documents,
 * server tools, ...) gets a 400 in the API's own error shape that names it: nothing is sent, and
 * nothing recorded. See docs/integrations.md.
 * @example
 * import { createOpenAI } from '@ai-sdk/openai';
 * const provider = createOpenAI({
 *   baseURL: model.inferenceBaseURL,
 *   apiKey: model.inferenceApiKey,
 *   fetch: captureFetch({ defaults: { logprobs: true } }),
 * });
 * const llm = provider(model.inferenceName()); // the Responses API, translated; provider.chat(...) works too
 */
export function captureFetch(options?: CaptureFetchOptions): typeof globalThis.fetch {
  const checked = parseOptions(CaptureFetchOptionsSchema, options);
  const inner = checked.fetch ?? ((...args: Parameters<typeof globalThis.fetch>) => globalThis.fetch(...args));
  const defaults: CaptureDefaults = checked.defaults;
  // Responses kept for `previous_response_id` outside rollouts (inside, each rollout keeps its own).
  const store = new ConversationStore(OUTSIDE_ROLLOUT_RESPONSES);
  const recordingFetch = async (input: FetchInput, init?: RequestInit): Promise<Response> => {
    const api = requestApi(input, init);
    if (api === undefined) return inner(input, init);
    if (api !== 'chat') {
      const current = typeof defaults === 'function' ? defaults() : defaults;
      return translatedExchange(api, input, init, { fetch: inner, defaults: current, store });
    }
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

/**
 * A `fetch` that answers Responses and Messages requests through chat completions sent with
 * `forward` (translated and recorded as {@link captureFetch} does) and passes every other request,
 * chat completions included, to `passThrough` untouched. It is the `fetch` of `model.openai()`'s
 * `openai` client, whose chat completions the captured client itself records; so
 * `client.responses.create` works on it too. Not exported from the package.
 */
export function translatingFetch(
  passThrough: typeof globalThis.fetch,
  forward: typeof globalThis.fetch,
  defaults: () => Readonly<Record<string, unknown>>,
): typeof globalThis.fetch {
  const store = new ConversationStore(OUTSIDE_ROLLOUT_RESPONSES);
  return (input, init) => {
    // A look at the URL first: the client's chat completions pass without parsing it.
    const url = inputURL(input);
    if (url.includes('/chat/completions') || (!url.includes('/responses') && !url.includes('/messages')))
      return passThrough(input, init);
    const api = requestApi(input, init);
    if (api === undefined || api === 'chat') return passThrough(input, init);
    return translatedExchange(api, input, init, { fetch: forward, defaults: defaults(), store });
  };
}
