/**
 * What a translated conversation needs to remember between calls: the Responses API's
 * `previous_response_id` and `item_reference` name responses and output items that the server
 * keeps, and the Messages API sends back each `tool_use` as the parsed object it was given. There
 * is no server here, so each rollout keeps its own, in memory, for as long as the rollout lives:
 * a conversation continues only within the rollout that started it.
 */

/** A chat-completions message as the translations build them. */
export type ChatMessage = Record<string, unknown>;

/** One response as `previous_response_id` continues it. */
export interface StoredResponse {
  /**
   * The conversation up to and including the response's own assistant turn, without the
   * request's `instructions` (the API does not carry them over to a continuation).
   */
  readonly history: readonly ChatMessage[];
}

/** The arguments text of a tool call given out as a parsed `tool_use.input`, to send back as it was. */
export interface StoredToolInput {
  /** The object given out. */
  readonly input: unknown;
  /** The model's own arguments text. */
  readonly arguments: string;
}

/**
 * The responses, output items and tool inputs of one rollout (or, outside rollouts, of one
 * recording `fetch`, bounded to its `limit` newest responses).
 */
export class ConversationStore {
  readonly #responses = new Map<string, StoredResponse>();
  readonly #items = new Map<string, Record<string, unknown>>();
  readonly #toolInputs = new Map<string, StoredToolInput>();
  readonly #limit: number;

  /** @param limit Responses kept (the oldest go first, with their items). */
  constructor(limit = Number.POSITIVE_INFINITY) {
    this.#limit = limit;
  }

  /** The response `id`, or undefined when this store never made it. */
  response(id: string): StoredResponse | undefined {
    return this.#responses.get(id);
  }

  /** The output item `id` (a `message`, `function_call` or `reasoning` item), or undefined. */
  item(id: string): Record<string, unknown> | undefined {
    return this.#items.get(id);
  }

  /** The tool input given out under the tool-use id `id`, or undefined. */
  toolInput(id: string): StoredToolInput | undefined {
    return this.#toolInputs.get(id);
  }

  /** Keeps a response with its output items. */
  saveResponse(id: string, response: StoredResponse, items: readonly Record<string, unknown>[]): void {
    this.#responses.set(id, response);
    for (const item of items) if (typeof item['id'] === 'string') this.#items.set(item['id'], item);
    while (this.#responses.size > this.#limit) {
      const oldest = this.#responses.keys().next().value as string;
      this.#responses.delete(oldest);
    }
    while (this.#items.size > this.#limit * 8) {
      const oldest = this.#items.keys().next().value as string;
      this.#items.delete(oldest);
    }
  }

  /** Keeps the arguments text of a tool call given out as `input` under `id`. */
  saveToolInput(id: string, input: unknown, text: string): void {
    this.#toolInputs.set(id, { input, arguments: text });
    while (this.#toolInputs.size > this.#limit * 8) {
      const oldest = this.#toolInputs.keys().next().value as string;
      this.#toolInputs.delete(oldest);
    }
  }
}

/** Each rollout's store, by its recorder (a sub-agent's `captureInto` shares its rollout's). */
const rolloutStores = new WeakMap<object, ConversationStore>();

/** The store of the rollout whose recorder is `owner`, made on first use. */
export function rolloutStore(owner: object): ConversationStore {
  let store = rolloutStores.get(owner);
  if (store === undefined) {
    store = new ConversationStore();
    rolloutStores.set(owner, store);
  }
  return store;
}
