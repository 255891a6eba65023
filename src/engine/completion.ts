/** Turns sampled sequences into OpenAI-shaped choices (message, tool calls, logprobs). */
import type { Choice } from '../schema/index.js';
import { tokenLogprobs } from '../text/choice.js';
import type { GeneratedSequence } from './sampler.js';
import { BYTE_TOKENIZER, END_TOKEN_ID } from './tokenizer.js';
import type { Tokenizer } from './tokenizer.js';
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
  /** The model's tokenizer (the byte tokenizer when absent). */
  readonly tokenizer?: Tokenizer | undefined;
}

/** Builds the `Choice` of one sampled sequence. */
export function buildChoice(sequence: GeneratedSequence, index: number, options: ChoiceOptions): Choice {
  const body =
    sequence.tokens[sequence.tokens.length - 1] === END_TOKEN_ID ? sequence.tokens.slice(0, -1) : sequence.tokens;
  let content: string | null = sequence.text;
  let finishReason: Choice['finish_reason'] = sequence.finishReason;
  let toolCalls: Choice['message']['tool_calls'];
  if (options.parseTools) {
    const parsed = parseToolCalls(body, options.customToolNames, options.tokenizer);
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
    logprobs: options.logprobs
      ? { content: tokenLogprobs(sequence, options.tokensAsIds, options.tokenizer ?? BYTE_TOKENIZER), refusal: null }
      : null,
  };
}
