/**
 * When two chat messages are "the same turn". The runner compares what a rollout sends back with
 * what its trajectory already holds, and the echo of a sampled `Choice` (the SDK's message object,
 * with `refusal: null`, `annotations: []` and friends, or a hand-written `{role, content}`) must match
 * that Choice, so only what the model sees is compared: role, text, tool calls, tool call id, name.
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

function toolCallsOf(message: Record<string, unknown>): unknown[] {
  const calls = message['tool_calls'];
  if (!Array.isArray(calls)) return [];
  return calls.map((call: unknown) => {
    const record = (call ?? {}) as Record<string, unknown>;
    const fn = (record['function'] ?? {}) as Record<string, unknown>;
    const custom = (record['custom'] ?? {}) as Record<string, unknown>;
    return record['type'] === 'custom'
      ? ['custom', record['id'], custom['name'], custom['input']]
      : ['function', record['id'], fn['name'], fn['arguments']];
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
    functionCall ? [functionCall['name'], functionCall['arguments']] : null,
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
