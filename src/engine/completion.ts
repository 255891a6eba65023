/** Turns sampled sequences into OpenAI-shaped choices (message, tool calls, logprobs). */
import type { Choice, ChatCompletionTokenLogprob } from '../schema/index.js';
import type { GeneratedSequence } from './sampler.js';
import { END_TOKEN_ID, tokenBytes, tokenString } from './tokenizer.js';
import { parseToolCalls, toOpenAIToolCalls } from './tool-calls.js';

/** How a request wants its choices shaped. */
export interface ChoiceOptions {
  /** Include `logprobs.content`. */
  readonly logprobs: boolean;
  /** Token strings as `token_id:<id>` (vLLM's `return_tokens_as_token_ids`). */
  readonly tokensAsIds: boolean;
  /** Parse tool calls (the request offered tools and did not say `tool_choice: "none"`). */
  readonly parseTools: boolean;
  /** Names of the request's custom tools. */
  readonly customToolNames: ReadonlySet<string>;
  /** Makes tool call ids. */
  readonly makeId: () => string;
}

/** The logprob entries of a sequence in OpenAI's `ChatCompletionTokenLogprob` shape. */
export function tokenLogprobs(sequence: GeneratedSequence, tokensAsIds: boolean): ChatCompletionTokenLogprob[] {
  return sequence.tokens.map((id, index) => ({
    token: tokenString(id, tokensAsIds),
    bytes: tokenBytes(id),
    logprob: sequence.logprobs[index] as number,
    top_logprobs: (sequence.alternatives[index] ?? []).map((alternative) => ({
      token: tokenString(alternative.id, tokensAsIds),
      bytes: tokenBytes(alternative.id),
      logprob: alternative.logprob,
    })),
  }));
}

/** Builds the `Choice` of one sampled sequence. */
export function buildChoice(sequence: GeneratedSequence, index: number, options: ChoiceOptions): Choice {
  const body =
    sequence.tokens[sequence.tokens.length - 1] === END_TOKEN_ID ? sequence.tokens.slice(0, -1) : sequence.tokens;
  let content: string | null = sequence.text;
  let finishReason: Choice['finish_reason'] = sequence.finishReason;
  let toolCalls: Choice['message']['tool_calls'];
  if (options.parseTools) {
    const parsed = parseToolCalls(body, options.customToolNames);
    if (parsed.toolCalls.length > 0) {
      content = parsed.content;
      toolCalls = toOpenAIToolCalls(parsed.toolCalls, options.makeId);
      finishReason = 'tool_calls';
    }
  }
  return {
    index,
    finish_reason: finishReason,
    message: { role: 'assistant', content, refusal: null, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
    logprobs: options.logprobs ? { content: tokenLogprobs(sequence, options.tokensAsIds), refusal: null } : null,
  };
}
