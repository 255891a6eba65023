/**
 * Reading what the model said and did in a trajectory: the inputs of most reward functions. Each
 * reader reads the whole run: the main conversation and every sub-agent history
 * (`additional_histories`, e.g. after a handoff), in the order the turns happened; pass
 * `{ mainOnly: true }` to read the main conversation alone.
 */
import { isChoice, runItems, type Choice, type RunReadOptions, type RunSource } from '../schema/index.js';

/**
 * Anything with `messages_and_choices` (a trajectory, a history, or their input forms), and
 * optionally `additional_histories` and the `turn_order` the recorder keeps.
 */
export type HasMessagesAndChoices = RunSource;

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

/**
 * The Choices (the model's sampled turns) of the whole run, in the order they happened
 * (`mainOnly`: of the main conversation).
 * @example
 * choicesOf(trajectory).length; // model calls, sub-agents' included
 */
export function choicesOf(trajectory: HasMessagesAndChoices, options: RunReadOptions = {}): Choice[] {
  const choices: Choice[] = [];
  for (const { item } of runItems(trajectory, options)) if (isChoice(item)) choices.push(item);
  return choices;
}

/** Options of {@link assistantTexts}. */
export interface AssistantTextsOptions extends RunReadOptions {
  /**
   * Include hand-written assistant messages (not only Choices).
   * @default false
   */
  readonly includeMessages?: boolean | undefined;
}

/**
 * The texts of the assistant turns of the whole run, in order: every Choice, and hand-written
 * assistant messages too when `includeMessages` is set.
 */
export function assistantTexts(trajectory: HasMessagesAndChoices, options: AssistantTextsOptions = {}): string[] {
  const texts: string[] = [];
  for (const { item } of runItems(trajectory, options)) {
    if (isChoice(item)) texts.push(contentText(item.message.content));
    else if (options.includeMessages === true && item.role === 'assistant') texts.push(contentText(item.content));
  }
  return texts;
}

/**
 * The text of the run's last assistant turn (a Choice, or an assistant message added by hand), or
 * `''` when there is none or it only called tools. After a handoff that is the specialist's answer
 * in `additional_histories`; `mainOnly` reads the main conversation's last turn instead.
 * @example
 * finalAssistantText(trajectory) === '4' ? 1 : 0;
 * finalAssistantText(trajectory, { mainOnly: true }); // the triage agent's last turn
 */
export function finalAssistantText(trajectory: HasMessagesAndChoices, options: RunReadOptions = {}): string {
  const items = runItems(trajectory, options);
  for (let index = items.length - 1; index >= 0; index -= 1) {
    const item = items[index]?.item;
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
 * Every tool call the model made (in its Choices) over the whole run, sub-agents' included, in
 * order, with parsed arguments (`mainOnly`: the main conversation's only).
 * @example
 * toolCallsOf(trajectory).some((call) => call.name === 'search');
 */
export function toolCallsOf(trajectory: HasMessagesAndChoices, options: RunReadOptions = {}): ModelToolCall[] {
  const calls: ModelToolCall[] = [];
  for (const choice of choicesOf(trajectory, options)) {
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
 * Tokens the model generated in the run, counted from the Choices' logprobs; undefined when a
 * Choice carries none (request `logprobs: true` to have them).
 */
export function completionTokenCount(
  trajectory: HasMessagesAndChoices,
  options: RunReadOptions = {},
): number | undefined {
  let count = 0;
  for (const choice of choicesOf(trajectory, options)) {
    const content = choice.logprobs?.content;
    if (!Array.isArray(content)) return undefined;
    count += content.length;
  }
  return count;
}
