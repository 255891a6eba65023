/** Reading what the model said and did in a trajectory: the inputs of most reward functions. */
import { isChoice, type Choice, type MessageOrChoice } from '../schema/index.js';

/** Anything with `messages_and_choices` (a trajectory, a history, or their input forms). */
export interface HasMessagesAndChoices {
  /** The conversation: messages and Choices in order. */
  readonly messages_and_choices?: readonly MessageOrChoice[] | undefined;
}

/** A tool call the model made, with its arguments parsed when they are JSON. */
export interface ModelToolCall {
  /** The tool call id. */
  readonly id: string;
  /** The function (or custom tool) name. */
  readonly name: string;
  /** The parsed JSON arguments, or the raw string when it is not JSON (custom tools: the input). */
  readonly arguments: unknown;
  /** The raw `arguments` (or custom `input`) string. */
  readonly rawArguments: string;
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part: unknown) => {
        const record = (part ?? {}) as Record<string, unknown>;
        return typeof record['text'] === 'string' ? record['text'] : '';
      })
      .join('');
  }
  return '';
}

/** The Choices (the model's sampled turns) of a trajectory, in order. */
export function choicesOf(trajectory: HasMessagesAndChoices): Choice[] {
  return (trajectory.messages_and_choices ?? []).filter(isChoice);
}

/**
 * The texts of the assistant turns, in order: every Choice, and hand-written assistant messages
 * too when `includeMessages` is set.
 */
export function assistantTexts(
  trajectory: HasMessagesAndChoices,
  options: { includeMessages?: boolean } = {},
): string[] {
  const texts: string[] = [];
  for (const item of trajectory.messages_and_choices ?? []) {
    if (isChoice(item)) texts.push(contentText(item.message.content));
    else if (options.includeMessages === true && item.role === 'assistant') texts.push(contentText(item.content));
  }
  return texts;
}

/**
 * The text of the last assistant turn (a Choice, or an assistant message added by hand), or `''`
 * when there is none or it only called tools.
 * @example
 * finalAssistantText(trajectory) === '4' ? 1 : 0;
 */
export function finalAssistantText(trajectory: HasMessagesAndChoices): string {
  const items = trajectory.messages_and_choices ?? [];
  for (let index = items.length - 1; index >= 0; index -= 1) {
    const item = items[index];
    if (item === undefined) continue;
    if (isChoice(item)) return contentText(item.message.content);
    if (item.role === 'assistant') return contentText(item.content);
  }
  return '';
}

function parseArguments(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

/**
 * Every tool call the model made (in its Choices), in order, with parsed arguments.
 * @example
 * toolCallsOf(trajectory).some((call) => call.name === 'search');
 */
export function toolCallsOf(trajectory: HasMessagesAndChoices): ModelToolCall[] {
  const calls: ModelToolCall[] = [];
  for (const choice of choicesOf(trajectory)) {
    for (const call of choice.message.tool_calls ?? []) {
      if (call.type === 'function') {
        const raw = call.function.arguments;
        calls.push({ id: call.id, name: call.function.name, arguments: parseArguments(raw), rawArguments: raw });
      } else {
        calls.push({
          id: call.id,
          name: call.custom.name,
          arguments: call.custom.input,
          rawArguments: call.custom.input,
        });
      }
    }
  }
  return calls;
}

/**
 * Tokens the model generated in the trajectory, counted from the Choices' logprobs; undefined when
 * a Choice carries none (request `logprobs: true` to have them).
 */
export function completionTokenCount(trajectory: HasMessagesAndChoices): number | undefined {
  let count = 0;
  for (const choice of choicesOf(trajectory)) {
    const content = choice.logprobs?.content;
    if (!Array.isArray(content)) return undefined;
    count += content.length;
  }
  return count;
}
