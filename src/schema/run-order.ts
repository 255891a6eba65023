/**
 * The whole run of a trajectory: its main conversation and every `additional_histories` entry (a
 * sub-agent's conversation, e.g. after a handoff), merged in the order the turns happened.
 */
import type { MessageOrChoice } from './trajectory.js';

/**
 * The trajectory key where the recorder keeps the run's order: one entry per item recorded, in the
 * order they were recorded, naming the conversation it went into (0 the main conversation, `i` the
 * entry `additional_histories[i - 1]`). Written only when a trajectory has additional histories.
 * @example
 * // main: user, choice; history 1: system, user, choice; then main again: tool, choice
 * { turn_order: [0, 0, 1, 1, 1, 0, 0] }
 */
export const TURN_ORDER_KEY = 'turn_order';

/** What {@link runItems} reads: a trajectory or its input form, with or without histories. */
export interface RunSource {
  /** The main conversation. */
  readonly messages_and_choices?: readonly MessageOrChoice[] | undefined;
  /** Sub-agent conversations. */
  readonly additional_histories?:
    | readonly { readonly messages_and_choices?: readonly MessageOrChoice[] | undefined }[]
    | undefined;
  /** See {@link TURN_ORDER_KEY}. */
  readonly turn_order?: unknown;
}

/** Options of the trajectory readers: which conversations they read. */
export interface RunReadOptions {
  /**
   * Read the main conversation only (`messages_and_choices`), not the sub-agents' histories.
   * @default false
   */
  readonly mainOnly?: boolean | undefined;
}

/** One item of a run, with the conversation it belongs to. */
export interface RunItem {
  /** The message or Choice. */
  readonly item: MessageOrChoice;
  /** 0 for the main conversation, `i` for `additional_histories[i - 1]`. */
  readonly history: number;
}

/**
 * Every item of the run in the order it happened: the main conversation and each additional
 * history interleaved by the trajectory's `turn_order` (see {@link TURN_ORDER_KEY}). Without a
 * usable order (none recorded, or the conversations were edited since) the main conversation
 * comes first, then each history in turn. `mainOnly` reads the main conversation alone.
 * @example
 * const last = runItems(trajectory).at(-1); // the run's last item, a sub-agent's answer after a handoff
 */
export function runItems(trajectory: RunSource, options: RunReadOptions = {}): RunItem[] {
  const main = trajectory.messages_and_choices ?? [];
  const histories = options.mainOnly === true ? [] : (trajectory.additional_histories ?? []);
  const lists: readonly (readonly MessageOrChoice[])[] = [
    main,
    ...histories.map((history) => history.messages_and_choices ?? []),
  ];
  const order = histories.length > 0 ? usableOrder(trajectory.turn_order, lists) : undefined;
  if (order === undefined) {
    return lists.flatMap((items, history) => items.map((item) => ({ item, history })));
  }
  const next = lists.map(() => 0);
  return order.map((history) => {
    const index = next[history] as number;
    next[history] = index + 1;
    return { item: (lists[history] as readonly MessageOrChoice[])[index] as MessageOrChoice, history };
  });
}

/** `order` when it is a list of conversation indexes that accounts for every item exactly. */
function usableOrder(order: unknown, lists: readonly (readonly MessageOrChoice[])[]): readonly number[] | undefined {
  if (!Array.isArray(order)) return undefined;
  const counts = lists.map(() => 0);
  for (const history of order as unknown[]) {
    if (typeof history !== 'number' || !Number.isInteger(history) || history < 0 || history >= lists.length) {
      return undefined;
    }
    counts[history] = (counts[history] as number) + 1;
  }
  return counts.every((count, history) => count === lists[history]?.length) ? (order as number[]) : undefined;
}
