/** Building `Choice`s by hand, for testing reward functions and trajectories. */
import type { ChatCompletionTokenLogprob, Choice, FinishReason } from '../schema/index.js';

/** A tool call for {@link makeChoice}: arguments as an object (JSON-encoded for you) or a string. */
export interface MakeToolCall {
  /** The function's name. */
  readonly name: string;
  /** The arguments: a string is sent as it is, anything else as its JSON. */
  readonly arguments?: unknown;
  /** @default `call_<n>` */
  readonly id?: string | undefined;
}

/** Options of {@link makeChoice}. */
export interface MakeChoiceOptions {
  /**
   * Logprobs to attach: `true` for one entry of logprob -0.1 per word-ish token of the text, an
   * array of numbers for those logprobs (one token per number), full token logprobs as they are,
   * or `false` for none (`logprobs: null`, as a request without `logprobs: true` returns).
   * @default true
   */
  logprobs?: boolean | readonly number[] | readonly ChatCompletionTokenLogprob[] | undefined;
  /** Tool calls the model made. */
  toolCalls?: readonly MakeToolCall[] | undefined;
  /** @default 'tool_calls' with tool calls, else 'stop' */
  finishReason?: FinishReason | undefined;
  /** @default 0 */
  index?: number | undefined;
}

/** Splits text into word-ish tokens (leading whitespace kept), so logprobs have a plausible length. */
function pseudoTokens(text: string): string[] {
  return text.match(/\s*\S+|\s+/g) ?? [];
}

function tokenLogprobs(text: string, logprobs: MakeChoiceOptions['logprobs']): ChatCompletionTokenLogprob[] | null {
  if (logprobs === false) return null;
  if (logprobs === undefined || logprobs === true) {
    return pseudoTokens(text).map((token) => ({
      token,
      logprob: -0.1,
      bytes: [...Buffer.from(token)],
      top_logprobs: [],
    }));
  }
  if (logprobs.length > 0 && typeof logprobs[0] === 'number') {
    const tokens = pseudoTokens(text);
    return (logprobs as readonly number[]).map((logprob, index) => {
      const token = tokens[index] ?? '';
      return { token, logprob, bytes: [...Buffer.from(token)], top_logprobs: [] };
    });
  }
  return structuredClone(logprobs as ChatCompletionTokenLogprob[]);
}

/**
 * A `Choice` as chat completions return it, with logprobs by default.
 * @example
 * makeChoice('4');
 * makeChoice(null, { toolCalls: [{ name: 'add', arguments: { a: 2, b: 2 } }] });
 * makeChoice('4', { logprobs: [-0.5] });
 */
export function makeChoice(text: string | null, options: MakeChoiceOptions = {}): Choice {
  const toolCalls = (options.toolCalls ?? []).map((call, position) => ({
    id: call.id ?? `call_${position + 1}`,
    type: 'function' as const,
    function: {
      name: call.name,
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
    },
  }));
  // Logprobs cover the tool calls too, as a model writes them as text.
  const callTexts = toolCalls.map((call) =>
    JSON.stringify({ name: call.function.name, arguments: call.function.arguments }),
  );
  const sampledText = (text ?? '') + callTexts.join('');
  const content = tokenLogprobs(sampledText, options.logprobs);
  const choice: Choice = {
    index: options.index ?? 0,
    finish_reason: options.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
    message: { role: 'assistant', content: text, refusal: null },
    logprobs: content === null ? null : { content, refusal: null },
  };
  if (toolCalls.length > 0) choice.message.tool_calls = toolCalls;
  return choice;
}
