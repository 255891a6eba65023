/**
 * A chat completion as the Responses API answers: a `response` object whose `output` holds a
 * `reasoning` item (when the model wrote reasoning), a `message` item with `output_text` (and its
 * logprobs when `include` asks for them), and a `function_call` item per tool call, with `usage`
 * and `status`; or, for a streamed request, the typed server-sent events that build the same
 * object (`response.created`, `response.output_item.added`, `response.output_text.delta`,
 * `response.function_call_arguments.delta`, `response.output_item.done`, `response.completed`,
 * ...), in the order the OpenAI SDKs accumulate them.
 */
import type { ChatCompletionTokenLogprob, Choice } from '../../schema/index.js';
import { type ChunkDeltaHandler, readChunk, type ToolCallDelta } from './chat-chunk-deltas.js';
import type { ChatMessage } from './conversation-store.js';
import { isObject, randomId } from './json-values.js';
import type { ResponsesRequest } from './responses-request.js';

/** A Responses API object (a response, an output item, a content part). */
type Json = Record<string, unknown>;

const encoder = new TextEncoder();

/** Chat token logprobs as the Responses API writes them (`bytes` always present). */
function responsesLogprobs(tokens: readonly ChatCompletionTokenLogprob[] | undefined | null): Json[] {
  if (tokens === undefined || tokens === null) return [];
  return tokens.map((token) => ({
    token: token.token,
    logprob: token.logprob,
    bytes: token.bytes ?? Array.from(encoder.encode(token.token)),
    top_logprobs: (token.top_logprobs ?? []).map((top) => ({
      token: top.token,
      logprob: top.logprob,
      bytes: top.bytes ?? Array.from(encoder.encode(top.token)),
    })),
  }));
}

/** Chat-completions `usage` as Responses `usage`, or null when the completion gave none. */
export function responsesUsage(usage: unknown): Json | null {
  if (!isObject(usage)) return null;
  const number = (value: unknown): number => (typeof value === 'number' ? value : 0);
  const input = number(usage['prompt_tokens']);
  const output = number(usage['completion_tokens']);
  const promptDetails = isObject(usage['prompt_tokens_details']) ? usage['prompt_tokens_details'] : {};
  const completionDetails = isObject(usage['completion_tokens_details']) ? usage['completion_tokens_details'] : {};
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: number(promptDetails['cached_tokens']) },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: number(completionDetails['reasoning_tokens']) },
    total_tokens: typeof usage['total_tokens'] === 'number' ? usage['total_tokens'] : input + output,
  };
}

/** `status` and `incomplete_details` of a response whose choice finished with `finishReason`. */
function statusOf(finishReason: string | undefined): { status: string; incomplete_details: Json | null } {
  if (finishReason === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter')
    return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** The parts of a response that the completion decides. */
interface ResponseParts {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly status: string;
  readonly incompleteDetails: Json | null;
  readonly output: Json[];
  readonly usage: Json | null;
}

/** The response object: the completion's parts, and the request's settings echoed as the API does. */
function responseObject(request: ResponsesRequest, parts: ResponseParts): Json {
  const { body, chat } = request;
  return {
    id: parts.id,
    object: 'response',
    created_at: parts.created,
    status: parts.status,
    background: false,
    error: null,
    incomplete_details: parts.incompleteDetails,
    instructions: body['instructions'] ?? null,
    max_output_tokens: body['max_output_tokens'] ?? null,
    model: parts.model,
    output: parts.output,
    parallel_tool_calls: body['parallel_tool_calls'] ?? true,
    previous_response_id: body['previous_response_id'] ?? null,
    reasoning: { effort: null, summary: null },
    store: body['store'] ?? true,
    temperature: typeof chat['temperature'] === 'number' ? chat['temperature'] : 1,
    text: isObject(body['text']) ? body['text'] : { format: { type: 'text' } },
    tool_choice: body['tool_choice'] ?? 'auto',
    tools: Array.isArray(body['tools']) ? body['tools'] : [],
    top_p: typeof chat['top_p'] === 'number' ? chat['top_p'] : 1,
    truncation: 'disabled',
    usage: parts.usage,
    user: typeof body['user'] === 'string' ? body['user'] : null,
    metadata: isObject(body['metadata']) ? body['metadata'] : {},
  };
}

/** The model's reasoning in a chat message (`reasoning_content`, or vLLM's `reasoning`), or ''. */
export function reasoningOf(message: Json): string {
  const reasoning = message['reasoning_content'] ?? message['reasoning'];
  return typeof reasoning === 'string' ? reasoning : '';
}

/** A `reasoning` output item. */
function reasoningItem(id: string, text: string): Json {
  return { id, type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text }], status: 'completed' };
}

/** An `output_text` content part. */
function outputText(text: string, logprobs: Json[]): Json {
  return { type: 'output_text', text, annotations: [], logprobs };
}

/** A `function_call` output item. */
function functionCallItem(id: string, callId: string, name: string, args: string, status: string): Json {
  return { id, type: 'function_call', status, arguments: args, call_id: callId, name };
}

/**
 * The assistant message a response's choice stands for in the conversation a continuation
 * (`previous_response_id`) carries over.
 */
export function assistantMessageOf(choice: Choice): ChatMessage {
  const message = choice.message as unknown as Json;
  const assistant: ChatMessage = { role: 'assistant', content: message['content'] ?? null };
  if (Array.isArray(message['tool_calls']) && message['tool_calls'].length > 0)
    assistant['tool_calls'] = message['tool_calls'];
  const reasoning = reasoningOf(message);
  if (reasoning !== '') assistant['reasoning_content'] = reasoning;
  return assistant;
}

/** The output items of a (non-streamed) choice: reasoning, message, function calls. */
function outputItems(choice: Choice, includeLogprobs: boolean, status: string): Json[] {
  const message = choice.message as unknown as Json;
  const items: Json[] = [];
  const reasoning = reasoningOf(message);
  if (reasoning !== '') items.push(reasoningItem(randomId('rs_'), reasoning));
  const content = typeof message['content'] === 'string' ? message['content'] : '';
  const refusal = typeof message['refusal'] === 'string' ? message['refusal'] : '';
  const calls = Array.isArray(message['tool_calls']) ? (message['tool_calls'] as Json[]) : [];
  if (content !== '' || refusal !== '' || calls.length === 0) {
    const parts: Json[] = [];
    if (content !== '' || refusal === '')
      parts.push(outputText(content, includeLogprobs ? responsesLogprobs(choice.logprobs?.content) : []));
    if (refusal !== '') parts.push({ type: 'refusal', refusal });
    items.push({ id: randomId('msg_'), type: 'message', status, role: 'assistant', content: parts });
  }
  for (const call of calls) {
    const fn = (call['function'] ?? {}) as Json;
    items.push(
      functionCallItem(
        randomId('fc_'),
        typeof call['id'] === 'string' ? call['id'] : randomId('call_'),
        typeof fn['name'] === 'string' ? fn['name'] : '',
        typeof fn['arguments'] === 'string' ? fn['arguments'] : '',
        'completed',
      ),
    );
  }
  return items;
}

/**
 * The Responses answer to `request` from a chat `completion` and its first `choice`.
 * @example
 * const response = responseFromCompletion(request, completion, completion.choices[0], 'resp_1');
 */
export function responseFromCompletion(request: ResponsesRequest, completion: Json, choice: Choice, id: string): Json {
  const { status, incomplete_details: incompleteDetails } = statusOf(choice.finish_reason);
  return responseObject(request, {
    id,
    created: typeof completion['created'] === 'number' ? completion['created'] : Math.floor(Date.now() / 1000),
    model: typeof completion['model'] === 'string' ? completion['model'] : String(request.chat['model'] ?? ''),
    status,
    incompleteDetails,
    output: outputItems(choice, request.includeLogprobs, status === 'completed' ? 'completed' : 'incomplete'),
    usage: responsesUsage(completion['usage']),
  });
}

/** The output item being streamed, and what closing it emits. */
type OpenItem =
  | { readonly kind: 'reasoning'; readonly item: Json; readonly index: number; text: string }
  | { readonly kind: 'message'; readonly item: Json; readonly index: number; text: string; logprobs: Json[] }
  | { readonly kind: 'refusal'; readonly item: Json; readonly index: number; text: string; part: number }
  | { readonly kind: 'call'; readonly item: Json; readonly index: number; readonly call: number };

/**
 * Turns the chunks of a streamed chat completion into the Responses API's typed events, written
 * through `write` as server-sent event text. Call {@link chunk} per chunk and {@link end} once the
 * chat stream ended; `end` returns the final response object (the one `response.completed` carries).
 */
export class ResponsesEventStream implements ChunkDeltaHandler {
  readonly #request: ResponsesRequest;
  readonly #id: string;
  readonly #write: (text: string) => void;
  readonly #output: Json[] = [];
  #sequence = 0;
  #started = false;
  #open: OpenItem | undefined = undefined;
  /** The open item of each tool call index. */
  readonly #calls = new Map<number, OpenItem & { kind: 'call' }>();
  #model: string;
  #created = Math.floor(Date.now() / 1000);
  #usage: Json | null = null;
  #finishReason: string | undefined = undefined;

  /**
   * @param request The translated request (its settings are echoed).
   * @param id The response's id.
   * @param write Receives each event's text (`event: …\ndata: …\n\n`).
   */
  constructor(request: ResponsesRequest, id: string, write: (text: string) => void) {
    this.#request = request;
    this.#id = id;
    this.#write = write;
    this.#model = String(request.chat['model'] ?? '');
  }

  /** Adds one chat chunk: emits the events it makes. */
  chunk(chunk: unknown): void {
    if (!this.#started) {
      // The response's model and time are the completion's, known from its first chunk.
      const record = (chunk ?? {}) as Json;
      if (typeof record['model'] === 'string') this.#model = record['model'];
      if (typeof record['created'] === 'number') this.#created = record['created'];
    }
    const meta = readChunk(chunk, this.#starting());
    if (meta.usage !== undefined) this.#usage = responsesUsage(meta.usage);
    if (meta.finishReason !== undefined) this.#finishReason = meta.finishReason;
  }

  /** The chat stream ended: closes the open item, emits `response.completed` (or `.incomplete`), returns the response. */
  end(): Json {
    this.#starting();
    this.#close();
    const { status, incomplete_details: incompleteDetails } = statusOf(this.#finishReason);
    const response = this.#response(status, incompleteDetails);
    this.#event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
    return response;
  }

  /** The chat stream ended without a choice: `response.failed` with `message`. */
  fail(message: string): void {
    this.#starting();
    const response = this.#response('failed', null);
    response['error'] = { code: 'server_error', message };
    this.#event('response.failed', { response });
  }

  /** The output items streamed so far. */
  get output(): readonly Json[] {
    return this.#output;
  }

  reasoning(text: string): void {
    let open = this.#open;
    if (open?.kind !== 'reasoning') {
      this.#close();
      const item = { id: randomId('rs_'), type: 'reasoning', summary: [], content: [] as Json[] };
      open = this.#add({ kind: 'reasoning', item, index: this.#output.length, text: '' });
      this.#event('response.content_part.added', {
        item_id: item.id,
        output_index: open.index,
        content_index: 0,
        part: { type: 'reasoning_text', text: '' },
      });
    }
    open.text += text;
    this.#event('response.reasoning_text.delta', {
      item_id: open.item['id'],
      output_index: open.index,
      content_index: 0,
      delta: text,
    });
  }

  text(text: string, tokens: readonly ChatCompletionTokenLogprob[] | undefined): void {
    let open = this.#open;
    if (open?.kind !== 'message') {
      this.#close();
      const item = { id: randomId('msg_'), type: 'message', status: 'in_progress', role: 'assistant', content: [] };
      open = this.#add({ kind: 'message', item, index: this.#output.length, text: '', logprobs: [] });
      this.#event('response.content_part.added', {
        item_id: item.id,
        output_index: open.index,
        content_index: 0,
        part: outputText('', []),
      });
    }
    const logprobs = this.#request.includeLogprobs ? responsesLogprobs(tokens) : [];
    open.text += text;
    open.logprobs.push(...logprobs);
    this.#event('response.output_text.delta', {
      item_id: open.item['id'],
      output_index: open.index,
      content_index: 0,
      delta: text,
      logprobs,
    });
  }

  refusal(text: string): void {
    let open = this.#open;
    if (open?.kind !== 'refusal') {
      this.#close();
      const item = { id: randomId('msg_'), type: 'message', status: 'in_progress', role: 'assistant', content: [] };
      open = this.#add({ kind: 'refusal', item, index: this.#output.length, text: '', part: 0 });
      this.#event('response.content_part.added', {
        item_id: item.id,
        output_index: open.index,
        content_index: 0,
        part: { type: 'refusal', refusal: '' },
      });
    }
    open.text += text;
    this.#event('response.refusal.delta', {
      item_id: open.item['id'],
      output_index: open.index,
      content_index: 0,
      delta: text,
    });
  }

  toolCall(delta: ToolCallDelta): void {
    let open = this.#calls.get(delta.index);
    if (open === undefined) {
      this.#close();
      const item = functionCallItem(
        randomId('fc_'),
        delta.id ?? randomId('call_'),
        delta.name ?? '',
        '',
        'in_progress',
      );
      open = this.#add({ kind: 'call', item, index: this.#output.length, call: delta.index });
      this.#calls.set(delta.index, open);
    } else if (delta.name !== undefined && open.item['name'] !== delta.name) {
      open.item['name'] = `${open.item['name'] as string}${delta.name}`;
    }
    if (delta.arguments === '') return;
    open.item['arguments'] = `${open.item['arguments'] as string}${delta.arguments}`;
    this.#event('response.function_call_arguments.delta', {
      item_id: open.item['id'],
      output_index: open.index,
      delta: delta.arguments,
    });
  }

  /** Emits `response.created` and `response.in_progress` once, before the first item; returns the handler. */
  #starting(): this {
    if (!this.#started) {
      this.#started = true;
      const response = this.#response('in_progress', null);
      response['usage'] = null;
      this.#event('response.created', { response });
      this.#event('response.in_progress', { response });
    }
    return this;
  }

  /** Makes `open` the item being streamed and announces it. */
  #add<T extends OpenItem>(open: T): T {
    this.#open = open;
    this.#output.push(open.item);
    // Events are serialized as they are written: the live item is this moment's snapshot.
    this.#event('response.output_item.added', { output_index: open.index, item: open.item });
    return open;
  }

  /** Closes the item being streamed: its `.done` events with the whole text or arguments. */
  #close(): void {
    const open = this.#open;
    if (open === undefined) return;
    this.#open = undefined;
    const id = open.item['id'];
    const base = { item_id: id, output_index: open.index };
    if (open.kind === 'reasoning') {
      const part = { type: 'reasoning_text', text: open.text };
      this.#event('response.reasoning_text.done', { ...base, content_index: 0, text: open.text });
      this.#event('response.content_part.done', { ...base, content_index: 0, part });
      open.item['content'] = [part];
      open.item['status'] = 'completed';
    } else if (open.kind === 'message') {
      const part = outputText(open.text, open.logprobs);
      this.#event('response.output_text.done', { ...base, content_index: 0, text: open.text, logprobs: open.logprobs });
      this.#event('response.content_part.done', { ...base, content_index: 0, part });
      open.item['content'] = [part];
      open.item['status'] = this.#itemStatus();
    } else if (open.kind === 'refusal') {
      const part = { type: 'refusal', refusal: open.text };
      this.#event('response.refusal.done', { ...base, content_index: 0, refusal: open.text });
      this.#event('response.content_part.done', { ...base, content_index: 0, part });
      open.item['content'] = [part];
      open.item['status'] = this.#itemStatus();
    } else {
      this.#event('response.function_call_arguments.done', {
        ...base,
        name: open.item['name'],
        arguments: open.item['arguments'],
      });
      open.item['status'] = 'completed';
    }
    this.#event('response.output_item.done', { output_index: open.index, item: open.item });
  }

  #itemStatus(): string {
    return this.#finishReason === 'length' || this.#finishReason === 'content_filter' ? 'incomplete' : 'completed';
  }

  #response(status: string, incompleteDetails: Json | null): Json {
    const output = this.#output;
    if ((status === 'completed' || status === 'incomplete') && output.length === 0) {
      // No text and no call: an empty message, as the non-streamed answer has.
      output.push({
        id: randomId('msg_'),
        type: 'message',
        status: this.#itemStatus(),
        role: 'assistant',
        content: [outputText('', [])],
      });
    }
    return responseObject(this.#request, {
      id: this.#id,
      created: this.#created,
      model: this.#model,
      status,
      incompleteDetails,
      output: status === 'in_progress' ? [] : [...output],
      usage: this.#usage,
    });
  }

  #event(type: string, fields: Json): void {
    const event = { type, sequence_number: this.#sequence, ...fields };
    this.#sequence += 1;
    this.#write(`event: ${type}\ndata: ${JSON.stringify(event)}\n\n`);
  }
}
