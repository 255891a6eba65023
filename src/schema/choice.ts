/**
 * What a model returns: `Choice`, its `ChatCompletionMessage` and logprobs. These are the trainable
 * items of a trajectory. All of them allow additional properties, as the contract says.
 */
import { z } from 'zod';
import { ChatCompletionMessageToolCall, FunctionCall } from './messages.js';

/** One alternative token and its logprob. `bytes` lets a trainer recover the exact token. */
export const TopLogprob = z.looseObject({
  token: z.string(),
  bytes: z.array(z.int()).nullable().optional(),
  logprob: z.number(),
});
export type TopLogprob = z.infer<typeof TopLogprob>;

/** A sampled token, its logprob under the sampling distribution, and the top alternatives. */
export const ChatCompletionTokenLogprob = z.looseObject({
  token: z.string(),
  bytes: z.array(z.int()).nullable().optional(),
  logprob: z.number(),
  top_logprobs: z.array(TopLogprob),
});
export type ChatCompletionTokenLogprob = z.infer<typeof ChatCompletionTokenLogprob>;

/** Short name for {@link ChatCompletionTokenLogprob}. */
export const TokenLogprob = ChatCompletionTokenLogprob;
export type TokenLogprob = ChatCompletionTokenLogprob;

/** Log probability information for a choice. */
export const ChoiceLogprobs = z.looseObject({
  content: z.array(ChatCompletionTokenLogprob).nullable().optional(),
  refusal: z.array(ChatCompletionTokenLogprob).nullable().optional(),
});
export type ChoiceLogprobs = z.infer<typeof ChoiceLogprobs>;

/** A URL citation. */
export const AnnotationURLCitation = z.looseObject({
  end_index: z.int(),
  start_index: z.int(),
  title: z.string(),
  url: z.string(),
});
export type AnnotationURLCitation = z.infer<typeof AnnotationURLCitation>;

/** A URL citation annotation on a model message. */
export const Annotation = z.looseObject({
  type: z.literal('url_citation'),
  url_citation: AnnotationURLCitation,
});
export type Annotation = z.infer<typeof Annotation>;

/** Audio returned by the model. */
export const ChatCompletionAudio = z.looseObject({
  id: z.string(),
  data: z.string(),
  expires_at: z.int(),
  transcript: z.string(),
});
export type ChatCompletionAudio = z.infer<typeof ChatCompletionAudio>;

/** The message a model generated. */
export const ChatCompletionMessage = z.looseObject({
  role: z.literal('assistant'),
  content: z.string().nullable().optional(),
  refusal: z.string().nullable().optional(),
  annotations: z.array(Annotation).nullable().optional(),
  audio: ChatCompletionAudio.nullable().optional(),
  function_call: FunctionCall.nullable().optional(),
  tool_calls: z.array(ChatCompletionMessageToolCall).nullable().optional(),
});
export type ChatCompletionMessage = z.infer<typeof ChatCompletionMessage>;

/** Why the model stopped. */
export const FinishReason = z.enum(['stop', 'length', 'tool_calls', 'content_filter', 'function_call']);
export type FinishReason = z.infer<typeof FinishReason>;

/**
 * One sampled completion, as returned by chat completions. In a trajectory it is a trainable turn;
 * it has no `role` (that is how it is told apart from messages).
 */
export const Choice = z.looseObject({
  finish_reason: FinishReason,
  index: z.int(),
  logprobs: ChoiceLogprobs.nullable().optional(),
  message: ChatCompletionMessage,
});
export type Choice = z.infer<typeof Choice>;
