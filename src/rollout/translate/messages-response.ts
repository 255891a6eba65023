/**
 * A chat completion as Anthropic's Messages API answers: a `message` whose `content` holds a
 * `thinking` block (the model's reasoning), a `text` block and a `tool_use` block per tool call
 * (its `input` parsed from the model's arguments), with `stop_reason` (`end_turn`, `tool_use`,
 * `max_tokens`, `stop_sequence`) and `usage`; or, for a streamed request, Anthropic's named events
 * (`message_start`, `content_block_start`, `content_block_delta` with `thinking_delta`,
 * `text_delta` and `input_json_delta`, `content_block_stop`, `message_delta`, `message_stop`).
 */
import type { Choice } from '../../schema/index.js';
import { type ChunkDeltaHandler, readChunk, type ToolCallDelta } from './chat-chunk-deltas.js';
import type { ConversationStore } from './conversation-store.js';
import { isObject, randomId } from './json-values.js';
import type { MessagesRequest } from './messages-request.js';
import { reasoningOf } from './responses-response.js';

type Json = Record<string, unknown>;

/** The `stop_reason` and `stop_sequence` of a choice that finished with `finishReason`. */
function stopOf(
  request: MessagesRequest,
  finishReason: string | undefined,
  matched: string | undefined,
): { stop_reason: string; stop_sequence: string | null } {
  if (finishReason === 'tool_calls' || finishReason === 'function_call')
    return { stop_reason: 'tool_use', stop_sequence: null };
  if (finishReason === 'length') return { stop_reason: 'max_tokens', stop_sequence: null };
  if (finishReason === 'content_filter') return { stop_reason: 'refusal', stop_sequence: null };
  // vLLM names the stop string it matched; a service that does not, ends the turn.
  if (matched !== undefined && request.stopSequences.includes(matched))
    return { stop_reason: 'stop_sequence', stop_sequence: matched };
  return { stop_reason: 'end_turn', stop_sequence: null };
}

/** Chat-completions `usage` as Messages `usage`. */
function messagesUsage(usage: unknown): Json {
  const record = isObject(usage) ? usage : {};
  const details = isObject(record['prompt_tokens_details']) ? record['prompt_tokens_details'] : {};
  const number = (value: unknown): number => (typeof value === 'number' ? value : 0);
  return {
    input_tokens: number(record['prompt_tokens']),
    output_tokens: number(record['completion_tokens']),
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: number(details['cached_tokens']),
  };
}

/**
 * The `input` object of a tool call's arguments text: the parsed object, or `{}` when the model's
 * text is not a JSON object (the text itself is kept in `store` under `id`, so that the call goes
 * back to the model as it wrote it).
 */
function toolInput(id: string, args: string, store: ConversationStore): Json {
  let input: Json = {};
  try {
    const parsed: unknown = JSON.parse(args);
    if (isObject(parsed)) input = parsed;
  } catch {
    // not JSON: `{}`, and the text is kept below
  }
  store.saveToolInput(id, input, args);
  return input;
}

/**
 * The Messages answer to `request` from a chat `completion` and its first `choice`; the tool
 * inputs it hands out are kept in `store`.
 * @example
 * const message = messageFromCompletion(request, completion, completion.choices[0], 'msg_1', store);
 */
export function messageFromCompletion(
  request: MessagesRequest,
  completion: Json,
  choice: Choice,
  id: string,
  store: ConversationStore,
): Json {
  const message = choice.message as unknown as Json;
  const content: Json[] = [];
  const reasoning = reasoningOf(message);
  if (reasoning !== '') content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  const text = typeof message['content'] === 'string' ? message['content'] : '';
  const refusal = typeof message['refusal'] === 'string' ? message['refusal'] : '';
  const calls = Array.isArray(message['tool_calls']) ? (message['tool_calls'] as Json[]) : [];
  if (text !== '' || refusal !== '' || calls.length === 0)
    content.push({ type: 'text', text: text + refusal, citations: null });
  for (const call of calls) {
    const fn = (call['function'] ?? {}) as Json;
    const callId = typeof call['id'] === 'string' && call['id'] !== '' ? call['id'] : randomId('toolu_');
    const args = typeof fn['arguments'] === 'string' ? fn['arguments'] : '';
    content.push({
      type: 'tool_use',
      id: callId,
      name: typeof fn['name'] === 'string' ? fn['name'] : '',
      input: toolInput(callId, args, store),
    });
  }
  const matched = (choice as unknown as Json)['stop_reason'];
  return {
    id,
    type: 'message',
    role: 'assistant',
    model: typeof completion['model'] === 'string' ? completion['model'] : String(request.chat['model'] ?? ''),
    content,
    ...stopOf(request, choice.finish_reason, typeof matched === 'string' ? matched : undefined),
    usage: messagesUsage(completion['usage']),
  };
}

/** The content block being streamed. */
type OpenBlock =
  | { readonly kind: 'thinking' | 'text'; readonly index: number }
  | { readonly kind: 'tool'; readonly index: number; readonly id: string; args: string };

/**
 * Turns the chunks of a streamed chat completion into the Messages API's named events, written
 * through `write` as server-sent event text. A tool call's `input_json_delta` carries its whole
 * arguments once the call is complete (`{}` when they are not a JSON object), so that a client
 * always parses an object.
 */
export class MessagesEventStream implements ChunkDeltaHandler {
  readonly #request: MessagesRequest;
  readonly #id: string;
  readonly #store: ConversationStore;
  readonly #write: (text: string) => void;
  #started = false;
  #blocks = 0;
  #open: OpenBlock | undefined = undefined;
  readonly #calls = new Map<number, OpenBlock & { kind: 'tool' }>();
  #model: string;
  #usage: unknown = undefined;
  #finishReason: string | undefined = undefined;
  #matched: string | undefined = undefined;

  /**
   * @param request The translated request.
   * @param id The message's id.
   * @param store Where the tool inputs handed out are kept.
   * @param write Receives each event's text (`event: …\ndata: …\n\n`).
   */
  constructor(request: MessagesRequest, id: string, store: ConversationStore, write: (text: string) => void) {
    this.#request = request;
    this.#id = id;
    this.#store = store;
    this.#write = write;
    this.#model = String(request.chat['model'] ?? '');
  }

  /** Adds one chat chunk: emits the events it makes. */
  chunk(chunk: unknown): void {
    const record = (chunk ?? {}) as Json;
    if (!this.#started && typeof record['model'] === 'string') this.#model = record['model'];
    const meta = readChunk(chunk, this.#starting());
    if (meta.usage !== undefined) this.#usage = meta.usage;
    if (meta.finishReason !== undefined) this.#finishReason = meta.finishReason;
    if (meta.stopReason !== undefined) this.#matched = meta.stopReason;
  }

  /** The chat stream ended: closes the open block, emits `message_delta` and `message_stop`. */
  end(): void {
    this.#starting();
    this.#close();
    if (this.#blocks === 0) {
      // No text and no call: one empty text block, as the non-streamed answer has.
      this.text('', undefined);
      this.#close();
    }
    const usage = messagesUsage(this.#usage);
    this.#event('message_delta', {
      delta: stopOf(this.#request, this.#finishReason, this.#matched),
      usage,
    });
    this.#event('message_stop', {});
  }

  /** The chat stream ended without a choice: an `error` event. */
  fail(message: string): void {
    this.#event('error', { error: { type: 'api_error', message } });
  }

  reasoning(text: string): void {
    if (this.#open?.kind !== 'thinking')
      this.#start({ kind: 'thinking', index: this.#blocks }, { type: 'thinking', thinking: '', signature: '' });
    this.#delta({ type: 'thinking_delta', thinking: text });
  }

  text(text: string, _logprobs: unknown): void {
    if (this.#open?.kind !== 'text')
      this.#start({ kind: 'text', index: this.#blocks }, { type: 'text', text: '', citations: null });
    if (text !== '') this.#delta({ type: 'text_delta', text });
  }

  refusal(text: string): void {
    this.text(text, undefined);
  }

  toolCall(delta: ToolCallDelta): void {
    let open = this.#calls.get(delta.index);
    if (open === undefined) {
      const id = delta.id !== undefined && delta.id !== '' ? delta.id : randomId('toolu_');
      open = { kind: 'tool', index: this.#blocks, id, args: '' };
      this.#calls.set(delta.index, open);
      this.#start(open, { type: 'tool_use', id, name: delta.name ?? '', input: {} });
    }
    open.args += delta.arguments;
  }

  #starting(): this {
    if (!this.#started) {
      this.#started = true;
      this.#event('message_start', {
        message: {
          id: this.#id,
          type: 'message',
          role: 'assistant',
          model: this.#model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 0, output_tokens: 0 },
        },
      });
    }
    return this;
  }

  #start(open: OpenBlock, block: Json): void {
    this.#close();
    this.#open = open;
    this.#blocks += 1;
    this.#event('content_block_start', { index: open.index, content_block: block });
  }

  #delta(delta: Json): void {
    this.#event('content_block_delta', { index: (this.#open as OpenBlock).index, delta });
  }

  #close(): void {
    const open = this.#open;
    if (open === undefined) return;
    this.#open = undefined;
    if (open.kind === 'tool') {
      const input = toolInput(open.id, open.args, this.#store);
      this.#event('content_block_delta', {
        index: open.index,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(input) },
      });
    }
    this.#event('content_block_stop', { index: open.index });
  }

  #event(type: string, fields: Json): void {
    this.#write(`event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`);
  }
}
