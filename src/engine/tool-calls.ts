/**
 * The text form in which the model writes tool calls, and its parser.
 *
 * A call is the special token `<|tool_call|>`, one JSON object, then `<|/tool_call|>`:
 * - function tools: `<|tool_call|>{"name":"get_weather","arguments":{"city":"Paris"}}<|/tool_call|>`
 * - custom tools:   `<|tool_call|>{"name":"run_shell","input":"ls -la"}<|/tool_call|>`
 *
 * A completion may hold text before, between and after calls (kept as `content`) and several
 * calls. If any call block is unfinished or is not such a JSON object, nothing is parsed and the
 * whole completion stays plain content.
 */
import type { ChatCompletionMessageToolCall } from '../schema/index.js';
import { BYTE_TOKENIZER, specialTokenId } from './tokenizer.js';
import type { Tokenizer } from './tokenizer.js';

const OPEN = specialTokenId('<|tool_call|>');
const CLOSE = specialTokenId('<|/tool_call|>');

/** A tool call in the model's text form, before it gets an id. */
export type ParsedToolCall =
  | { readonly type: 'function'; readonly name: string; readonly arguments: string }
  | { readonly type: 'custom'; readonly name: string; readonly input: string };

/** What {@link parseToolCalls} found in a completion. */
export interface ParsedCompletion {
  /** Text outside the call blocks (the whole text when nothing parsed), or null when empty. */
  readonly content: string | null;
  /** The calls, empty when the completion holds none (or an unparseable one). */
  readonly toolCalls: readonly ParsedToolCall[];
}

/**
 * Token ids of one tool call in the model's text form (what the chat template renders for an
 * assistant message's `tool_calls`, and what the model is expected to write).
 * Function arguments that are a JSON string are embedded as the parsed object.
 *
 * @example
 * formatToolCall({ type: 'function', name: 'add', arguments: '{"a":1}' });
 * // tokens of `<|tool_call|>{"name":"add","arguments":{"a":1}}<|/tool_call|>`
 */
export function formatToolCall(call: ParsedToolCall, tokenizer: Tokenizer = BYTE_TOKENIZER): number[] {
  let body: string;
  if (call.type === 'custom') {
    body = JSON.stringify({ name: call.name, input: call.input });
  } else {
    let args: unknown = call.arguments;
    try {
      args = JSON.parse(call.arguments);
    } catch {
      // Arguments that are not JSON are kept as the string they are.
    }
    body = JSON.stringify({ name: call.name, arguments: args });
  }
  return [OPEN, ...tokenizer.encodeText(body), CLOSE];
}

/** Text of one tool call in the model's text form (see {@link formatToolCall}). */
export function formatToolCallText(call: ParsedToolCall): string {
  return BYTE_TOKENIZER.decodeTokens(formatToolCall(call));
}

function parseCallBody(text: string, customToolNames: ReadonlySet<string>): ParsedToolCall | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const record = value as Record<string, unknown>;
  const name = record['name'];
  if (typeof name !== 'string' || name.length === 0) return null;
  if ('input' in record && !('arguments' in record)) {
    const input = record['input'];
    return { type: 'custom', name, input: typeof input === 'string' ? input : JSON.stringify(input ?? null) };
  }
  const args = record['arguments'] ?? {};
  if (customToolNames.has(name)) {
    return { type: 'custom', name, input: typeof args === 'string' ? args : JSON.stringify(args) };
  }
  if (typeof args === 'string') return { type: 'function', name, arguments: args };
  if (typeof args !== 'object' || args === null) return null;
  return { type: 'function', name, arguments: JSON.stringify(args) };
}

/**
 * Parses the tool calls a completion's tokens contain. `customToolNames` are the request's custom
 * tools: a call to one of them with `arguments` becomes a custom call too. `tokenizer` is the
 * model's (the byte tokenizer by default).
 */
export function parseToolCalls(
  tokens: readonly number[],
  customToolNames: ReadonlySet<string> = new Set(),
  tokenizer: Tokenizer = BYTE_TOKENIZER,
): ParsedCompletion {
  const decodeTokens = (ids: readonly number[]): string => tokenizer.decodeTokens(ids);
  const plain = (): ParsedCompletion => {
    const text = decodeTokens(tokens);
    return { content: text.length > 0 ? text : null, toolCalls: [] };
  };
  const outside: number[] = [];
  const calls: ParsedToolCall[] = [];
  let index = 0;
  while (index < tokens.length) {
    const token = tokens[index] as number;
    if (token === CLOSE) return plain();
    if (token !== OPEN) {
      outside.push(token);
      index += 1;
      continue;
    }
    const close = tokens.indexOf(CLOSE, index + 1);
    if (close < 0) return plain();
    const body = tokens.slice(index + 1, close);
    if (body.includes(OPEN)) return plain();
    const call = parseCallBody(decodeTokens(body), customToolNames);
    if (!call) return plain();
    calls.push(call);
    index = close + 1;
  }
  if (calls.length === 0) return plain();
  const text = decodeTokens(outside).trim();
  return { content: text.length > 0 ? text : null, toolCalls: calls };
}

/** Gives parsed calls their OpenAI shape with ids from `makeId`. */
export function toOpenAIToolCalls(
  calls: readonly ParsedToolCall[],
  makeId: () => string,
): ChatCompletionMessageToolCall[] {
  return calls.map((call) =>
    call.type === 'custom'
      ? { id: makeId(), type: 'custom', custom: { name: call.name, input: call.input } }
      : { id: makeId(), type: 'function', function: { name: call.name, arguments: call.arguments } },
  );
}
