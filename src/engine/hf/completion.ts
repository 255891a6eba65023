/** Turns sequences sampled from a Hugging Face model into OpenAI-shaped choices. */
import type { Choice } from '../../schema/index.js';
import { tokenLogprobs } from '../completion.js';
import type { GeneratedSequence } from '../sampler.js';
import type { TextLayer } from './text.js';
import type { ParseAssistantOptions as ParseOptions } from './text-layer.js';

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
export function buildHfChoice(sequence: GeneratedSequence, index: number, options: HfChoiceOptions): Choice {
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
  return {
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
