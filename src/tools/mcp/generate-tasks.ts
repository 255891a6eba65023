/**
 * Training tasks from tools (OpenPipe ART's MCP•RL first step): a model reads the tool
 * definitions and writes tasks that need them, with a difficulty, in structured output.
 */
import { z } from 'zod';
import { raceSignal } from '../../internal/delay.js';
import { PolicyloopError, userAbortError } from '../../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../../internal/option-schema.js';
import type { ChatCompletionsClient } from '../../schema/chat-client.js';
import type { ToolDefinition, ToolSource } from '../tool-types.js';

/** One generated task. */
export interface GeneratedTask {
  /** What a user asks, in their words (it does not name the tools). */
  readonly task: string;
  /** 1 (one obvious call) to 5 (many calls, planning, recovering from errors). */
  readonly difficulty: number;
}

/**
 * The model that writes the tasks: a `PromptedModel` (or a `TrainableModel`) on any
 * OpenAI-compatible endpoint, or anything with `openai()` and `inferenceName()`.
 */
export interface TaskWriterModel {
  /** A chat-completions client for the endpoint. */
  openai(): ChatCompletionsClient;
  /** The model name to request. */
  inferenceName(): string;
}

/** What {@link generateTasks} takes. */
export interface GenerateTasksParams {
  /**
   * The tools the tasks must need: OpenAI tool definitions, or tool sources such as
   * `mcpServer(...)` (each started to list its tools, then closed).
   */
  tools: readonly (ToolDefinition | ToolSource)[];
  /** The model that writes the tasks. */
  model: TaskWriterModel;
  /** How many tasks (at most 200). */
  count: number;
  /** More instructions for the writer (the domain, the users, what to avoid). */
  instructions?: string | undefined;
  /**
   * Attempts in all: an answer that is not the JSON asked for (or has too few tasks) is asked for
   * again, up to this many times.
   * @default 3
   */
  maxAttempts?: number | undefined;
  /**
   * Extra request parameters (e.g. `temperature`, `max_tokens`).
   * @default {}
   */
  requestParams?: Readonly<Record<string, unknown>> | undefined;
}

/** Options of {@link generateTasks}. */
export interface GenerateTasksOptions {
  /** Aborts the requests (and the tool sources' start): rejects with `APIUserAbortError`. */
  signal?: AbortSignal | undefined;
}

/**
 * The writer's answers could not be used: after `attempts` attempts none was the JSON asked for
 * with enough tasks. `raw` keeps the last answer's text; `cause` the last parse or shape error.
 * @example
 * try {
 *   await generateTasks({ tools, model, count: 20 });
 * } catch (error) {
 *   if (error instanceof TaskGenerationError) console.error(error.attempts, error.raw);
 * }
 */
export class TaskGenerationError extends PolicyloopError {
  /** How many answers were asked for. */
  readonly attempts: number;
  /** The last answer's text. */
  readonly raw: string;

  /**
   * @param message What was wrong with the last answer.
   * @param options The attempts made, the last answer, the last error.
   */
  constructor(message: string, options: { attempts: number; raw: string; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.attempts = options.attempts;
    this.raw = options.raw;
  }
}

const GenerateTasksParamsSchema = optionsSchema<GenerateTasksParams>()({
  tools: z
    .array(
      option.like<ToolDefinition | ToolSource>(
        (tool) =>
          (tool?.type === 'function' && typeof tool?.function?.name === 'string') ||
          (tool?.kind === 'tool-source' && typeof tool?.start === 'function'),
        'an OpenAI tool definition `{ type: "function", function }` or a tool source such as `mcpServer(...)`',
      ),
      { error: 'an array of tools' },
    )
    .min(1, { error: 'at least one tool' })
    .readonly(),
  model: option.like<TaskWriterModel>(
    (model) => typeof model?.openai === 'function' && typeof model?.inferenceName === 'function',
    'a model with `openai()` and `inferenceName()` (a PromptedModel)',
  ),
  count: option.integer({ min: 1, max: 200 }),
  instructions: option.string().optional(),
  maxAttempts: option.integer({ min: 1 }).default(3),
  requestParams: z.record(z.string(), z.unknown(), { error: 'an object' }).readonly().default({}),
});

const GenerateTasksOptionsSchema = optionsSchema<GenerateTasksOptions>()({
  signal: option.signal().optional(),
});

/** The answer's shape, as the JSON schema sent in `response_format` states it. */
const TASKS_JSON_SCHEMA = {
  type: 'object',
  properties: {
    tasks: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          task: { type: 'string' },
          difficulty: { type: 'integer', minimum: 1, maximum: 5 },
        },
        required: ['task', 'difficulty'],
        additionalProperties: false,
      },
    },
  },
  required: ['tasks'],
  additionalProperties: false,
} as const;

const TasksAnswer = z.object({
  tasks: z.array(
    z.object({
      task: z.string().trim().min(1),
      difficulty: z.number().int().min(1).max(5),
    }),
  ),
});

/** The definitions of every tool: given ones as they are, sources started, listed and closed. */
async function toolDefinitions(
  tools: readonly (ToolDefinition | ToolSource)[],
  signal: AbortSignal | undefined,
): Promise<ToolDefinition[]> {
  const definitions: ToolDefinition[] = [];
  for (const tool of tools) {
    if ('kind' in tool && tool.kind === 'tool-source') {
      const started = await (tool as ToolSource).start({ signal });
      try {
        definitions.push(...started.definitions);
      } finally {
        await started.close();
      }
    } else {
      definitions.push(tool as ToolDefinition);
    }
  }
  return definitions;
}

/** The writer's messages. */
function taskMessages(definitions: readonly ToolDefinition[], count: number, instructions: string | undefined) {
  const toolText = definitions
    .map(({ function: fn }) =>
      [
        `- ${fn.name}: ${fn.description ?? '(no description)'}`,
        `  parameters: ${JSON.stringify(fn.parameters ?? {})}`,
      ].join('\n'),
    )
    .join('\n');
  const system = [
    'You write tasks for training an AI agent to use tools.',
    'Each task is what a user would ask the agent, in their own words: it must need one or more of the tools to be done, it must not name the tools, and it must be possible with the tools alone.',
    'Vary the tasks: different tools, different goals, different wording. Give each a difficulty from 1 (one obvious tool call) to 5 (many calls, planning, checking results), spread over the range.',
    'Answer with JSON only: {"tasks": [{"task": "...", "difficulty": 1}, ...]}.',
  ].join('\n');
  const user = [
    `The tools:\n${toolText}`,
    `Write ${count} tasks.`,
    ...(instructions === undefined || instructions.trim() === '' ? [] : [`More instructions:\n${instructions}`]),
  ].join('\n\n');
  return [
    { role: 'system' as const, content: system },
    { role: 'user' as const, content: user },
  ];
}

/** The text of a chat completion's first choice. */
function answerText(completion: unknown): string {
  const content = (completion as { choices?: { message?: { content?: unknown } }[] } | undefined)?.choices?.[0]?.message
    ?.content;
  return typeof content === 'string' ? content : '';
}

/** Reads the answer's JSON (in a code fence, too); throws with why it cannot be used. */
function parseAnswer(raw: string, count: number): GeneratedTask[] {
  const text = raw.trim();
  const fenced = /^```(?:json)?\s*([\s\S]*?)\s*```$/.exec(text);
  let value: unknown;
  try {
    value = JSON.parse(fenced?.[1] ?? text);
  } catch (error) {
    throw new Error(`the answer is not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  const parsed = TasksAnswer.safeParse(value);
  if (!parsed.success) {
    throw new Error(
      `the answer is not {"tasks": [{"task": string, "difficulty": 1-5}]} (${parsed.error.issues
        .map((issue) => `${issue.path.join('.') || 'answer'}: ${issue.message}`)
        .join('; ')})`,
    );
  }
  if (parsed.data.tasks.length < count) {
    throw new Error(`the answer has ${parsed.data.tasks.length} tasks, ${count} were asked for`);
  }
  return parsed.data.tasks.slice(0, count);
}

/**
 * Asks `model` for `count` training tasks that need `tools`, in one structured-output request
 * (`response_format: { type: 'json_schema' }`), and resolves them as `{ task, difficulty }[]`
 * (difficulty 1-5). An answer that is not the JSON asked for, or has too few tasks, is asked for
 * again (`maxAttempts` in all, 3 by default); then it rejects with a {@link TaskGenerationError}
 * carrying the last answer. Tool sources (`mcpServer(...)`) are started to list their tools and
 * closed. With `relativeJudge` as the reward, this is OpenPipe ART's MCP•RL flow.
 * @example
 * const writer = new PromptedModel({ project: 'notes', name: 'writer', model: 'gpt-4.1-mini', baseURL: 'https://api.openai.com/v1' });
 * const tasks = await generateTasks({ tools: [memory], model: writer, count: 24 });
 * const environment = defineEnvironment({ name: 'notes', dataset: tasks.map(({ task }) => ({ prompt: task })), tools: [memory], scoreGroup: judge });
 */
export async function generateTasks(
  params: GenerateTasksParams,
  options: GenerateTasksOptions = {},
): Promise<GeneratedTask[]> {
  const { tools, model, count, instructions, maxAttempts, requestParams } = parseOptions(
    GenerateTasksParamsSchema,
    params,
    { name: 'params' },
  );
  const { signal } = parseOptions(GenerateTasksOptionsSchema, options);
  const abortable = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await raceSignal(work, signal);
    } catch (error) {
      if (signal?.aborted) throw userAbortError(signal, 'generateTasks');
      throw error;
    }
  };
  const definitions = await abortable(toolDefinitions(tools, signal));
  const client = model.openai();
  const body = {
    ...requestParams,
    model: model.inferenceName(),
    messages: taskMessages(definitions, count, instructions),
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'tasks', strict: true, schema: TASKS_JSON_SCHEMA },
    },
  };
  let raw = '';
  let lastError: unknown;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const completion = await abortable(
      Promise.resolve(client.chat.completions.create(body, signal === undefined ? {} : { signal })),
    );
    raw = answerText(completion);
    try {
      return parseAnswer(raw, count);
    } catch (error) {
      lastError = error;
    }
  }
  throw new TaskGenerationError(
    `generateTasks: after ${maxAttempts} attempt${maxAttempts === 1 ? '' : 's'}, ${(lastError as Error).message}`,
    { attempts: maxAttempts, raw, cause: lastError },
  );
}
