/**
 * Turns sequences sampled from a Hugging Face model (by the local engine or by a remote Tinker
 * sampler) into OpenAI-shaped choices.
 */
import type { ChatCompletionTokenLogprob, Choice } from '../schema/index.js';
import type { ParseAssistantOptions as ParseOptions, TextLayer } from './text-layer.js';

/** One alternative token at a sampled position (`top_logprobs`). */
export interface TokenAlternative {
  readonly id: number;
  readonly logprob: number;
}

/** What a sampler produced for one sequence: the part a `Choice` is built from. */
export interface SampledText {
  /** Sampled tokens that belong to the completion (stop-sequence tokens removed; the end token kept). */
  readonly tokens: readonly number[];
  /** Logprob of each token of `tokens` under the sampling policy. */
  readonly logprobs: readonly number[];
  /** The top alternatives of each token of `tokens` (empty arrays unless asked for). */
  readonly alternatives: readonly (readonly TokenAlternative[])[];
  /** Text of the completion (without the end token and the stop sequence). */
  readonly text: string;
  /** `stop` (end token or stop sequence) or `length` (token budget or context exhausted). */
  readonly finishReason: 'stop' | 'length';
}

/** The part of a tokenizer that names a token in a logprob entry. */
export interface TokenNames {
  tokenString(id: number, asTokenId?: boolean): string;
  tokenBytes(id: number): number[];
}

/**
 * The logprob entries of a sequence in OpenAI's `ChatCompletionTokenLogprob` shape. Every entry
 * has a `top_logprobs` array (empty unless alternatives were asked for): the AI SDK's parser
 * rejects token logprobs without it.
 */
export function tokenLogprobs(
  sequence: Pick<SampledText, 'tokens' | 'logprobs' | 'alternatives'>,
  tokensAsIds: boolean,
  tokenizer: TokenNames,
): ChatCompletionTokenLogprob[] {
  return sequence.tokens.map((id, index) => ({
    token: tokenizer.tokenString(id, tokensAsIds),
    bytes: tokenizer.tokenBytes(id),
    logprob: sequence.logprobs[index] as number,
    top_logprobs: (sequence.alternatives[index] ?? []).map((alternative) => ({
      token: tokenizer.tokenString(alternative.id, tokensAsIds),
      bytes: tokenizer.tokenBytes(alternative.id),
      logprob: alternative.logprob,
    })),
  }));
}

/** How a request wants its choices shaped. */
export interface HfChoiceOptions {
  readonly logprobs: boolean;
  readonly tokensAsIds: boolean;
  /** Parse tool calls (the request offered tools and did not say `tool_choice: "none"`). */
  readonly parseTools: boolean;
  readonly makeId: () => string;
  readonly text: TextLayer;
  /** The request's tools (a call to one of its custom tools becomes a custom tool call). */
  readonly tools: ParseOptions['tools'];
}

/**
 * The `Choice` of one sequence. The model's reasoning (Qwen3's `<think>` block) is moved out of
 * `content` into `reasoning_content`; tool calls are parsed when the request offered tools.
 */
export function buildHfChoice(sequence: SampledText, index: number, options: HfChoiceOptions): Choice {
  const parsed = options.text.parseAssistant(sequence.text, {
    makeId: () => options.makeId(),
    tools: options.tools,
  });
  let content: string | null = parsed.reasoning !== undefined ? parsed.content : sequence.text;
  let finishReason: Choice['finish_reason'] = sequence.finishReason;
  let toolCalls: Choice['message']['tool_calls'];
  if (options.parseTools && parsed.tool_calls && parsed.tool_calls.length > 0) {
    content = parsed.content;
    toolCalls = parsed.tool_calls as Choice['message']['tool_calls'];
    finishReason = 'tool_calls';
  }
  // A reply of a request with tools that holds tool-call markup the parser could not read is
  // flagged (`unparsed_tool_call`: the markup's family), never silently text: the recorder counts
  // it in the trajectory's `tool_calls/unparsed` metric and the gather warns once.
  const unparsed = options.parseTools && !toolCalls ? parsed.unparsedToolCall : undefined;
  return {
    ...(unparsed !== undefined ? { unparsed_tool_call: unparsed } : {}),
    index,
    finish_reason: finishReason,
    message: {
      role: 'assistant',
      content,
      refusal: null,
      ...(toolCalls ? { tool_calls: toolCalls } : {}),
      ...(parsed.reasoning !== undefined ? { reasoning_content: parsed.reasoning } : {}),
    },
    logprobs: options.logprobs
      ? { content: tokenLogprobs(sequence, options.tokensAsIds, options.text), refusal: null }
      : null,
  };
}
