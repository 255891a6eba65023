/**
 * Splitting a real model's completion into content, tool calls and reasoning, the way its family
 * writes them:
 * - `hermes` (Qwen2.5, Qwen3 and every template that prints `<tool_call>`): one
 *   `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` block per call, several in a row
 *   for parallel calls, text around them kept as content;
 * - `llama3-json` (Llama 3.x): the whole completion is `{"name": ..., "parameters": {...}}`
 *   (optionally after `<|python_tag|>`; several objects separated by `;` are several calls).
 *
 * A completion that is not well formed (an unclosed or stray block, a body that is not a JSON
 * object with a string `name` and object arguments) has no tool calls: all its text is content.
 * `<think>...</think>` (Qwen3) is taken out of the content and returned as `reasoning`.
 */
import { createHash } from 'node:crypto';
import type { ChatCompletionMessageToolCall, ChatCompletionToolParam } from '../schema/index.js';

/** How a model family writes tool calls. */
export type ToolCallFormat = 'hermes' | 'llama3-json';

/** A tool call found in text, before it gets its OpenAI shape. */
interface FoundCall {
  readonly name: string;
  readonly arguments: unknown;
}

/** What {@link parseAssistantText} returns. */
export interface ParsedAssistantText {
  content: string | null;
  tool_calls?: ChatCompletionMessageToolCall[] | undefined;
  reasoning?: string | undefined;
  /**
   * The family whose tool-call markup the text holds when no call was parsed from it: another
   * family's (`mistral` `[TOOL_CALLS]`, `hermes` `<tool_call>` in a Llama reply, ...), or this
   * family's written wrong (an unclosed block, a body that is no call). Absent otherwise.
   */
  unparsedToolCall?: string | undefined;
}

/**
 * Tool-call markup by family, for text the parser could not read as calls: what it looks like
 * when a model writes another family's format (or its own, malformed).
 */
const TOOL_CALL_MARKUP: readonly (readonly [family: string, pattern: RegExp])[] = [
  ['hermes', /<\/?tool_call>/],
  ['llama3-json', /<\|python_tag\|>|^\s*\[?\s*\{\s*"name"\s*:\s*"[^"]*"\s*,\s*"(?:parameters|arguments)"\s*:/],
  ['mistral', /\[TOOL_CALLS\]/],
  ['functionary', /<function=[^>]+>/],
  ['deepseek', /<｜tool▁calls?▁begin｜>|<｜tool▁call▁begin｜>/],
  ['command-r', /Action:\s*```json/],
];

/** The family of the tool-call markup `text` holds, or undefined when it looks like none. */
function toolCallMarkup(text: string): string | undefined {
  return TOOL_CALL_MARKUP.find(([, pattern]) => pattern.test(text))?.[0];
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';
const CALL_OPEN = '<tool_call>';
const CALL_CLOSE = '</tool_call>';
const PYTHON_TAG = '<|python_tag|>';

function stripNewlines(text: string): string {
  return text.replace(/^\n+/, '').replace(/\n+$/, '');
}

/**
 * Splits Qwen3's reasoning from the answer, as its chat template does when it renders an earlier
 * turn: reasoning is what precedes the first `</think>` (after `<think>`), the answer what follows
 * the last one. A completion that opens `<think>` and never closes it (cut by `max_tokens`) is all
 * reasoning and has no answer.
 */
export function splitReasoning(text: string): { answer: string; reasoning: string | null } {
  const close = text.indexOf(THINK_CLOSE);
  if (close >= 0) {
    const before = text.slice(0, close);
    const open = before.lastIndexOf(THINK_OPEN);
    const reasoning = stripNewlines(open >= 0 ? before.slice(open + THINK_OPEN.length) : before);
    const answer = text.slice(text.lastIndexOf(THINK_CLOSE) + THINK_CLOSE.length);
    return { answer, reasoning };
  }
  const start = text.trimStart();
  if (start.startsWith(THINK_OPEN)) return { answer: '', reasoning: stripNewlines(start.slice(THINK_OPEN.length)) };
  return { answer: text, reasoning: null };
}

function callFrom(value: unknown, argumentKeys: readonly string[]): FoundCall | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const record = value as Record<string, unknown>;
  const name = record['name'];
  if (typeof name !== 'string' || name.length === 0) return null;
  const key = argumentKeys.find((candidate) => candidate in record);
  const args = key === undefined ? {} : record[key];
  if (typeof args === 'string') {
    // Some models write the arguments as a JSON string; accept it when it holds an object.
    try {
      const parsed: unknown = JSON.parse(args);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return { name, arguments: parsed };
    } catch {
      return null;
    }
    return null;
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return null;
  return { name, arguments: args };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Hermes blocks: the calls and the text outside them, or null when any block is malformed. */
function hermesCalls(text: string): { calls: FoundCall[]; outside: string } | null {
  const calls: FoundCall[] = [];
  let outside = '';
  let position = 0;
  for (;;) {
    const open = text.indexOf(CALL_OPEN, position);
    const strayClose = text.indexOf(CALL_CLOSE, position);
    if (open < 0) {
      if (strayClose >= 0) return null;
      outside += text.slice(position);
      break;
    }
    if (strayClose >= 0 && strayClose < open) return null;
    const close = text.indexOf(CALL_CLOSE, open + CALL_OPEN.length);
    if (close < 0) return null;
    const body = text.slice(open + CALL_OPEN.length, close);
    if (body.includes(CALL_OPEN)) return null;
    const call = callFrom(parseJson(body.trim()), ['arguments', 'parameters']);
    if (!call) return null;
    calls.push(call);
    outside += text.slice(position, open);
    position = close + CALL_CLOSE.length;
  }
  return { calls, outside };
}

/** Top-level JSON objects of `text` separated by `;` (and whitespace), or null when it is anything else. */
function jsonObjectTexts(text: string): string[] | null {
  const objects: string[] = [];
  let index = 0;
  const skipSeparators = (allowSemicolon: boolean): void => {
    while (index < text.length && (/\s/.test(text[index] as string) || (allowSemicolon && text[index] === ';')))
      index += 1;
  };
  skipSeparators(false);
  while (index < text.length) {
    if (text[index] !== '{') return null;
    const start = index;
    let depth = 0;
    let inString = false;
    for (; index < text.length; index += 1) {
      const char = text[index];
      if (inString) {
        if (char === '\\') index += 1;
        else if (char === '"') inString = false;
      } else if (char === '"') inString = true;
      else if (char === '{') depth += 1;
      else if (char === '}') {
        depth -= 1;
        if (depth === 0) break;
      }
    }
    if (depth !== 0) return null;
    index += 1;
    objects.push(text.slice(start, index));
    skipSeparators(true);
  }
  return objects.length > 0 ? objects : null;
}

/** Llama 3.x JSON calls: the whole text is the call(s), or null. */
function llamaCalls(text: string): FoundCall[] | null {
  let body = text.trim();
  if (body.startsWith(PYTHON_TAG)) body = body.slice(PYTHON_TAG.length).trim();
  const whole = parseJson(body);
  const values = Array.isArray(whole) ? whole : whole !== undefined ? [whole] : null;
  const texts = values ? null : jsonObjectTexts(body);
  const candidates = values ?? texts?.map(parseJson) ?? null;
  if (!candidates || candidates.length === 0) return null;
  const calls: FoundCall[] = [];
  for (const candidate of candidates) {
    const call = callFrom(candidate, ['parameters', 'arguments']);
    if (!call) return null;
    calls.push(call);
  }
  return calls;
}

/** The default id of the call at `index`: stable for the same completion text. */
export function stableCallId(text: string, index: number): string {
  return `call_${createHash('sha256').update(`${index}\u0000${text}`).digest('hex').slice(0, 24)}`;
}

function openAICall(call: FoundCall, id: string, customTools: ReadonlySet<string>): ChatCompletionMessageToolCall {
  if (customTools.has(call.name)) {
    const args = call.arguments as Record<string, unknown>;
    const keys = Object.keys(args);
    const input = keys.length === 1 && typeof args['input'] === 'string' ? args['input'] : JSON.stringify(args);
    return { id, type: 'custom', custom: { name: call.name, input } };
  }
  return { id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.arguments) } };
}

/**
 * Splits a completion into content, tool calls and reasoning (see the module comment).
 * `makeId` names the calls (default {@link stableCallId}); a call to one of `tools`' custom tools
 * becomes a custom tool call (its `input` is the `input` argument).
 */
export function parseAssistantText(
  text: string,
  format: ToolCallFormat,
  options: {
    readonly makeId?: ((index: number) => string) | undefined;
    readonly tools?: readonly ChatCompletionToolParam[] | null | undefined;
  } = {},
): ParsedAssistantText {
  const { answer, reasoning } = splitReasoning(text);
  const result: ParsedAssistantText = { content: null };
  if (reasoning) result.reasoning = reasoning;
  let calls: FoundCall[] | null = null;
  let outside = answer;
  if (format === 'hermes') {
    const found = hermesCalls(answer);
    if (found && found.calls.length > 0) {
      calls = found.calls;
      outside = found.outside;
    }
  } else {
    calls = llamaCalls(answer);
    if (calls) outside = '';
  }
  // Around calls the text is trimmed; plain text stays as written (after reasoning, without the
  // newlines that separate it from `</think>`, which the template adds back).
  const content = calls ? outside.trim() : reasoning === null ? answer : answer.replace(/^\n+/, '');
  result.content = content.length > 0 ? content : null;
  if (!calls || calls.length === 0) {
    const markup = toolCallMarkup(answer);
    if (markup !== undefined) result.unparsedToolCall = markup;
  }
  if (calls && calls.length > 0) {
    const customTools = new Set(
      (options.tools ?? []).flatMap((tool) => (tool.type === 'custom' ? [tool.custom.name] : [])),
    );
    const makeId = options.makeId ?? ((index: number) => stableCallId(text, index));
    result.tool_calls = calls.map((call, index) => openAICall(call, makeId(index), customTools));
  }
  return result;
}
