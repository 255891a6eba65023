/**
 * Wraps a chat-completions client so that every completion made through it inside a rollout is
 * recorded, as a `Choice` with its logprobs, into that rollout's trajectory.
 */
import type { Choice } from '../schema/index.js';
import type {
  ChatCompletionCreateBody,
  ChatCompletionRequestOptions,
  ChatCompletionsClient,
} from '../schema/chat-client.js';
import { currentRolloutScope, type RolloutScope } from './rollout-scope.js';
import { StreamRecorder } from './stream-accumulator.js';

/** Options of {@link captureCompletions}. */
export interface CaptureCompletionsOptions {
  /**
   * Request parameters filled into every request where the request has no value of its own: a
   * default fills a key that is missing, `undefined` or `null` (and `model` also when it is `''`,
   * since the SDK's types require the key); any other value in the request wins. Training needs
   * `logprobs: true`; a model handle usually sets `model` here too. A function is called for
   * every request (for values that change, such as a pinned step).
   * @default {}
   * @example
   * { logprobs: true, temperature: 1 }
   */
  defaults?: Readonly<Record<string, unknown>> | (() => Readonly<Record<string, unknown>>) | undefined;
}

/**
 * The one merge rule of `defaults`: a default fills a key of `body` whose value is `undefined` or
 * `null` (`model` also when it is `''`); the body's own values win otherwise. Returns a new object
 * when a default filled a key, else `body` itself (nothing to copy: the SDK and the recorder only
 * read it).
 */
export function withDefaults(
  body: ChatCompletionCreateBody,
  defaults: Readonly<Record<string, unknown>>,
): ChatCompletionCreateBody {
  let merged: Record<string, unknown> | undefined;
  // `for...in` over own keys: the same keys as `Object.entries`, without an array per request.
  for (const key in defaults) {
    if (!Object.hasOwn(defaults, key)) continue;
    const own = (merged ?? (body as unknown as Record<string, unknown>))[key];
    if (own === undefined || own === null || (key === 'model' && own === '')) {
      merged ??= { ...body };
      merged[key] = defaults[key];
    }
  }
  return (merged ?? body) as unknown as ChatCompletionCreateBody;
}

/** Marks a `create` that already records, so that wrapping a captured client twice records once. */
const RECORDS = Symbol('policyloop.recordsCompletions');

/** A plain copy of the first Choice of a completion response, or null when it has none. */
export function firstChoice(response: unknown): Choice | null {
  const choices = (response as { choices?: unknown } | null)?.choices;
  if (!Array.isArray(choices) || choices.length === 0) return null;
  const first: unknown = choices[0];
  if (typeof first !== 'object' || first === null) return null;
  // Not copied here: the recorder copies what it records, so the trajectory never aliases the SDK's objects.
  return first as Choice;
}

/** Records one exchange into the rollout of `scope` (nothing without messages or a Choice). */
export function record(scope: RolloutScope, body: ChatCompletionCreateBody, choice: Choice | null): void {
  if (choice === null || !Array.isArray(body.messages)) return;
  scope.recorder.recordCompletion({ messages: body.messages, tools: body.tools, choice, into: scope.history });
}

/**
 * Wraps a chunk stream so that the Choice it adds up to is recorded, exactly once, as soon as the
 * chunk carrying choice 0's `finish_reason` has been read (agent frameworks stop reading there),
 * or else when the stream ends. A stream left before any `finish_reason` is not recorded.
 */
function captureStream(stream: unknown, onChoice: (choice: Choice | null) => void): unknown {
  if (typeof stream !== 'object' || stream === null || !(Symbol.asyncIterator in stream)) return stream;
  const target = stream as AsyncIterable<unknown> & object;
  return new Proxy(target, {
    get(object, property) {
      if (property === Symbol.asyncIterator) {
        return () => {
          const iterator = object[Symbol.asyncIterator]();
          const recorder = new StreamRecorder(onChoice);
          const wrapped: AsyncIterableIterator<unknown> = {
            async next() {
              const result = await iterator.next();
              if (result.done === true) recorder.end();
              else recorder.add(result.value);
              return result;
            },
            async return(value?: unknown) {
              if (recorder.finished) recorder.end();
              return iterator.return ? iterator.return(value) : { done: true, value };
            },
            [Symbol.asyncIterator]() {
              return wrapped;
            },
          };
          return wrapped;
        };
      }
      const value: unknown = Reflect.get(object, property, object);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
    },
  });
}

/** A proxy of `target` whose `property` is `replacement`; other methods stay bound to `target`. */
function withProperty<T extends object>(target: T, property: PropertyKey, replacement: unknown): T {
  return new Proxy(target, {
    get(object, key) {
      if (key === property) return replacement;
      const value: unknown = Reflect.get(object, key, object);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
    },
  });
}

/**
 * Returns a client that behaves like `client` (same type, same other methods) but records every
 * `chat.completions.create` made inside a rollout (`gatherTrajectoryGroups`, `recordTrajectory`)
 * into that rollout's trajectory: the new request messages, then the first Choice of the response
 * with its logprobs. Outside a rollout it only applies `defaults`, which fill the keys a request
 * leaves `undefined` or `null` (`model` also when `''`); the request's own values win.
 * Concurrent rollouts may share one wrapped client. Requests without a `signal` get the rollout's
 * signal, so a cancelled or timed-out rollout stops its requests.
 *
 * Wrapping an already captured client again records each completion once (the new wrapper only
 * adds its defaults).
 *
 * Streaming (`stream: true`) is recorded once, as soon as the chunk with the first choice's
 * `finish_reason` has been read through `for await` (so a reader that stops there, as agent
 * frameworks do, is recorded), or at the end of the stream; a stream left before its
 * `finish_reason`, or read through `tee()`/`toReadableStream()`, is not recorded. With `n > 1`
 * only the first choice is recorded. The `openai` SDK's `.withResponse()` keeps working (with
 * `openai` 6 and 7, through the SDK's own promise when it offers one; any other client gets a
 * plain promise); `.asResponse()` (the raw, unparsed response) is not recorded.
 * @example
 * const client = captureCompletions(new OpenAI({ baseURL, apiKey }), { defaults: { logprobs: true } });
 * const groups = await gatherTrajectoryGroups(scenarios, async (scenario) => {
 *   await client.chat.completions.create({ model, messages: [{ role: 'user', content: scenario.question }] });
 * });
 */
export function captureCompletions<T extends ChatCompletionsClient>(
  client: T,
  options: CaptureCompletionsOptions = {},
): T {
  const defaults = options.defaults ?? {};
  const completions = client.chat.completions;
  // An inner wrapper already records; this one then only adds its defaults and the signal.
  const innerRecords = (completions.create as { [RECORDS]?: boolean })[RECORDS] === true;
  const create = (
    body: ChatCompletionCreateBody,
    requestOptions?: ChatCompletionRequestOptions,
  ): PromiseLike<unknown> => {
    const merged = withDefaults(body, typeof defaults === 'function' ? defaults() : defaults);
    const scope = currentRolloutScope();
    if (scope === undefined || innerRecords) return completions.create(merged, requestOptions);
    let effectiveOptions = requestOptions;
    if (scope.signal !== undefined && (requestOptions?.signal ?? undefined) === undefined) {
      effectiveOptions = { ...requestOptions, signal: scope.signal };
    }
    const pending = completions.create(merged, effectiveOptions);
    const recordResponse = (response: unknown): unknown => {
      if (merged.stream === true) return captureStream(response, (choice) => record(scope, merged, choice));
      record(scope, merged, firstChoice(response));
      return response;
    };
    // The openai SDK's APIPromise (6 and 7) can transform its data and stay an APIPromise, which
    // keeps `.withResponse()` working. `_thenUnwrap` is private to the SDK, so it is only used when
    // present; any other client (or an SDK without it) gets a plain promise.
    const thenUnwrap = (pending as { _thenUnwrap?: unknown })._thenUnwrap;
    if (typeof thenUnwrap === 'function') {
      return (thenUnwrap as (transform: (data: unknown) => unknown) => PromiseLike<unknown>).call(
        pending,
        recordResponse,
      );
    }
    return Promise.resolve(pending).then(recordResponse);
  };
  Object.defineProperty(create, RECORDS, { value: true });
  const wrappedCompletions = withProperty(completions, 'create', create);
  const wrappedChat = withProperty(client.chat, 'completions', wrappedCompletions);
  return withProperty(client, 'chat', wrappedChat);
}
