/**
 * A fast path for the hot schemas (`Trajectory`, `TrajectoryGroup`, `LogRequest`): plain checks of
 * the common shapes, deferring to the zod schema of an item whenever a check is not sure. It only
 * ever *accepts*: a value it does not accept goes to the zod schema as a whole, which then accepts
 * it the slow way or builds the issues (so error reports are zod's, unchanged).
 *
 * Soundness rule of every check below: it returns true only for values that the zod schema
 * accepts, and then the zod output equals the input (loose objects keep every key, nothing below
 * the trajectory has defaults), so the input itself, with the trajectory's defaults filled in and
 * the unknown keys of strict-by-stripping objects removed, is the parse result. Internal: not part
 * of `policyloop/schema`.
 */
import type { z } from 'zod';
import { boundedSafeParse } from './bounded-parse.js';
import { Choice } from './choice.js';
import { ChatCompletionFunctionToolParam, ChatCompletionMessageParam } from './messages.js';
import {
  AdditionalHistory,
  LogRequest,
  PydanticException,
  Trajectory,
  TrajectoryGroup,
  toRfc3339,
} from './trajectory.js';

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isOptionalString(value: unknown): boolean {
  return value === undefined || typeof value === 'string';
}

function isNullishString(value: unknown): boolean {
  return value === undefined || value === null || typeof value === 'string';
}

/** `z.number()`: finite numbers only. */
function isNumber(value: unknown): boolean {
  return typeof value === 'number' && Number.isFinite(value);
}

/** `z.int()`: safe integers only. */
function isInt(value: unknown): boolean {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

/**
 * Deferral to a zod schema: the check is exact, only slower. Bounded: a large item stops at its
 * first issue (zod alone would make one per bad element of, say, a million content parts).
 */
function accepts(schema: z.ZodType, value: unknown): boolean {
  return boundedSafeParse(schema, value, { maxIssues: 1 }).success;
}

const SYSTEM_KEYS = ['name'] as const;

// Loops rather than `every` with a closure: these run for every item of every trajectory.
function allOptionalStrings(item: Json, keys: readonly string[]): boolean {
  for (let index = 0; index < keys.length; index += 1) if (!isOptionalString(item[keys[index] as string])) return false;
  return true;
}

function allUndefined(item: Json, keys: readonly string[]): boolean {
  for (let index = 0; index < keys.length; index += 1) if (item[keys[index] as string] !== undefined) return false;
  return true;
}

function allNullish(item: Json, keys: readonly string[]): boolean {
  for (let index = 0; index < keys.length; index += 1) {
    const value = item[keys[index] as string];
    if (value !== undefined && value !== null) return false;
  }
  return true;
}
const ASSISTANT_KEYS = ['audio', 'function_call', 'name', 'tool_calls'] as const;

/** A message with plain string content and only plain optional keys; anything else defers to zod. */
function isMessage(item: Json): boolean {
  const role = item['role'];
  switch (role) {
    case 'system':
    case 'developer':
    case 'user':
      if (typeof item['content'] === 'string' && allOptionalStrings(item, SYSTEM_KEYS)) return true;
      break;
    case 'tool':
      if (typeof item['content'] === 'string' && typeof item['tool_call_id'] === 'string') return true;
      break;
    case 'assistant':
      if (isNullishString(item['content']) && isNullishString(item['refusal']) && allUndefined(item, ASSISTANT_KEYS))
        return true;
      break;
    default:
      break;
  }
  return accepts(ChatCompletionMessageParam, item);
}

const FINISH_REASONS = new Set(['stop', 'length', 'tool_calls', 'content_filter', 'function_call']);

function isTokenLogprob(entry: unknown, withTop: boolean): boolean {
  if (!isRecord(entry)) return false;
  if (typeof entry['token'] !== 'string' || !isNumber(entry['logprob'])) return false;
  const bytes = entry['bytes'];
  if (bytes !== undefined && bytes !== null) {
    if (!Array.isArray(bytes)) return false;
    for (const byte of bytes) if (!isInt(byte)) return false;
  }
  if (!withTop) return true;
  const top = entry['top_logprobs'];
  if (!Array.isArray(top)) return false;
  for (const alternative of top) if (!isTokenLogprob(alternative, false)) return false;
  return true;
}

function isLogprobList(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (!Array.isArray(value)) return false;
  for (const entry of value) if (!isTokenLogprob(entry, true)) return false;
  return true;
}

const MESSAGE_KEYS = ['annotations', 'audio', 'function_call', 'tool_calls'] as const;

/** A Choice whose message has plain text and no tool calls; anything else defers to zod. */
function isChoice(item: Json): boolean {
  const message = item['message'];
  const logprobs = item['logprobs'];
  if (
    FINISH_REASONS.has(item['finish_reason'] as string) &&
    isInt(item['index']) &&
    isRecord(message) &&
    message['role'] === 'assistant' &&
    isNullishString(message['content']) &&
    isNullishString(message['refusal']) &&
    allNullish(message, MESSAGE_KEYS) &&
    (logprobs === undefined ||
      logprobs === null ||
      (isRecord(logprobs) && isLogprobList(logprobs['content']) && isLogprobList(logprobs['refusal'])))
  )
    return true;
  return accepts(Choice, item);
}

/** `MessageOrChoice`, a union: a message, else a Choice (a Choice may carry any other `role`). */
function isMessageOrChoice(item: unknown): boolean {
  if (!isRecord(item)) return false;
  if (item['role'] !== undefined && isMessage(item)) return true;
  return isChoice(item);
}

function isItems(value: unknown): boolean {
  if (!Array.isArray(value)) return false;
  for (const item of value) if (!isMessageOrChoice(item)) return false;
  return true;
}

function isTools(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (!Array.isArray(value)) return false;
  for (const tool of value) if (!accepts(ChatCompletionFunctionToolParam, tool)) return false;
  return true;
}

function isMetrics(value: unknown): boolean {
  if (!isRecord(value)) return false;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const metric = value[key];
    if (typeof metric !== 'boolean' && !isNumber(metric)) return false;
  }
  return true;
}

function isStrings(value: unknown): boolean {
  if (!Array.isArray(value)) return false;
  for (const line of value) if (typeof line !== 'string') return false;
  return true;
}

function isNullishInt(value: unknown): boolean {
  return value === undefined || value === null || isInt(value);
}

const START_TIME = Trajectory.shape.start_time;

/**
 * Checks a trajectory and fills its defaults in place. True when `Trajectory` accepts it; the
 * value then equals `Trajectory.parse` of it. On false the value is left as it was.
 */
function fillTrajectory(value: unknown): boolean {
  if (!isRecord(value)) return false;
  const items = value['messages_and_choices'];
  const histories = value['additional_histories'];
  const reward = value['reward'];
  const metrics = value['metrics'];
  const metadata = value['metadata'];
  const logs = value['logs'];
  const startTime = value['start_time'];
  const exchanges = value['exchanges'];
  if (items !== undefined && !isItems(items)) return false;
  if (!isTools(value['tools'])) return false;
  if (histories !== undefined) {
    if (!Array.isArray(histories)) return false;
    for (const history of histories) {
      if (!isRecord(history)) return false;
      if (!isItems(history['messages_and_choices']) || !isTools(history['tools'])) {
        if (!accepts(AdditionalHistory, history)) return false;
      }
    }
  }
  if (reward !== undefined && !isNumber(reward)) return false;
  if (!isNullishInt(value['initial_policy_version']) || !isNullishInt(value['final_policy_version'])) return false;
  if (metrics !== undefined && !isMetrics(metrics)) return false;
  if (metadata !== undefined && !isScalarRecord(metadata)) return false;
  if (logs !== undefined && !isStrings(logs)) return false;
  if (startTime !== undefined && (typeof startTime !== 'string' || !accepts(START_TIME, startTime))) return false;
  if (exchanges !== undefined && !isRecord(exchanges)) return false;
  if (items === undefined) value['messages_and_choices'] = [];
  if (histories === undefined) value['additional_histories'] = [];
  if (reward === undefined) value['reward'] = 0;
  if (metrics === undefined) value['metrics'] = {};
  if (metadata === undefined) value['metadata'] = {};
  if (logs === undefined) value['logs'] = [];
  if (startTime !== undefined) value['start_time'] = toRfc3339(startTime as string);
  return true;
}

/** An object whose values are all strings, numbers, booleans or null (trajectory metadata). */
function isScalarRecord(value: unknown): boolean {
  if (!isRecord(value)) return false;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const entry = value[key];
    if (entry !== null && typeof entry !== 'string' && typeof entry !== 'boolean' && !isNumber(entry)) return false;
  }
  return true;
}

const GROUP_KEYS = new Set(Object.keys(TrajectoryGroup.shape));
const EXCEPTION_KEYS = new Set(Object.keys(PydanticException.shape));
const LOG_REQUEST_KEYS = new Set(Object.keys(LogRequest.shape));

/** The value with only `keys` kept (what a stripping `z.object` outputs), or the value itself when it has no others. */
function stripped(value: Json, keys: ReadonlySet<string>): Json {
  for (const key of Object.keys(value)) {
    if (!keys.has(key)) {
      const copy: Json = {};
      for (const kept of Object.keys(value)) if (keys.has(kept)) copy[kept] = value[kept];
      return copy;
    }
  }
  return value;
}

/** Checks a group and fills its trajectories' defaults; the stripped group, or undefined when unsure. */
function fastGroup(value: unknown): Json | undefined {
  if (!isRecord(value)) return undefined;
  const trajectories = value['trajectories'];
  const exceptions = value['exceptions'];
  const metadata = value['metadata'];
  const metrics = value['metrics'];
  const logs = value['logs'];
  if (!Array.isArray(trajectories)) return undefined;
  let keptExceptions = exceptions;
  if (exceptions !== undefined) {
    if (!Array.isArray(exceptions)) return undefined;
    for (const exception of exceptions) if (!accepts(PydanticException, exception)) return undefined;
    keptExceptions = exceptions.map((exception: Json) => stripped(exception, EXCEPTION_KEYS));
  }
  if (metadata !== undefined && !isRecord(metadata)) return undefined;
  if (metrics !== undefined && !isMetrics(metrics)) return undefined;
  if (logs !== undefined && !isStrings(logs)) return undefined;
  for (const trajectory of trajectories) if (!fillTrajectory(trajectory)) return undefined;
  const group = stripped(value, GROUP_KEYS);
  return exceptions === undefined ? group : { ...group, exceptions: keptExceptions };
}

/**
 * `Trajectory.safeParse(value)`, faster for the common shapes: the parsed trajectory, or
 * `undefined` when the fast path is not sure (then parse with zod, which also reports the issues).
 * The value is used as the result: pass a value you own (its defaults are filled in place).
 */
export function fastParseTrajectory(value: unknown): z.output<typeof Trajectory> | undefined {
  return fillTrajectory(value) ? (value as z.output<typeof Trajectory>) : undefined;
}

/**
 * `TrajectoryGroup.safeParse(value)`, faster for the common shapes: the parsed group, or
 * `undefined` when the fast path is not sure. The value is used as the result (trajectory defaults
 * filled in place): pass a value you own.
 */
export function fastParseTrajectoryGroup(value: unknown): z.output<typeof TrajectoryGroup> | undefined {
  return fastGroup(value) as z.output<typeof TrajectoryGroup> | undefined;
}

/**
 * `LogRequest.safeParse(value)`, faster for the common shapes: the parsed request, or `undefined`
 * when the fast path is not sure (then parse with zod, which also builds the 422). The value is
 * used as the result (trajectory defaults filled in place): pass a value you own.
 */
export function fastParseLogRequest(value: unknown): z.output<typeof LogRequest> | undefined {
  if (!isRecord(value)) return undefined;
  const split = value['split'];
  const groups = value['trajectory_groups'];
  if (typeof split !== 'string' || !Array.isArray(groups) || !isOptionalString(value['model_id'])) return undefined;
  const parsed: unknown[] = new Array(groups.length);
  for (let index = 0; index < groups.length; index += 1) {
    const group = fastGroup(groups[index]);
    if (group === undefined) return undefined;
    parsed[index] = group;
  }
  const result = stripped(value, LOG_REQUEST_KEYS);
  return { ...result, trajectory_groups: parsed } as z.output<typeof LogRequest>;
}
