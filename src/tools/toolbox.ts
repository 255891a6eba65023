/**
 * One rollout's tools from every source of its environment, as one {@link Toolbox}: the
 * definitions side by side, each call routed to the source that offers the tool, and every failure
 * that is not an abort answered as an error result the model reads.
 */
import { abortReason } from '../internal/delay.js';
import { toolError } from './function-tool.js';
import type {
  RolloutTools,
  StartedToolSource,
  Toolbox,
  ToolCallOptions,
  ToolDefinition,
  ToolResult,
} from './tool-types.js';

/** A started source with how messages name each of its tools (a function tool by its own name). */
export interface NamedSource {
  /** The started source. */
  readonly source: StartedToolSource;
  /** How messages name the tool `name` of this source. */
  readonly originOf: (name: string) => string;
}

/**
 * The error that refuses two sources offering one tool name, naming both, or undefined when every
 * name is offered once.
 */
export function toolNameCollision(sources: readonly NamedSource[]): string | undefined {
  const seen = new Map<string, string>();
  for (const { source, originOf } of sources) {
    for (const definition of source.definitions) {
      const name = definition.function.name;
      const origin = originOf(name);
      const first = seen.get(name);
      if (first !== undefined) {
        return `Tool \`${name}\` is offered by both ${first} and ${origin}; give one of them another name`;
      }
      seen.set(name, origin);
    }
  }
  return undefined;
}

/**
 * The arguments a model wrote, parsed: an object as it is; a JSON text parsed (an empty text is
 * no arguments, `{}`); `{ error }` when the text is not JSON.
 */
export function parseToolArguments(args: unknown): { args: unknown } | { error: string } {
  if (typeof args !== 'string') return { args: args ?? {} };
  if (args.trim() === '') return { args: {} };
  try {
    return { args: JSON.parse(args) as unknown };
  } catch (error) {
    return { error: `the arguments are not valid JSON (${error instanceof Error ? error.message : String(error)})` };
  }
}

/**
 * The toolbox of one rollout over the tools it opened from each source. A call of an unknown tool,
 * with arguments that are not JSON, or that fails in its source, is an error result; only an
 * abort of the call's signal rejects.
 */
export class RolloutToolbox implements Toolbox {
  /** Every tool, as OpenAI chat `tools` definitions. */
  readonly definitions: readonly ToolDefinition[];
  private readonly routes = new Map<string, RolloutTools>();

  /** A toolbox over `opened`, the tools of each source (in the environment's order). */
  constructor(opened: readonly RolloutTools[]) {
    const definitions: ToolDefinition[] = [];
    for (const tools of opened) {
      for (const definition of tools.definitions) {
        definitions.push(definition);
        if (!this.routes.has(definition.function.name)) this.routes.set(definition.function.name, tools);
      }
    }
    this.definitions = definitions;
  }

  /** Calls a tool by name (see {@link Toolbox.call}). */
  async call(name: string, args: unknown, options: ToolCallOptions = {}): Promise<ToolResult> {
    const { signal } = options;
    if (signal?.aborted) throw abortReason(signal);
    const tools = this.routes.get(name);
    if (tools === undefined) {
      const known = [...this.routes.keys()].map((known) => `\`${known}\``).join(', ');
      return toolError(`unknown tool \`${name}\`; the tools are: ${known === '' ? 'none' : known}`);
    }
    const parsed = parseToolArguments(args);
    if ('error' in parsed) return toolError(`tool \`${name}\`: ${parsed.error}`);
    try {
      return await tools.call(name, parsed.args, options);
    } catch (error) {
      if (signal?.aborted) throw abortReason(signal);
      return toolError(error instanceof Error ? error.message : String(error));
    }
  }
}
