/** Chat-completions requests and responses, the inference model list, and SFT data rows. */
import { z } from 'zod';
import { Choice, ChoiceLogprobs } from './choice.js';
import type { Closed } from './closed.js';
import { ChatCompletionMessageParam, ChatCompletionToolParam } from './messages.js';

/** The contract's own (deliberately loose) request schema: `model` and object `messages`. */
export const ChatCompletionRequest = z.looseObject({
  model: z.string(),
  messages: z.array(z.record(z.string(), z.unknown())),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

/** `tool_choice` of a request: a mode or a named tool. */
export const ChatCompletionToolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) }),
  z.looseObject({ type: z.literal('custom'), custom: z.looseObject({ name: z.string() }) }),
  z.looseObject({ type: z.literal('allowed_tools') }),
]);
export type ChatCompletionToolChoice = z.infer<typeof ChatCompletionToolChoice>;

/**
 * Drops `tool_calls: null` from assistant messages. Callers echo a response message (where
 * `tool_calls` is nullable) back as a param (where it is not); the hosted service takes any
 * object as a message, so refusing that would break scripts that work there.
 */
function dropNullToolCalls(messages: unknown): unknown {
  if (!Array.isArray(messages)) return messages;
  return messages.map((message: unknown) => {
    if (message === null || typeof message !== 'object') return message;
    const { tool_calls: toolCalls, ...rest } = message as Record<string, unknown>;
    return rest['role'] === 'assistant' && toolCalls === null ? rest : message;
  });
}

/**
 * An OpenAI chat-completions request, typed for what the local service honours: a narrower,
 * typed form of the contract's loose {@link ChatCompletionRequest}. Unknown keys pass (the openai
 * SDK and agent frameworks send many); an echoed response message's `tool_calls: null` is dropped.
 * @example
 * ChatCompletionRequestBody.parse({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], logprobs: true });
 */
export const ChatCompletionRequestBody = z.looseObject({
  model: z.string(),
  messages: z.preprocess(dropNullToolCalls, z.array(ChatCompletionMessageParam).min(1)),
  n: z.int().min(1).max(128).nullable().optional(),
  max_tokens: z.int().min(1).nullable().optional(),
  max_completion_tokens: z.int().min(1).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  stop: z
    .union([z.string(), z.array(z.string()).max(4)])
    .nullable()
    .optional(),
  seed: z.int().nullable().optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.int().min(0).max(20).nullable().optional(),
  tools: z.array(ChatCompletionToolParam).nullable().optional(),
  tool_choice: ChatCompletionToolChoice.nullable().optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  return_tokens_as_token_ids: z.boolean().nullable().optional(),
  /**
   * Extra variables for the model's chat template, as vLLM takes them (`apply_chat_template(**kwargs)`):
   * `{ enable_thinking: false }` renders Qwen3's prompt without thinking. Real models only.
   */
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullable().optional(),
});
export type ChatCompletionRequestBody = z.output<typeof ChatCompletionRequestBody>;

/** Token counts of a completion. */
export const CompletionUsage = z.looseObject({
  prompt_tokens: z.int(),
  completion_tokens: z.int(),
  total_tokens: z.int(),
});
export type CompletionUsage = z.infer<typeof CompletionUsage>;

/**
 * What a policy engine returns for a request (`{choices, usage}`); the service wraps it into a
 * `chat.completion`.
 */
export const ChatCompletionResult = z.object({
  choices: z.array(Choice),
  usage: CompletionUsage,
});
export type ChatCompletionResult = z.infer<typeof ChatCompletionResult>;

/** A full OpenAI `chat.completion` object. */
export const ChatCompletionResponseBody = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.int(),
  model: z.string(),
  choices: z.array(Choice),
  usage: CompletionUsage.optional(),
  system_fingerprint: z.string().nullable().optional(),
});
export type ChatCompletionResponseBody = z.infer<typeof ChatCompletionResponseBody>;

/** One server-sent chunk of a streamed completion (`chat.completion.chunk`). */
export const ChatCompletionChunk = z.looseObject({
  id: z.string(),
  object: z.literal('chat.completion.chunk'),
  created: z.int(),
  model: z.string(),
  choices: z.array(
    z.looseObject({
      index: z.int(),
      delta: z.record(z.string(), z.unknown()),
      finish_reason: z.string().nullable(),
      logprobs: ChoiceLogprobs.nullable().optional(),
    }),
  ),
  usage: CompletionUsage.nullable().optional(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunk>;

/** The contract's loose message of a response choice. */
export const ChatMessage = z.looseObject({ content: z.unknown().optional() });
export type ChatMessage = z.infer<typeof ChatMessage>;

/** The contract's loose response choice. */
export const ChatChoice = z.looseObject({ message: ChatMessage.nullable().optional() });
export type ChatChoice = z.infer<typeof ChatChoice>;

/** The contract's loose response schema: `choices` of loose choices. */
export const ChatCompletionResponse = z.looseObject({ choices: z.array(ChatChoice).optional() });
export type ChatCompletionResponse = z.infer<typeof ChatCompletionResponse>;

/**
 * One line of an SFT JSONL file: a conversation whose assistant turn(s) are learned, and the tools
 * (function or custom) offered in it. The type has no index signature, so the openai SDK's types
 * fit (`messages: OpenAI.ChatCompletionMessageParam[]`, `tools: OpenAI.ChatCompletionTool[]`);
 * the schema still keeps unknown keys.
 * @example
 * const row: SFTRow = { messages: [{ role: 'user', content: '2+2?' }, { role: 'assistant', content: '4' }] };
 */
export const SFTRow = z.looseObject({
  messages: z.array(ChatCompletionMessageParam).min(1),
  tools: z.array(ChatCompletionToolParam).nullable().optional(),
});
export type SFTRow = Closed<z.infer<typeof SFTRow>>;

/**
 * One model of the inference API's `GET /v1/models`: `created` in unix seconds, and `root`, the
 * model it derives from (a trained model's base model; a base model's own id).
 */
export const InferenceModel = z.looseObject({
  id: z.string(),
  object: z.literal('model').default('model'),
  created: z.int().optional(),
  owned_by: z.string().optional(),
  root: z.string().optional(),
});
export type InferenceModel = z.output<typeof InferenceModel>;

/** Response of the inference API's `GET /v1/models`. */
export const InferenceModelList = z.looseObject({
  object: z.literal('list').default('list'),
  data: z.array(InferenceModel),
});
export type InferenceModelList = z.output<typeof InferenceModelList>;
