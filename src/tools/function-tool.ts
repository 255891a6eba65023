/** Function tools: a name, a description, parameters (zod or JSON Schema) and `execute`. */
import { z } from 'zod';
import { describeValue } from '../internal/describe-value.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import type {
  RolloutTools,
  StartedToolSource,
  ToolCallOptions,
  ToolDefinition,
  ToolResult,
  ToolRolloutInfo,
} from './tool-types.js';

/** A JSON Schema object, as OpenAI's `parameters` takes it. */
export type JsonSchema = Readonly<Record<string, unknown>>;

/** What a function tool's `execute` gets besides its arguments. */
export interface FunctionToolContext extends ToolRolloutInfo {
  /** The tool call's id, as the model wrote it (empty when called by `context.tools.call`). */
  readonly toolCallId: string;
}

/**
 * A tool the agent calls, run in this process. `execute` gets the parsed (and, with a zod schema,
 * validated) arguments; what it returns becomes the tool message (a string as it is, anything
 * else as JSON); a throw becomes an error tool message and the rollout goes on.
 */
export interface FunctionTool<Args = unknown> {
  /** The name the model calls it by (`^[a-zA-Z0-9_-]{1,64}$`). */
  readonly name: string;
  /** What it does, for the model. */
  readonly description?: string | undefined;
  /** Its arguments: a zod object schema (checked before `execute`) or a JSON Schema. */
  readonly parameters: z.ZodType<Args> | JsonSchema;
  /** Runs the tool. */
  execute(args: Args, context: FunctionToolContext): unknown;
}

/** What {@link functionTool} takes: a tool whose arguments are those of its zod schema (or a JSON Schema). */
export interface FunctionToolOptions<Args> {
  /** The name the model calls it by (`^[a-zA-Z0-9_-]{1,64}$`). */
  name: string;
  /** What it does, for the model. */
  description?: string | undefined;
  /**
   * Its arguments: a zod object schema (the model sees it as JSON Schema, and `execute` gets the
   * arguments parsed by it), or a JSON Schema object (arguments checked against it when zod can
   * read it, else only checked to be an object).
   */
  parameters: z.ZodType<Args> | JsonSchema;
  /** Runs the tool with the checked arguments; sync or async. A throw is an error tool message. */
  execute(args: Args, context: FunctionToolContext): unknown;
}

/** Tool names OpenAI accepts. */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

const FunctionToolSchema = optionsSchema<FunctionToolOptions<unknown>>()({
  name: z
    .string({ error: 'a tool name (letters, digits, _ and -, 1 to 64 characters)' })
    .regex(TOOL_NAME, { error: 'a tool name (letters, digits, _ and -, 1 to 64 characters)' }),
  description: option.string().optional(),
  parameters: option.like<z.ZodType | JsonSchema>(
    (value) => value instanceof z.ZodType || (typeof value === 'object' && value !== null && !Array.isArray(value)),
    'a zod schema or a JSON Schema object',
  ),
  execute: option.function<FunctionToolOptions<unknown>['execute']>(),
});

/**
 * A function tool, checked now: its name, its parameters (a zod schema, whose type `execute`'s
 * arguments get, or a JSON Schema) and `execute`. Give it to an environment's `tools`.
 * @throws {InvalidArgumentError} for a bad name, parameters or execute.
 * @example
 * const add = functionTool({
 *   name: 'add',
 *   description: 'Adds two numbers',
 *   parameters: z.object({ a: z.number(), b: z.number() }),
 *   execute: ({ a, b }) => a + b, // a and b are numbers
 * });
 */
export function functionTool<Args>(options: FunctionToolOptions<Args>): FunctionTool<Args> {
  parseOptions(FunctionToolSchema, options, { name: 'functionTool' });
  return { ...options };
}

/** Whether `value` looks like a function tool (a name, parameters and `execute`). */
export function isFunctionTool(value: unknown): value is FunctionTool {
  if (typeof value !== 'object' || value === null) return false;
  const tool = value as Partial<FunctionTool>;
  return typeof tool.name === 'string' && typeof tool.execute === 'function' && 'parameters' in tool;
}

/** Checks a function tool given to an environment (the same checks as {@link functionTool}). */
export function checkFunctionTool(tool: FunctionTool, name: string): void {
  parseOptions(FunctionToolSchema, { ...tool }, { name, prefixed: true });
}

/** One function tool ready to call: its definition and how its arguments are checked. */
interface PreparedTool {
  readonly tool: FunctionTool;
  readonly definition: ToolDefinition;
  readonly check: z.ZodType | undefined;
}

/** The JSON Schema of `parameters` (a zod schema converted; `$schema` left out, it only costs tokens). */
function jsonSchemaOf(parameters: z.ZodType | JsonSchema): Record<string, unknown> {
  if (!(parameters instanceof z.ZodType)) return { ...parameters };
  const { $schema: _schema, ...schema } = z.toJSONSchema(parameters, { io: 'input', unrepresentable: 'any' });
  return schema;
}

/** The check of a tool's arguments: its zod schema, or its JSON Schema read by zod when it can be. */
function argumentCheck(parameters: z.ZodType | JsonSchema): z.ZodType | undefined {
  if (parameters instanceof z.ZodType) return parameters;
  try {
    return z.fromJSONSchema(parameters as Parameters<typeof z.fromJSONSchema>[0]);
  } catch {
    return undefined; // a schema zod cannot read: the arguments are only checked to be an object
  }
}

function prepare(tool: FunctionTool): PreparedTool {
  const fn: ToolDefinition['function'] = { name: tool.name, parameters: jsonSchemaOf(tool.parameters) };
  if (tool.description !== undefined) fn.description = tool.description;
  return { tool, definition: { type: 'function', function: fn }, check: argumentCheck(tool.parameters) };
}

/** What a tool's return value becomes: a string as it is, `undefined` as '', anything else as JSON. */
export function toolResultText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** An error result saying `message`. */
export function toolError(message: string): ToolResult {
  return { content: `Error: ${message}`, isError: true };
}

/** Runs one prepared tool: checks the arguments, runs `execute`, and makes the result. */
async function runTool(
  prepared: PreparedTool,
  args: unknown,
  info: ToolRolloutInfo,
  options: ToolCallOptions,
): Promise<ToolResult> {
  const { tool, check } = prepared;
  let checked = args;
  if (check === undefined) {
    if (typeof args !== 'object' || args === null || Array.isArray(args)) {
      return toolError(`tool \`${tool.name}\` expects an object of arguments, got ${describeValue(args)}`);
    }
  } else {
    const parsed = check.safeParse(args);
    if (!parsed.success) {
      const issues = parsed.error.issues
        .map((issue) => `${issue.path.length > 0 ? `${issue.path.join('.')}: ` : ''}${issue.message}`)
        .join('; ');
      return toolError(`invalid arguments for tool \`${tool.name}\`: ${issues}`);
    }
    checked = parsed.data;
  }
  const context: FunctionToolContext = {
    task: info.task,
    get tempDir() {
      return info.tempDir;
    },
    signal: options.signal ?? info.signal,
    toolCallId: options.toolCallId ?? '',
  };
  try {
    return { content: toolResultText(await tool.execute(checked, context)), isError: false };
  } catch (error) {
    return toolError(error instanceof Error ? error.message : String(error));
  }
}

/**
 * The function tools of an environment as one started source: they need no start, and each
 * rollout's calls run `execute` with that rollout's task, tempDir and signal. `name` names the
 * source in messages; `origin(tool)` names one of its tools (for the run's collision check).
 */
export function functionToolSource(tools: readonly FunctionTool[]): StartedToolSource & {
  /** How messages name the tool `name` of this source. */
  originOf(name: string): string;
} {
  const prepared = new Map(tools.map((tool) => [tool.name, prepare(tool)] as const));
  const definitions = [...prepared.values()].map((tool) => tool.definition);
  return {
    name: 'function tools',
    definitions,
    originOf: (name) => `function tool \`${name}\``,
    open(info: ToolRolloutInfo): Promise<RolloutTools> {
      return Promise.resolve({
        definitions,
        call(name: string, args: unknown, options: ToolCallOptions = {}): Promise<ToolResult> {
          const tool = prepared.get(name);
          if (tool === undefined) return Promise.resolve(toolError(`unknown tool \`${name}\``));
          return runTool(tool, args, info, options);
        },
        close: () => Promise.resolve(),
      });
    },
    close: () => Promise.resolve(),
  };
}
