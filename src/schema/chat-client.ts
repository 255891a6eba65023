/**
 * The narrowest client the runner and the judge need: anything with `chat.completions.create`
 * (an `openai` client, an agent framework's client, or `scriptedChatClient` from
 * `policyloop/testing`). Nothing else of an SDK is required. It lives here, below both `rollout/`
 * and `rewards/`, because both take one.
 */

/** A chat-completions request body as the runner sends it (the OpenAI shape; extra keys go through). */
export interface ChatCompletionCreateBody {
  /** The model to call. */
  model: string;
  /** The conversation so far (OpenAI message params). */
  messages: readonly unknown[];
  /** Sampling temperature. */
  temperature?: unknown;
  /** Most tokens to generate (legacy name). */
  max_tokens?: unknown;
  /** Most tokens to generate. */
  max_completion_tokens?: unknown;
  /** Return token logprobs (training needs them). */
  logprobs?: unknown;
  /** Alternatives per token in the logprobs. */
  top_logprobs?: unknown;
  /** Choices to sample (only the first is recorded). */
  n?: unknown;
  /** Sampling seed. */
  seed?: unknown;
  /** Stop sequences. */
  stop?: unknown;
  /** Tools offered to the model (recorded as the trajectory's `tools`). */
  tools?: unknown;
  /** Which tool the model must or may call. */
  tool_choice?: unknown;
  /** Structured output format. */
  response_format?: unknown;
  /** Stream chunks (recorded once the chunk with `finish_reason` is read). */
  stream?: unknown;
}

/** Per-request options the runner passes: the `openai` SDK's `signal` and `timeout`. */
export interface ChatCompletionRequestOptions {
  /** Aborts the request. */
  signal?: AbortSignal | null | undefined;
  /** Limit of the request, in milliseconds. */
  timeout?: number | undefined;
  /** Retries of the client itself (the `openai` SDK's; the judge sends 0 and retries on its own). */
  maxRetries?: number | undefined;
}

/**
 * Anything with `chat.completions.create(body, options?)` returning a promise of an OpenAI
 * `chat.completion` (or of a stream of chunks when `stream: true`).
 * @example
 * import OpenAI from 'openai';
 * const client: ChatCompletionsClient = new OpenAI({ baseURL, apiKey });
 */
export interface ChatCompletionsClient {
  /** The chat API: only `completions.create` is used. */
  chat: {
    completions: {
      create(body: ChatCompletionCreateBody, options?: ChatCompletionRequestOptions): PromiseLike<unknown>;
    };
  };
}
