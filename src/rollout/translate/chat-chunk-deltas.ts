/**
 * What one `chat.completion.chunk` adds to choice 0, in the order a message holds it: reasoning,
 * text (with its token logprobs), refusal, tool-call pieces; then its `finish_reason` and the
 * stream's `usage`. Both streamed translations (Responses events, Messages events) read chunks
 * through it.
 */
import type { ChatCompletionTokenLogprob } from '../../schema/index.js';

/** A piece of one tool call (chunks give the id and name once, the arguments in pieces). */
export interface ToolCallDelta {
  readonly index: number;
  readonly id: string | undefined;
  readonly name: string | undefined;
  readonly arguments: string;
}

/** Receives the pieces of a chunk. */
export interface ChunkDeltaHandler {
  reasoning(text: string): void;
  text(text: string, logprobs: readonly ChatCompletionTokenLogprob[] | undefined): void;
  refusal(text: string): void;
  toolCall(delta: ToolCallDelta): void;
}

/** What a chunk carried besides its deltas. */
export interface ChunkMeta {
  /** Choice 0's `finish_reason` when this chunk carried it. */
  finishReason: string | undefined;
  /** The stream's `usage`, when this chunk carried it. */
  usage: Record<string, unknown> | undefined;
  /** A matched stop string (vLLM's `stop_reason`), when the chunk names one. */
  stopReason: string | undefined;
}

/** Hands the pieces of `chunk`'s choice 0 to `handler` and returns the rest of what it carried. */
export function readChunk(chunk: unknown, handler: ChunkDeltaHandler): ChunkMeta {
  const record = (chunk ?? {}) as Record<string, unknown>;
  const meta: ChunkMeta = {
    finishReason: undefined,
    usage:
      typeof record['usage'] === 'object' && record['usage'] !== null
        ? (record['usage'] as Record<string, unknown>)
        : undefined,
    stopReason: undefined,
  };
  const choices = record['choices'];
  if (!Array.isArray(choices)) return meta;
  for (const raw of choices) {
    const choice = (raw ?? {}) as Record<string, unknown>;
    if ((choice['index'] ?? 0) !== 0) continue;
    const delta = (choice['delta'] ?? {}) as Record<string, unknown>;
    const reasoning = delta['reasoning_content'] ?? delta['reasoning'];
    if (typeof reasoning === 'string' && reasoning !== '') handler.reasoning(reasoning);
    const content = delta['content'];
    const logprobs = (choice['logprobs'] as { content?: unknown } | null | undefined)?.content;
    if (typeof content === 'string' && content !== '')
      handler.text(content, Array.isArray(logprobs) ? (logprobs as ChatCompletionTokenLogprob[]) : undefined);
    if (typeof delta['refusal'] === 'string' && delta['refusal'] !== '') handler.refusal(delta['refusal']);
    const calls = delta['tool_calls'];
    if (Array.isArray(calls)) {
      calls.forEach((rawCall: unknown, position) => {
        const call = (rawCall ?? {}) as Record<string, unknown>;
        const fn = (call['function'] ?? {}) as Record<string, unknown>;
        handler.toolCall({
          index: typeof call['index'] === 'number' ? call['index'] : position,
          id: typeof call['id'] === 'string' ? call['id'] : undefined,
          name: typeof fn['name'] === 'string' ? fn['name'] : undefined,
          arguments: typeof fn['arguments'] === 'string' ? fn['arguments'] : '',
        });
      });
    }
    if (typeof choice['finish_reason'] === 'string') meta.finishReason = choice['finish_reason'];
    if (typeof choice['stop_reason'] === 'string') meta.stopReason = choice['stop_reason'];
  }
  return meta;
}
