/**
 * One Responses or Messages call, end to end: the request translated into chat completions and
 * sent to the chat-completions endpoint beside it (`…/responses` and `…/v1/messages` become
 * `…/chat/completions`, `…/v1/chat/completions`), the Choice recorded into the rollout's
 * trajectory exactly as a captured chat completion (with its logprobs), and the answer translated
 * back, streamed or not. A request that cannot be translated gets a 400 in the API's own error
 * shape, is not sent, and records nothing.
 */
import type { Choice } from '../../schema/index.js';
import type { ChatCompletionCreateBody } from '../../schema/chat-client.js';
import { firstChoice, record, withDefaults } from '../capture-completions.js';
import { EventStreamReader } from '../event-stream-reader.js';
import { bodyText, type FetchInput, inputURL } from '../fetch-request.js';
import { currentRolloutScope } from '../rollout-scope.js';
import { StreamAccumulator } from '../stream-accumulator.js';
import { type ConversationStore, rolloutStore } from './conversation-store.js';
import { isObject, randomId } from './json-values.js';
import { translateMessagesRequest } from './messages-request.js';
import { MessagesEventStream, messageFromCompletion } from './messages-response.js';
import { translateResponsesRequest } from './responses-request.js';
import { assistantMessageOf, ResponsesEventStream, responseFromCompletion } from './responses-response.js';
import {
  errorResponse,
  type TranslatedApi,
  TranslationError,
  translatedErrorResponse,
  translationErrorResponse,
} from './translation-error.js';

/** What a translated call needs besides the request. */
export interface TranslationOptions {
  /** Where the chat-completions request goes. */
  readonly fetch: typeof globalThis.fetch;
  /** Request parameters filled into the chat-completions body where it has no value (`logprobs: true`, `model`). */
  readonly defaults: Readonly<Record<string, unknown>>;
  /** Where responses are kept for `previous_response_id` outside rollouts (inside, each rollout keeps its own). */
  readonly store: ConversationStore;
}

/** One translated request: the chat body, and how to answer from the completion. */
interface Translation {
  readonly chat: Record<string, unknown>;
  readonly stream: boolean;
  /** The answer to a whole completion; keeps what continuations need. */
  answer(completion: Record<string, unknown>, choice: Choice): Record<string, unknown>;
  /** A writer of the answer's events for a streamed completion. */
  events(write: (text: string) => void): StreamTranslator;
}

/** Writes a streamed answer from chat chunks. */
interface StreamTranslator {
  chunk(chunk: unknown): void;
  /** The chat stream ended; `choice` is what its chunks added up to (null for none). */
  end(choice: Choice | null): void;
}

/** The Responses API's translation of `body`. */
function responsesTranslation(body: unknown, store: ConversationStore): Translation {
  const request = translateResponsesRequest(body, store);
  const id = randomId('resp_');
  return {
    chat: request.chat,
    stream: request.stream,
    answer(completion, choice) {
      const response = responseFromCompletion(request, completion, choice, id);
      store.saveResponse(
        id,
        { history: [...request.history, assistantMessageOf(choice)] },
        response['output'] as Record<string, unknown>[],
      );
      return response;
    },
    events(write) {
      const writer = new ResponsesEventStream(request, id, write);
      return {
        chunk: (chunk) => writer.chunk(chunk),
        end(choice) {
          if (choice === null) {
            writer.fail('The chat-completions stream ended without a choice');
            return;
          }
          writer.end();
          store.saveResponse(id, { history: [...request.history, assistantMessageOf(choice)] }, writer.output);
        },
      };
    },
  };
}

/** The Messages API's translation of `body`. */
function messagesTranslation(body: unknown, store: ConversationStore): Translation {
  const request = translateMessagesRequest(body, store);
  const id = randomId('msg_');
  return {
    chat: request.chat,
    stream: request.stream,
    answer: (completion, choice) => messageFromCompletion(request, completion, choice, id, store),
    events(write) {
      const writer = new MessagesEventStream(request, id, store, write);
      return {
        chunk: (chunk) => writer.chunk(chunk),
        end(choice) {
          if (choice === null) writer.fail('The chat-completions stream ended without a choice');
          else writer.end();
        },
      };
    },
  };
}

/** The chat-completions URL beside a Responses or Messages URL (its query string kept). */
function chatURL(api: TranslatedApi, url: string): string {
  const [path = url, query] = url.split('?', 2);
  const base = path.replace(/\/+$/, '');
  const chat =
    api === 'responses'
      ? `${base.slice(0, -'/responses'.length)}/chat/completions`
      : `${base.slice(0, -'/messages'.length)}/chat/completions`;
  return query === undefined ? chat : `${chat}?${query}`;
}

/** The headers of the chat request: the caller's, with an Anthropic key sent as a bearer key. */
function chatHeaders(api: TranslatedApi, input: FetchInput, init: RequestInit | undefined, stream: boolean): Headers {
  const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
  headers.delete('content-length');
  if (api === 'messages') {
    const key = headers.get('x-api-key');
    if (key !== null && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
    for (const name of [
      'x-api-key',
      'anthropic-version',
      'anthropic-beta',
      'anthropic-dangerous-direct-browser-access',
    ])
      headers.delete(name);
  }
  headers.set('content-type', 'application/json');
  headers.set('accept', stream ? 'text/event-stream' : 'application/json');
  return headers;
}

const encoder = new TextEncoder();

/**
 * The streamed answer: the chat stream's chunks, read as they arrive, become the API's events;
 * the Choice is recorded through `onChoice` once, at the chunk with its `finish_reason` (or at the
 * end of the stream). A stream the caller cancels first records nothing.
 */
function translatedStream(
  upstream: ReadableStream<Uint8Array>,
  translation: Translation,
  onChoice: (choice: Choice | null) => void,
): ReadableStream<Uint8Array> {
  const accumulator = new StreamAccumulator();
  let recorded = false;
  // The events of each piece of the upstream stream are sent together, encoded once.
  let pending = '';
  const writer = translation.events((text) => {
    pending += text;
  });
  const reader = new EventStreamReader((data) => {
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      return;
    }
    accumulator.add(chunk);
    if (!recorded && accumulator.finished) {
      recorded = true;
      onChoice(accumulator.choice());
    }
    writer.chunk(chunk);
  });
  const flushPending = (controller: TransformStreamDefaultController<Uint8Array>): void => {
    if (pending === '') return;
    controller.enqueue(encoder.encode(pending));
    pending = '';
  };
  return upstream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(bytes, controller) {
        reader.push(bytes);
        flushPending(controller);
      },
      flush(controller) {
        reader.end();
        const choice = accumulator.choice();
        if (!recorded) {
          recorded = true;
          onChoice(choice);
        }
        writer.end(choice);
        flushPending(controller);
      },
    }),
  );
}

/**
 * Answers one Responses (`api: 'responses'`) or Messages (`api: 'messages'`) request through a
 * chat-completions request sent with `options.fetch`, recording it into the current rollout.
 * Never throws for what the caller sent (that gets a 4xx answer); a failed request to the
 * chat-completions endpoint rejects as `fetch` does.
 */
export async function translatedExchange(
  api: TranslatedApi,
  input: FetchInput,
  init: RequestInit | undefined,
  options: TranslationOptions,
): Promise<Response> {
  const text = await bodyText(input, init);
  let parsed: unknown;
  try {
    parsed = text === undefined ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!isObject(parsed)) {
    const what = text === undefined ? 'a body that is not text' : 'a body that is not a JSON object';
    return errorResponse(api, 400, `Expected a JSON object as the request body, got ${what}`);
  }
  const scope = currentRolloutScope();
  const store = scope === undefined ? options.store : rolloutStore(scope.recorder);
  let translation: Translation;
  try {
    translation = api === 'responses' ? responsesTranslation(parsed, store) : messagesTranslation(parsed, store);
  } catch (error) {
    if (error instanceof TranslationError) return translationErrorResponse(api, error);
    throw error;
  }
  const chat = withDefaults(translation.chat as unknown as ChatCompletionCreateBody, options.defaults);
  const request: RequestInit = {
    method: 'POST',
    headers: chatHeaders(api, input, init, translation.stream),
    body: JSON.stringify(chat),
  };
  const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined) ?? scope?.signal;
  if (signal !== undefined && signal !== null) request.signal = signal;
  const response = await options.fetch(chatURL(api, inputURL(input)), request);
  if (!response.ok) return translatedErrorResponse(api, response);
  const onChoice = (choice: Choice | null): void => {
    if (scope !== undefined) record(scope, chat, choice);
  };
  const type = response.headers.get('content-type') ?? '';
  const headers = new Headers();
  const requestId = response.headers.get('x-request-id');
  if (requestId !== null) headers.set('x-request-id', requestId);
  if (type.includes('text/event-stream') || (type === '' && translation.stream)) {
    if (response.body === null) return errorResponse(api, 502, 'The chat-completions endpoint sent an empty stream');
    headers.set('content-type', 'text/event-stream; charset=utf-8');
    headers.set('cache-control', 'no-cache');
    return new Response(translatedStream(response.body, translation, onChoice), { status: 200, headers });
  }
  let completion: unknown;
  try {
    completion = await response.json();
  } catch {
    return errorResponse(api, 502, 'The chat-completions endpoint answered with a body that is not JSON');
  }
  const choice = firstChoice(completion);
  if (choice === null || !isObject(completion))
    return errorResponse(api, 502, 'The chat-completions endpoint answered without a choice');
  onChoice(choice);
  headers.set('content-type', 'application/json');
  return new Response(JSON.stringify(translation.answer(completion, choice)), { status: 200, headers });
}
