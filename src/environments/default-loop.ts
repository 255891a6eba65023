/**
 * The default agent loop of an environment without a rollout of its own: the system prompt and the
 * task's prompt, then up to `maxTurns` chat completions through `context.model.openai()`, each
 * turn's tool calls executed through `context.tools` and answered as tool messages (errors
 * included), until a turn calls no tool.
 */
import { invalidOption } from '../internal/option-schema.js';
import type { ChatCompletionsClient } from '../schema/chat-client.js';
import type { ChatCompletionMessageParam } from '../schema/index.js';
import type { EnvironmentContext, PromptTask } from './environment-types.js';

/** What the loop needs besides the task and the context. */
export interface DefaultLoopSettings {
  /** The system message, if any. */
  readonly systemPrompt: string | undefined;
  /** The limit of model turns. */
  readonly maxTurns: number;
  /** The run's captured client (`context.model.openai()`, made once a run). */
  readonly client: () => ChatCompletionsClient;
}

/** Whether `task` is a {@link PromptTask}: an object whose `prompt` is a string or an array of messages. */
export function isPromptTask(task: unknown): task is PromptTask {
  if (typeof task !== 'object' || task === null) return false;
  const prompt = (task as { prompt?: unknown }).prompt;
  return typeof prompt === 'string' || Array.isArray(prompt);
}

/** The words of the error of a task that is no {@link PromptTask}. */
export const PROMPT_TASK_EXPECTED =
  'a task of the default loop, { prompt: string | messages, answer?, info? } (or give the environment a `rollout`)';

/** The conversation the loop starts from: the system prompt, then the task's prompt. */
function startMessages(task: PromptTask, systemPrompt: string | undefined): ChatCompletionMessageParam[] {
  const messages: ChatCompletionMessageParam[] = [];
  if (systemPrompt !== undefined) messages.push({ role: 'system', content: systemPrompt });
  if (typeof task.prompt === 'string') messages.push({ role: 'user', content: task.prompt });
  else messages.push(...structuredClone(task.prompt as ChatCompletionMessageParam[]));
  return messages;
}

/** A function tool call of an assistant message (custom tools are not offered by environments). */
interface FunctionCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

/** The assistant message of a completion, as the conversation sends it back: role, text, tool calls. */
function assistantMessage(message: { content?: unknown; tool_calls?: unknown }): {
  message: ChatCompletionMessageParam;
  calls: FunctionCall[];
} {
  const calls = (Array.isArray(message.tool_calls) ? message.tool_calls : []) as FunctionCall[];
  const content = typeof message.content === 'string' ? message.content : null;
  const echoed: Record<string, unknown> = { role: 'assistant', content };
  if (calls.length > 0) echoed['tool_calls'] = calls;
  return {
    message: echoed as ChatCompletionMessageParam,
    calls: calls.filter((call) => call.type === 'function'),
  };
}

/**
 * Plays `task` with the default loop. Every completion is recorded by the captured client; the
 * tool messages are added to the trajectory as they come, so it holds the conversation in order
 * (the prompt, each assistant Choice, its tool messages). Records `num_turns`, `tool_calls` and
 * `tool_errors` in `trajectory.metrics`, and the tools offered in `trajectory.tools`.
 */
export async function defaultLoop(task: unknown, context: EnvironmentContext, settings: DefaultLoopSettings) {
  if (!isPromptTask(task)) throw invalidOption('task', task, PROMPT_TASK_EXPECTED);
  const { trajectory, tools, signal, sampling, model } = context;
  const messages = startMessages(task, settings.systemPrompt);
  const definitions = [...tools.definitions];
  if (definitions.length > 0) trajectory.tools = structuredClone(definitions);
  const client = settings.client();
  const metrics = { num_turns: 0, tool_calls: 0, tool_errors: 0 };
  try {
    while (metrics.num_turns < settings.maxTurns) {
      const request: Record<string, unknown> = { model: model.inferenceName(), ...sampling, messages };
      if (definitions.length > 0) request['tools'] = definitions;
      const completion = (await client.chat.completions.create(request as never, { signal })) as {
        choices?: { message?: { content?: unknown; tool_calls?: unknown } }[];
      };
      metrics.num_turns += 1;
      const reply = completion.choices?.[0]?.message;
      if (reply === undefined) break;
      const { message, calls } = assistantMessage(reply);
      messages.push(message);
      if (calls.length === 0) break;
      for (const call of calls) {
        metrics.tool_calls += 1;
        const result = await tools.call(call.function.name, call.function.arguments, {
          signal,
          toolCallId: call.id,
        });
        if (result.isError) metrics.tool_errors += 1;
        const toolMessage: ChatCompletionMessageParam = {
          role: 'tool',
          tool_call_id: call.id,
          content: result.content,
        };
        messages.push(toolMessage);
        trajectory.addMessage(toolMessage);
      }
    }
  } finally {
    Object.assign(trajectory.metrics, metrics);
  }
}
