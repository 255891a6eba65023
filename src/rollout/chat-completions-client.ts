/**
 * The narrowest client the runner and the judge need: anything with `chat.completions.create`
 * (an `openai` v6 client, an agent framework's client, or `scriptedChatClient` from
 * `policyloop/testing`). Nothing else of an SDK is required.
 */

/** A chat-completions request body as the runner sends it (the OpenAI shape; extra keys go through). */
export interface ChatCompletionCreateBody {
  model: string;
  messages: readonly unknown[];
  temperature?: unknown;
  max_tokens?: unknown;
  max_completion_tokens?: unknown;
  logprobs?: unknown;
  top_logprobs?: unknown;
  n?: unknown;
  seed?: unknown;
  stop?: unknown;
  tools?: unknown;
  tool_choice?: unknown;
  response_format?: unknown;
  stream?: unknown;
}

/** Per-request options the runner passes: the `openai` SDK's `signal` and `timeout`. */
export interface ChatCompletionRequestOptions {
  signal?: AbortSignal | null | undefined;
  timeout?: number | undefined;
}

/**
 * Anything with `chat.completions.create(body, options?)` returning a promise of an OpenAI
 * `chat.completion` (or of a stream of chunks when `stream: true`).
 * @example
 * import OpenAI from 'openai';
 * const client: ChatCompletionsClient = new OpenAI({ baseURL, apiKey });
 */
export interface ChatCompletionsClient {
  chat: {
    completions: {
      create(body: ChatCompletionCreateBody, options?: ChatCompletionRequestOptions): PromiseLike<unknown>;
    };
  };
}
