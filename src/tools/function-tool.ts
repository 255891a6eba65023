/** Function tools: a name, a description, parameters (zod or JSON Schema) and `execute`. */
import type { z } from 'zod';
import type { ToolRolloutInfo } from './tool-types.js';

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
