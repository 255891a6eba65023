/**
 * Rebuilds the first Choice of a streamed completion from its `chat.completion.chunk`s, so that a
 * streamed request is recorded like a plain one (content, reasoning, tool calls and logprobs joined
 * up).
 */
import type { ChatCompletionTokenLogprob, Choice, FinishReason } from '../schema/index.js';

interface ToolCallParts {
  id: string;
  type: string;
  name: string;
  arguments: string;
}

/**
 * Collects the deltas of choice 0 of a chunk stream.
 * @example
 * const accumulator = new StreamAccumulator();
 * for await (const chunk of stream) accumulator.add(chunk);
 * const choice = accumulator.choice();
 */
export class StreamAccumulator {
  #content: string | null = null;
  #refusal: string | null = null;
  /** The model's reasoning, under the key the service streamed it with (`reasoning_content` or `reasoning`). */
  #reasoning: string | null = null;
  #reasoningKey: 'reasoning_content' | 'reasoning' = 'reasoning_content';
  #finishReason: string | null = null;
  #logprobs: ChatCompletionTokenLogprob[] | null = null;
  readonly #toolCalls = new Map<number, ToolCallParts>();
  #seen = false;

  /** Adds one chunk (any value; chunks that do not look like chat-completion chunks are skipped). */
  add(chunk: unknown): void {
    const choices = (chunk as { choices?: unknown } | null)?.choices;
    if (!Array.isArray(choices)) return;
    for (const raw of choices) {
      const choice = raw as Record<string, unknown>;
      if ((choice['index'] ?? 0) !== 0) continue;
      this.#seen = true;
      const delta = (choice['delta'] ?? {}) as Record<string, unknown>;
      if (typeof delta['content'] === 'string') this.#content = (this.#content ?? '') + delta['content'];
      if (typeof delta['refusal'] === 'string') this.#refusal = (this.#refusal ?? '') + delta['refusal'];
      if (typeof delta['reasoning_content'] === 'string') this.#addReasoning('reasoning_content', delta);
      else if (typeof delta['reasoning'] === 'string') this.#addReasoning('reasoning', delta);
      if (Array.isArray(delta['tool_calls'])) {
        for (const rawCall of delta['tool_calls']) this.#addToolCall(rawCall as Record<string, unknown>);
      }
      if (typeof choice['finish_reason'] === 'string') this.#finishReason = choice['finish_reason'];
      const logprobs = (choice['logprobs'] as { content?: unknown } | null | undefined)?.content;
      if (Array.isArray(logprobs)) {
        // Appended in place: a stream of n token chunks costs O(n), not O(n²).
        this.#logprobs ??= [];
        for (const token of logprobs as ChatCompletionTokenLogprob[]) this.#logprobs.push(token);
      }
    }
  }

  #addReasoning(key: 'reasoning_content' | 'reasoning', delta: Record<string, unknown>): void {
    this.#reasoningKey = key;
    this.#reasoning = (this.#reasoning ?? '') + (delta[key] as string);
  }

  #addToolCall(call: Record<string, unknown>): void {
    const index = typeof call['index'] === 'number' ? call['index'] : this.#toolCalls.size;
    const parts = this.#toolCalls.get(index) ?? { id: '', type: 'function', name: '', arguments: '' };
    const fn = (call['function'] ?? {}) as Record<string, unknown>;
    if (typeof call['id'] === 'string') parts.id = call['id'];
    if (typeof call['type'] === 'string') parts.type = call['type'];
    if (typeof fn['name'] === 'string') parts.name += fn['name'];
    if (typeof fn['arguments'] === 'string') parts.arguments += fn['arguments'];
    this.#toolCalls.set(index, parts);
  }

  /** Whether a chunk has carried choice 0's `finish_reason` (its last content chunk). */
  get finished(): boolean {
    return this.#finishReason !== null;
  }

  /** The Choice the chunks add up to, or null when no chunk carried choice 0. */
  choice(): Choice | null {
    if (!this.#seen) return null;
    const toolCalls = [...this.#toolCalls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, parts]) => ({
        id: parts.id,
        type: 'function' as const,
        function: { name: parts.name, arguments: parts.arguments },
      }));
    const choice: Choice = {
      index: 0,
      finish_reason: (this.#finishReason ?? 'stop') as FinishReason,
      message: { role: 'assistant', content: this.#content, refusal: this.#refusal },
      logprobs: this.#logprobs === null ? null : { content: this.#logprobs, refusal: null },
    };
    if (toolCalls.length > 0) choice.message.tool_calls = toolCalls;
    if (this.#reasoning !== null) (choice.message as Record<string, unknown>)[this.#reasoningKey] = this.#reasoning;
    return choice;
  }
}

/**
 * Adds chunks to a {@link StreamAccumulator} and hands the Choice they add up to to `onChoice`
 * exactly once: as soon as the chunk carrying choice 0's `finish_reason` has been added (agent
 * frameworks stop reading there), or at `end()`. Both capture paths (a wrapped client's chunk
 * iterator and a recording fetch's SSE body) record through it.
 */
export class StreamRecorder {
  readonly #accumulator = new StreamAccumulator();
  readonly #onChoice: (choice: Choice | null) => void;
  #recorded = false;

  /** @param onChoice Called once with the accumulated Choice (null when no chunk carried choice 0). */
  constructor(onChoice: (choice: Choice | null) => void) {
    this.#onChoice = onChoice;
  }

  /** True once the Choice was handed over; later chunks are ignored. */
  get recorded(): boolean {
    return this.#recorded;
  }

  /** True once a chunk carried choice 0's `finish_reason`. */
  get finished(): boolean {
    return this.#accumulator.finished;
  }

  /** Adds one chunk; records when it carries the `finish_reason`. */
  add(chunk: unknown): void {
    if (this.#recorded) return;
    this.#accumulator.add(chunk);
    if (this.#accumulator.finished) this.end();
  }

  /** Records now (the stream ended), unless already recorded. */
  end(): void {
    if (this.#recorded) return;
    this.#recorded = true;
    this.#onChoice(this.#accumulator.choice());
  }
}
