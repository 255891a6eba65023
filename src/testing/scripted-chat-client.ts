/**
 * A deterministic chat-completions client that answers from a script: for testing rollouts,
 * reward functions and judges without a model. It is a user-facing stand-in for any
 * OpenAI-compatible client, not a stand-in for the training service.
 */
import { abortReason } from '../internal/delay.js';
import { PolicyloopError } from '../internal/errors.js';
import type {
  ChatCompletionCreateBody,
  ChatCompletionRequestOptions,
  ChatCompletionsClient,
} from '../schema/chat-client.js';
import type { Choice } from '../schema/index.js';
import { makeChoice, type MakeChoiceOptions } from './make-choice.js';

/** A request the scripted client received. */
export interface ScriptedRequest {
  /** The body (a copy). */
  readonly body: ChatCompletionCreateBody & Record<string, unknown>;
  /** Whether a signal came with it. */
  readonly hasSignal: boolean;
}

/**
 * One scripted answer: text (made into a Choice with logprobs), a Choice, a whole `chat.completion`
 * object (anything with `choices`), an Error to throw, or a function of the request returning one
 * of these.
 */
export type ScriptedResponse =
  | string
  | Choice
  | { readonly choices: readonly unknown[]; readonly [key: string]: unknown }
  | Error
  | ((request: ScriptedRequest) => ScriptedResponse | Promise<ScriptedResponse>);

/** Options of {@link scriptedChatClient}. */
export interface ScriptedChatClientOptions {
  /**
   * Start again from the first response when the script runs out (instead of failing).
   * @default false
   */
  loop?: boolean | undefined;
  /**
   * How text responses are made into Choices.
   * @default {}
   */
  choice?: MakeChoiceOptions | undefined;
}

/** The scripted client: a `ChatCompletionsClient` that also shows what it was asked. */
export interface ScriptedChatClient extends ChatCompletionsClient {
  /** Every request received, in order. */
  readonly requests: ScriptedRequest[];
}

let completionCounter = 0;

type ScriptedValue = Exclude<ScriptedResponse, Error | ((request: ScriptedRequest) => unknown)>;

function completionOf(response: ScriptedValue, model: string, options: MakeChoiceOptions): Record<string, unknown> {
  completionCounter += 1;
  const base = {
    id: `chatcmpl-scripted-${completionCounter}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
  };
  if (typeof response === 'string') return { ...base, choices: [makeChoice(response, options)] };
  if ('choices' in response) return { ...base, ...structuredClone(response) };
  return { ...base, choices: [structuredClone(response)] };
}

/** The chunks a streamed request would have produced for this completion (content in one delta). */
async function* chunksOf(completion: Record<string, unknown>): AsyncGenerator<Record<string, unknown>> {
  const choices = completion['choices'] as Choice[];
  const { id, created, model } = completion;
  for (const choice of choices) {
    const delta: Record<string, unknown> = { role: 'assistant', content: choice.message.content ?? null };
    if (choice.message.tool_calls) {
      delta['tool_calls'] = choice.message.tool_calls.map((call, index) => ({ index, ...call }));
    }
    const chunk = { id, object: 'chat.completion.chunk', created, model };
    yield {
      ...chunk,
      choices: [{ index: choice.index, delta, finish_reason: null, logprobs: choice.logprobs ?? null }],
    };
    yield { ...chunk, choices: [{ index: choice.index, delta: {}, finish_reason: choice.finish_reason }] };
  }
}

/**
 * A client whose `chat.completions.create` answers from `responses`, in order, recording every
 * request. Honours `signal` and `stream: true` (an async iterable of chunks). Running out of
 * script rejects with a clear error (unless `loop`).
 * @example
 * const client = scriptedChatClient(['4', (request) => `you said ${request.body.messages.length} messages`]);
 * const judge = relativeJudge({ client: scriptedChatClient(['{"scores": [...]}']), model: 'judge' });
 */
export function scriptedChatClient(
  responses: readonly ScriptedResponse[],
  options: ScriptedChatClientOptions = {},
): ScriptedChatClient {
  const requests: ScriptedRequest[] = [];
  let next = 0;
  const create = async (
    body: ChatCompletionCreateBody,
    requestOptions?: ChatCompletionRequestOptions,
  ): Promise<unknown> => {
    const signal = requestOptions?.signal ?? undefined;
    if (signal?.aborted === true) throw abortReason(signal);
    const request: ScriptedRequest = {
      body: structuredClone(body) as ChatCompletionCreateBody & Record<string, unknown>,
      hasSignal: signal !== undefined,
    };
    requests.push(request);
    if (next >= responses.length && options.loop === true && responses.length > 0) next = 0;
    const position = next;
    let response: ScriptedResponse | undefined = responses[position];
    next += 1;
    if (response === undefined) {
      throw new PolicyloopError(
        `scriptedChatClient got request ${requests.length} but has only ${responses.length} scripted responses`,
      );
    }
    while (typeof response === 'function') response = await response(request);
    // The scripted function may have awaited; a request aborted meanwhile must not answer.
    signal?.throwIfAborted();
    if (response instanceof Error) throw response;
    const completion = completionOf(response, body.model, options.choice ?? {});
    return body.stream === true ? chunksOf(completion) : completion;
  };
  return { requests, chat: { completions: { create } } };
}
