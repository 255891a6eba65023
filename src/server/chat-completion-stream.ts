/**
 * Streams a finished completion as OpenAI `chat.completion.chunk` server-sent events, in the
 * order the openai SDK expects: per choice a role delta, content deltas (one per token when the
 * logprob tokens spell the content, with their logprobs), a tool-calls delta, a finish chunk;
 * then a usage chunk when `stream_options.include_usage` is set; then `data: [DONE]`.
 */
import type { ChatCompletionChunk, ChatCompletionResult, ChatCompletionTokenLogprob, Choice } from '../schema/index.js';

/** Identity shared by every chunk of one completion. */
export interface ChunkIdentity {
  readonly id: string;
  readonly created: number;
  readonly model: string;
}

type ChunkChoice = ChatCompletionChunk['choices'][number];

/** The chunks of a completion, in order. */
export function completionChunks(
  identity: ChunkIdentity,
  result: ChatCompletionResult,
  includeUsage: boolean,
): ChatCompletionChunk[] {
  const chunks: ChatCompletionChunk[] = [];
  const push = (choice: ChunkChoice): void => {
    chunks.push({
      ...identity,
      object: 'chat.completion.chunk',
      choices: [choice],
      ...(includeUsage ? { usage: null } : {}),
    });
  };
  for (const choice of result.choices) {
    const index = choice.index;
    const tokens = choice.logprobs?.content ?? null;
    let pendingLogprobs: ChatCompletionTokenLogprob[] | null = tokens;
    push({ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null });
    const content = choice.message.content;
    if (typeof content === 'string' && content !== '') {
      if (tokens !== null && tokens.length > 0 && tokens.map((token) => token.token).join('') === content) {
        for (const token of tokens)
          push({
            index,
            delta: { content: token.token },
            logprobs: { content: [token], refusal: null },
            finish_reason: null,
          });
      } else {
        push({ index, delta: { content }, logprobs: logprobsOf(pendingLogprobs), finish_reason: null });
      }
      pendingLogprobs = null;
    }
    const toolCalls = choice.message.tool_calls ?? [];
    if (toolCalls.length > 0) {
      push({
        index,
        delta: { tool_calls: toolCalls.map((call, callIndex) => ({ index: callIndex, ...call })) },
        logprobs: logprobsOf(pendingLogprobs),
        finish_reason: null,
      });
      pendingLogprobs = null;
    }
    push({ index, delta: {}, logprobs: logprobsOf(pendingLogprobs), finish_reason: finishReason(choice) });
  }
  if (includeUsage) chunks.push({ ...identity, object: 'chat.completion.chunk', choices: [], usage: result.usage });
  return chunks;
}

/** The chunks as a `text/event-stream` body. */
export function eventStream(chunks: readonly ChatCompletionChunk[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let index = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const chunk = chunks[index];
      index += 1;
      if (chunk === undefined) {
        controller.enqueue(encoder.encode('data: [DONE]\n\n'));
        controller.close();
        return;
      }
      controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`));
    },
  });
}

function logprobsOf(tokens: ChatCompletionTokenLogprob[] | null): ChunkChoice['logprobs'] {
  return tokens === null || tokens.length === 0 ? null : { content: tokens, refusal: null };
}

function finishReason(choice: Choice): string {
  return choice.finish_reason;
}
