/**
 * The trajectory a rollout is building: captured chat completions land here (see
 * `captureCompletions`), and rollouts may also add messages, choices, metrics and logs by hand.
 */
import type {
  ChatCompletionFunctionToolParam,
  ChatCompletionMessageParam,
  Choice,
  AdditionalHistory,
  MessageOrChoice,
  Metrics,
  TrajectoryInput,
  TrajectoryMetadataValue,
} from '../schema/index.js';
import { messageOf, TURN_ORDER_KEY } from '../schema/index.js';
import { clonePlain } from '../internal/clone.js';
import { functionTools, messageKey, sameTools } from './message-equality.js';

/**
 * The key of {@link TrajectoryRecorder}'s handover method, for the runner (not exported from the
 * package: a user's recorder keeps the copying `toTrajectory()`).
 */
export const takeTrajectory: unique symbol = Symbol('policyloop.takeTrajectory');

/**
 * Tells the trajectory `owner` that its conversation number `history` (0 = the main one) appended
 * `count` items: how a trajectory keeps the run's order. Set by {@link TrajectoryRecorder}'s static
 * block (its order is private to it).
 */
let appendOrderOf: (owner: TrajectoryRecorder, history: number, count: number) => void = () => undefined;

/** Makes `history` conversation number `index` of `owner` (set by {@link ConversationRecorder}'s static block). */
let attachHistory: (history: ConversationRecorder, owner: TrajectoryRecorder, index: number) => void = () => undefined;

/**
 * Appends copies of `messages[from..]` to `history` (its `addMessage` without the two arrays a
 * slice and a spread would make for every recorded completion; set by {@link ConversationRecorder}'s
 * static block).
 */
let appendMessages: (history: ConversationRecorder, messages: readonly unknown[], from: number) => void = () =>
  undefined;

/**
 * The trajectory metric that counts its replies holding tool-call markup the engine could not
 * parse (another family's format, or a malformed call): they stayed text. Averaged per step as
 * every trajectory metric is (`train/tool_calls/unparsed`).
 */
export const UNPARSED_TOOL_CALLS = 'tool_calls/unparsed';

/**
 * One conversation: messages (context) and Choices (trainable turns), in order, plus the tools it
 * offered. The main conversation of a trajectory and each sub-agent's `additional_histories` entry
 * are one of these.
 * @example
 * recorder.addMessage({ role: 'user', content: 'What is 2+2?' });
 * recorder.addChoice(completion.choices[0]);
 */
export class ConversationRecorder {
  /** The items in order, as they go on the wire (`messages_and_choices`). */
  readonly messagesAndChoices: MessageOrChoice[] = [];
  /** The trajectory this conversation belongs to (told of every append), and its number there. */
  #owner: TrajectoryRecorder | undefined = undefined;
  #index = 0;

  static {
    attachHistory = (history, owner, index) => {
      history.#owner = owner;
      history.#index = index;
    };
    appendMessages = (history, messages, from) => history.#append(messages, from);
  }

  /** Appends copies of `messages[from..]` and tells the owner their order. */
  #append(messages: readonly unknown[], from: number): void {
    for (let index = from; index < messages.length; index += 1)
      this.messagesAndChoices.push(clonePlain(messages[index]) as MessageOrChoice);
    if (this.#owner !== undefined && from < messages.length)
      appendOrderOf(this.#owner, this.#index, messages.length - from);
  }

  /**
   * The items, handed over without a copy (they are copies the recorder made as it recorded them);
   * the recorder goes on with a new, empty list, so later changes do not show in what was taken.
   */
  protected takeItems(): MessageOrChoice[] {
    const items = this.messagesAndChoices;
    (this as { messagesAndChoices: MessageOrChoice[] }).messagesAndChoices = [];
    return items;
  }
  /** The tools offered to the model in this conversation, or null for none. */
  tools: ChatCompletionFunctionToolParam[] | null = null;

  /** Appends messages (context, not trained on). Returns `this` for chaining. */
  addMessage(...messages: ChatCompletionMessageParam[]): this {
    this.#append(messages, 0);
    return this;
  }

  /** Appends a sampled Choice (a trainable turn, keep its `logprobs`). Returns `this`. */
  addChoice(choice: Choice): this {
    this.messagesAndChoices.push(clonePlain(choice));
    if (this.#owner !== undefined) appendOrderOf(this.#owner, this.#index, 1);
    // A reply whose tool-call markup the engine could not parse (text layer's `unparsed_tool_call`).
    if (typeof (choice as { unparsed_tool_call?: unknown }).unparsed_tool_call === 'string') {
      const trajectory = this.#owner ?? (this instanceof TrajectoryRecorder ? this : undefined);
      if (trajectory !== undefined) {
        const before = trajectory.metrics[UNPARSED_TOOL_CALLS];
        trajectory.metrics[UNPARSED_TOOL_CALLS] = (typeof before === 'number' ? before : 0) + 1;
      }
    }
    return this;
  }

  /** The conversation as messages, each Choice standing for its assistant message. */
  messages(): ChatCompletionMessageParam[] {
    return this.messagesAndChoices.map(messageOf);
  }

  /**
   * True when `messages` (a request's messages) start with this conversation and `tools` are the
   * ones it offered, so a completion of that request continues this conversation.
   */
  isExtendedBy(messages: readonly unknown[], tools: unknown): boolean {
    return this.continuedBy(messages, tools) !== null;
  }

  /**
   * How many of `messages` this conversation covers when the request continues it (see
   * {@link isExtendedBy}), or null when it does not. An assistant turn of ours with no text and no
   * tool call may be missing from the request: frameworks drop empty assistant messages when they
   * send the conversation back.
   */
  continuedBy(messages: readonly unknown[], tools: unknown): number | null {
    const own = this.messagesAndChoices;
    if (own.length > 0 && !sameTools(this.tools, tools)) return null;
    let covered = 0;
    for (const item of own) {
      const message = messageOf(item);
      if (covered < messages.length && messageKey(message) === messageKey(messages[covered])) covered += 1;
      else if (!isEmptyAssistant(message)) return null;
    }
    return covered;
  }

  /** This conversation as an `additional_histories` entry (`AdditionalHistory`). */
  toHistory(): AdditionalHistory {
    return historyEntry(this, clonePlain(this.messagesAndChoices));
  }
}

/** A chat-completions exchange as the recorder sees it: what was sent and the Choice that came. */
export interface RecordedCompletion {
  /** The request's `messages`. */
  readonly messages: readonly unknown[];
  /** The request's `tools`, if any. */
  readonly tools?: unknown;
  /**
   * The conversation to record into when the request continues it (see `captureInto`); when it
   * does not, a new `additional_histories` entry is started.
   */
  readonly into?: ConversationRecorder | undefined;
  /** The Choice to record (the first of the response). */
  readonly choice: Choice;
}

/**
 * Records one rollout's trajectory. Every captured completion is appended to the conversation it
 * continues: the main one when the request's messages start with it, else the first sub-agent
 * history they start with, else a new `additional_histories` entry. Only the new messages of a
 * request are appended, and the assistant message a caller echoes back is represented by its
 * Choice, not duplicated.
 * @example
 * const recorder = new TrajectoryRecorder();
 * recorder.addMessage({ role: 'user', content: 'hi' }).addChoice(makeChoice('hello'));
 * recorder.metrics['turns'] = 1;
 * const trajectory = recorder.toTrajectory();
 */
export class TrajectoryRecorder extends ConversationRecorder {
  /** Sub-agent conversations (`additional_histories`). */
  readonly additionalHistories: ConversationRecorder[] = [];
  /** Metrics of this trajectory (numbers or booleans). */
  readonly metrics: Metrics = {};
  /**
   * Metadata of this trajectory: string, number, boolean or null values (the hosted service
   * refuses objects and arrays; store `JSON.stringify(value)` instead).
   */
  readonly metadata: Record<string, TrajectoryMetadataValue> = {};
  /** Log lines kept with the trajectory. */
  readonly logs: string[] = [];
  /** The reward, when the rollout sets one itself (a gather's reward function overrides it). */
  reward: number | undefined;
  #closed = false;
  /** The conversation of each item as it was recorded (see `TURN_ORDER_KEY`). */
  #order: number[] = [];

  static {
    appendOrderOf = (owner, history, count) => {
      for (let index = 0; index < count; index += 1) owner.#order.push(history);
    };
  }

  constructor() {
    super();
    attachHistory(this, this, 0);
  }

  /** A new, empty sub-agent conversation in `additional_histories`. */
  addHistory(): ConversationRecorder {
    const history = new ConversationRecorder();
    this.additionalHistories.push(history);
    attachHistory(history, this, this.additionalHistories.length);
    return history;
  }

  /** Appends a line to the trajectory's `logs`. */
  log(line: string): this {
    this.logs.push(line);
    return this;
  }

  /** True once the rollout has finished; later completions are no longer recorded. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Stops recording (the runner calls it when the rollout ends or times out). */
  close(): void {
    this.#closed = true;
  }

  /**
   * Records one completion into the conversation it continues (see the class docs). Ignored after
   * {@link TrajectoryRecorder.close}. Returns the conversation it went into, or null when closed.
   */
  recordCompletion(completion: RecordedCompletion): ConversationRecorder | null {
    if (this.#closed) return null;
    const { messages, tools, choice, into } = completion;
    let target: ConversationRecorder | undefined;
    let covered = 0;
    // The main conversation, then each sub-agent's (or only `into`), without an array per completion.
    const count = into === undefined ? this.additionalHistories.length + 1 : 1;
    for (let position = 0; position < count; position += 1) {
      const history =
        into ?? (position === 0 ? this : (this.additionalHistories[position - 1] as ConversationRecorder));
      const continued = history.continuedBy(messages, tools);
      if (continued !== null) {
        target = history;
        covered = continued;
        break;
      }
    }
    if (target === undefined) target = this.addHistory();
    appendMessages(target, messages, covered);
    target.addChoice(choice);
    const offered = functionTools(tools);
    if (offered !== null) target.tools = clonePlain(offered);
    return target;
  }

  /**
   * The runner's handover once the rollout ended: {@link toTrajectory} without copying the
   * conversations again (the recorder copied each item as it recorded it). The recorder's
   * conversations start over empty, so later changes still do not show in the trajectory.
   */
  [takeTrajectory](): TrajectoryInput {
    const trajectory = this.build(takeItemsOf, this.#order);
    this.#order = [];
    return trajectory;
  }

  /** The trajectory recorded so far (copies; later changes to the recorder do not show in it). */
  toTrajectory(): TrajectoryInput {
    return this.build((history) => clonePlain(history.messagesAndChoices), [...this.#order]);
  }

  /**
   * The trajectory with each conversation's items from `itemsOf`; everything else copied. The
   * run's order goes with it when there are sub-agent conversations to interleave.
   */
  private build(itemsOf: (history: ConversationRecorder) => MessageOrChoice[], order: number[]): TrajectoryInput {
    const trajectory: TrajectoryInput = {
      messages_and_choices: itemsOf(this),
      additional_histories: this.additionalHistories.map((history) => historyEntry(history, itemsOf(history))),
      metrics: { ...this.metrics },
      metadata: clonePlain(this.metadata),
      logs: [...this.logs],
    };
    if (this.tools !== null) trajectory.tools = clonePlain(this.tools);
    if (this.reward !== undefined) trajectory.reward = this.reward;
    if (this.additionalHistories.length > 0) trajectory[TURN_ORDER_KEY] = order;
    return trajectory;
  }
}

/** The `additional_histories` entry of `history` with `items` (its tools copied). */
function historyEntry(history: ConversationRecorder, items: MessageOrChoice[]): AdditionalHistory {
  const entry: AdditionalHistory = { messages_and_choices: items };
  if (history.tools !== null) entry.tools = clonePlain(history.tools);
  return entry;
}

/** {@link ConversationRecorder.takeItems} of another history (protected members are reachable from the class body only through `this`). */
function takeItemsOf(history: ConversationRecorder): MessageOrChoice[] {
  return (history as unknown as { takeItems(): MessageOrChoice[] }).takeItems();
}

/** An assistant message with no text (missing, null, '' or no parts) and no tool calls. */
function isEmptyAssistant(message: unknown): boolean {
  if (typeof message !== 'object' || message === null) return false;
  const {
    role,
    content,
    tool_calls: toolCalls,
  } = message as { role?: unknown; content?: unknown; tool_calls?: unknown };
  if (role !== 'assistant') return false;
  if (Array.isArray(toolCalls) && toolCalls.length > 0) return false;
  return (
    content === undefined || content === null || content === '' || (Array.isArray(content) && content.length === 0)
  );
}
