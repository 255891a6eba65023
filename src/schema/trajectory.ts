/** Trajectories, groups and the log request: the training data that crosses the wire. */
import { z } from 'zod';
import { Choice } from './choice.js';
import { ChatCompletionFunctionToolParam, ChatCompletionMessageParam } from './messages.js';

/**
 * An item of `messages_and_choices`: a message (has `role`, context only) or a `Choice`
 * (no `role`, trainable).
 */
export const MessageOrChoice = z.union([ChatCompletionMessageParam, Choice]);
export type MessageOrChoice = z.infer<typeof MessageOrChoice>;

/**
 * True when an item of `messages_and_choices` is a trainable `Choice` rather than a message.
 * @example
 * const trainable = trajectory.messages_and_choices.filter(isChoice);
 */
export function isChoice(item: MessageOrChoice): item is Choice {
  return !('role' in item) || item.role === undefined;
}

/**
 * The conversation message an item of `messages_and_choices` stands for: a message is itself, a
 * `Choice` stands for its assistant message (what the model said, as it would be sent back).
 * @example
 * const conversation = trajectory.messages_and_choices.map(messageOf);
 */
export function messageOf(item: MessageOrChoice): ChatCompletionMessageParam {
  if (!isChoice(item)) return item;
  const message = item.message;
  const result: ChatCompletionMessageParam = { role: 'assistant', content: message.content ?? null };
  if (message.tool_calls && message.tool_calls.length > 0) result.tool_calls = message.tool_calls;
  if (message.function_call) result.function_call = message.function_call;
  if (message.refusal) result.refusal = message.refusal;
  return result;
}

/**
 * Metrics of a trajectory or group: numbers and booleans only (`{number, integer, boolean}` in the
 * contract); strings, `null` and nested values are rejected.
 */
export const Metrics = z.record(
  z.string(),
  z.union([z.number(), z.boolean()], {
    error: (issue) =>
      `Expected a metric value (number or boolean), got ${issue.input === null ? 'null' : typeof issue.input}`,
  }),
);
export type Metrics = z.infer<typeof Metrics>;

/**
 * A sub-agent's conversation inside a trajectory: an entry of `additional_histories`. The contract
 * names it `History` (the older document) and `LegacyHistory` (the newer); `History` would shadow
 * the global `History`.
 */
export const AdditionalHistory = z.looseObject({
  messages_and_choices: z.array(MessageOrChoice),
  tools: z.array(ChatCompletionFunctionToolParam).nullable().optional(),
});
export type AdditionalHistory = z.infer<typeof AdditionalHistory>;

/**
 * A value of a trajectory's `metadata`: a string, number, boolean or null. The primary contract
 * (the older published document) allows nothing else, so an object or an array is refused with
 * what to do instead.
 */
export const TrajectoryMetadataValue = z.union([z.string(), z.number(), z.boolean(), z.null()], {
  error: (issue) =>
    `Expected a string, number, boolean or null (the hosted service refuses objects and arrays in trajectory metadata), got ${
      Array.isArray(issue.input) ? 'an array' : typeof issue.input
    }: store JSON.stringify(value) instead, or put it in the group's metadata`,
});
export type TrajectoryMetadataValue = z.infer<typeof TrajectoryMetadataValue>;

const DATE_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$/;

/**
 * An ISO 8601 date-time as RFC 3339, which the hosted service's `date-time` requires: a time
 * without an offset is taken as UTC (`Z` appended), one without seconds gets `:00`. Other values
 * are returned as they are.
 * @example
 * toRfc3339('2025-06-01T12:00:00.123456'); // '2025-06-01T12:00:00.123456Z'
 */
export function toRfc3339(value: string): string {
  const match = DATE_TIME.exec(value);
  if (match === null) return value;
  return `${match[1]}${match[2] ?? ':00'}${match[3] ?? 'Z'}`;
}

/**
 * One rollout: its conversation, reward, metrics and the policy versions it sampled from.
 * `{}` is valid and parses to the defaults: `messages_and_choices: []`,
 * `additional_histories: []`, `reward: 0`, `metrics: {}`, `metadata: {}`, `logs: []`.
 * `metadata` values are scalars (string, number, boolean, null), as the primary contract declares:
 * a hosted service on that version answers an object or array with 422, so it is refused here, at
 * build and log time, with the field named. `start_time` is ISO 8601; a time without a UTC offset
 * (Python's `datetime.now().isoformat()`) is taken as UTC and sent as RFC 3339 (`...Z`).
 * Unknown keys are kept.
 * @example
 * Trajectory.parse({ messages_and_choices: [{ role: 'user', content: 'Hi' }, choice], reward: 1 });
 */
export const Trajectory = z.looseObject({
  /** Messages (context) and `Choice` items (trainable turns), in order. @default [] */
  messages_and_choices: z.array(MessageOrChoice).default([]),
  tools: z.array(ChatCompletionFunctionToolParam).nullable().optional(),
  /** Sub-agent conversations. @default [] */
  additional_histories: z.array(AdditionalHistory).default([]),
  /** @default 0 */
  reward: z.number().default(0),
  initial_policy_version: z.int().nullable().optional(),
  final_policy_version: z.int().nullable().optional(),
  /** @default {} */
  metrics: Metrics.default({}),
  /** Scalar values only (string, number, boolean, null). @default {} */
  metadata: z.record(z.string(), TrajectoryMetadataValue).default({}),
  /** @default [] */
  logs: z.array(z.string()).default([]),
  /** ISO 8601; without an offset it is taken as UTC (parsed to RFC 3339, `...Z`). */
  start_time: z.iso.datetime({ offset: true, local: true }).transform(toRfc3339).optional(),
  exchanges: z.record(z.string(), z.unknown()).optional(),
});
/** A parsed trajectory (defaults applied). */
export type Trajectory = z.output<typeof Trajectory>;
/** A trajectory as it may be written before parsing (fields with defaults may be left out). */
export type TrajectoryInput = z.input<typeof Trajectory>;

/** A rollout that failed, kept with its group (`{type, message, traceback}`). */
export const PydanticException = z.object({
  type: z.string(),
  message: z.string(),
  traceback: z.string(),
});
export type PydanticException = z.infer<typeof PydanticException>;

/** Short name for {@link PydanticException}. */
export const TrajectoryException = PydanticException;
export type TrajectoryException = PydanticException;

/**
 * The rollouts of one scenario, compared against each other for advantages. `trajectories` is
 * required (the primary contract; the newer document makes it optional, but every real client
 * sends it). `exceptions`, `metadata`, `metrics` and `logs` are the newer document's additions,
 * which real clients send. Unknown keys are dropped.
 */
export const TrajectoryGroup = z.object({
  trajectories: z.array(Trajectory),
  exceptions: z.array(PydanticException).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  metrics: Metrics.optional(),
  logs: z.array(z.string()).optional(),
});
export type TrajectoryGroup = z.output<typeof TrajectoryGroup>;
/** A group as it may be written before parsing. */
export type TrajectoryGroupInput = z.input<typeof TrajectoryGroup>;

/**
 * Body of `POST /v1/preview/models/{model_id}/log`. Real clients repeat `model_id` in it.
 * @example
 * LogRequest.parse({ split: 'train', trajectory_groups: [{ trajectories: [{ reward: 1 }, { reward: 0 }] }] });
 */
export const LogRequest = z.object({
  split: z.string(),
  trajectory_groups: z.array(TrajectoryGroup),
  model_id: z.string().optional(),
});
export type LogRequest = z.output<typeof LogRequest>;
/** A log request as it may be written before parsing. */
export type LogRequestInput = z.input<typeof LogRequest>;
