/**
 * When two chat messages are "the same turn". The runner compares what a rollout sends back with
 * what its trajectory already holds, and the echo of a sampled `Choice` (the SDK's message object,
 * with `refusal: null`, `annotations: []` and friends, or a hand-written `{role, content}`) must match
 * that Choice, so only what the model sees is compared: role, text, tool calls, tool call id, name.
 * Agent frameworks re-serialize what they send back, so the comparison normalises: content as a
 * string or as text parts, `null`, `''` or a missing content, missing or `null` fields, and tool-call
 * arguments compared as parsed JSON (key order and whitespace do not count), not as text.
 */
import type { ChatCompletionFunctionToolParam } from '../schema/index.js';

function textOf(content: unknown): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part: unknown) => {
        if (typeof part === 'object' && part !== null) {
          const record = part as Record<string, unknown>;
          if (record['type'] === 'text' && typeof record['text'] === 'string') return record['text'];
          if (record['type'] === 'refusal' && typeof record['refusal'] === 'string') return record['refusal'];
        }
        // Images, audio and files compare by their full value.
        return JSON.stringify(part);
      })
      .join('');
  }
  return JSON.stringify(content);
}

/**
 * A canonical form of a JSON value: object keys sorted, so that key order does not count.
 */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(record)
        .sort()
        .map((key) => [key, canonical(record[key])]),
    );
  }
  return value;
}

/**
 * Tool-call arguments as the model meant them: frameworks parse the model's JSON and serialize it
 * again between steps (`{"a": 1}` comes back as `{"a":1}`, keys possibly reordered), so text that
 * parses as JSON compares by its value; anything else (a cut-off call) compares as text. Arguments
 * already sent as an object compare by their value too.
 */
function argumentsKey(value: unknown): unknown {
  if (typeof value !== 'string') return ['json', canonical(value ?? {})];
  try {
    return ['json', canonical(JSON.parse(value))];
  } catch {
    return ['text', value];
  }
}

function toolCallsOf(message: Record<string, unknown>): unknown[] {
  const calls = message['tool_calls'];
  if (!Array.isArray(calls)) return [];
  return calls.map((call: unknown) => {
    const record = (call ?? {}) as Record<string, unknown>;
    const fn = (record['function'] ?? {}) as Record<string, unknown>;
    const custom = (record['custom'] ?? {}) as Record<string, unknown>;
    return record['type'] === 'custom'
      ? ['custom', record['id'] ?? null, custom['name'] ?? null, custom['input'] ?? null]
      : ['function', record['id'] ?? null, fn['name'] ?? null, argumentsKey(fn['arguments'])];
  });
}

/** A canonical string of what the model sees of a message, for equality tests. */
export function messageKey(message: unknown): string {
  const record = (message ?? {}) as Record<string, unknown>;
  const role = record['role'];
  const functionCall = record['function_call'] as Record<string, unknown> | null | undefined;
  return JSON.stringify([
    role,
    textOf(record['content']),
    toolCallsOf(record),
    record['tool_call_id'] ?? null,
    role === 'function' ? (record['name'] ?? null) : null,
    functionCall ? [functionCall['name'] ?? null, argumentsKey(functionCall['arguments'])] : null,
  ]);
}

/**
 * The function tools of a request's `tools` (what a trajectory's `tools` can hold), or null for
 * none. Custom tools have no place in the trajectory shape and are left out.
 */
export function functionTools(tools: unknown): ChatCompletionFunctionToolParam[] | null {
  if (!Array.isArray(tools)) return null;
  const kept = tools.filter(
    (tool: unknown): tool is ChatCompletionFunctionToolParam =>
      typeof tool === 'object' && tool !== null && (tool as Record<string, unknown>)['type'] === 'function',
  );
  return kept.length > 0 ? kept : null;
}

/** True when two values of `tools` offer the same function tools (null, undefined and `[]` all mean none). */
export function sameTools(a: unknown, b: unknown): boolean {
  return JSON.stringify(functionTools(a)) === JSON.stringify(functionTools(b));
}
