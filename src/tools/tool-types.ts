/**
 * The tools an agent calls inside an environment's rollouts, as one contract: function tools
 * (`functionTool`) and MCP servers (`mcpServer`) are both a {@link ToolSource}. An environment
 * lists its sources; a run starts each once (failing fast, naming the source), and each rollout
 * opens the tools it gets from every started source and closes them when it ends.
 */
import type { ChatCompletionFunctionToolParam } from '../schema/index.js';

/** One tool as the model sees it: an OpenAI chat `tools` entry (`{ type: 'function', function }`). */
export type ToolDefinition = ChatCompletionFunctionToolParam;

/**
 * What a tool call answers: the text the model reads as the tool message, and whether it is an
 * error (a thrown `execute`, an MCP `isError` result or protocol error, a timeout, a result over
 * the size cap, an unknown tool or arguments that do not parse).
 */
export interface ToolResult {
  /** The tool message's content. */
  readonly content: string;
  /** True when the call failed; the content then says why. */
  readonly isError: boolean;
}

/** What a rollout tells its tool sources when it opens them. */
export interface ToolRolloutInfo {
  /** The rollout's task. */
  readonly task: unknown;
  /**
   * A fresh temporary folder of this rollout, made on first read and removed when the rollout
   * ends (after `cleanup`), whatever the outcome: per-rollout state a server keeps on disk.
   */
  readonly tempDir: string;
  /** Aborts when the rollout is aborted or times out. */
  readonly signal: AbortSignal;
}

/** Options of one tool call. */
export interface ToolCallOptions {
  /** Aborts the call (the rollout's signal). */
  readonly signal?: AbortSignal | undefined;
  /** The id of the model's tool call this answers (a function tool's `context.toolCallId`). */
  readonly toolCallId?: string | undefined;
}

/** The tools one rollout got from one source; closed when the rollout ends. */
export interface RolloutTools {
  /** The tools, as the model sees them. */
  readonly definitions: readonly ToolDefinition[];
  /** Calls one of them. Never rejects for a tool's own failure: that is an error result. */
  call(name: string, args: unknown, options?: ToolCallOptions): Promise<ToolResult>;
  /** Releases what the rollout held (a per-rollout server stops, its processes gone). */
  close(): Promise<void>;
}

/** A tool source once a run started it: lists its tools and opens them for each rollout. */
export interface StartedToolSource {
  /** How messages name the source (a function tool's name, an MCP server's command or URL). */
  readonly name: string;
  /** The tools it offers, known at start: the run refuses two sources offering one name. */
  readonly definitions: readonly ToolDefinition[];
  /** The tools of one rollout (a fresh server per rollout, or the shared one). */
  open(rollout: ToolRolloutInfo): Promise<RolloutTools>;
  /** Ends the run's use of the source (a shared server stops). */
  close(): Promise<void>;
}

/** Options of {@link ToolSource.start}. */
export interface ToolSourceStartOptions {
  /** Aborts the start. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Where an environment's tools come from: started once per run (training run or evaluation)
 * before any rollout, so that a source that cannot work fails then, naming itself.
 */
export interface ToolSource {
  /** Marks the object as a tool source (so that an environment can tell one from a function tool). */
  readonly kind: 'tool-source';
  /** How messages name the source before it starts. */
  readonly name: string;
  /** Starts the source for a run: checks it, lists its tools. Rejects with an error naming the source. */
  start(options?: ToolSourceStartOptions): Promise<StartedToolSource>;
}

/**
 * Every tool of a rollout, from every source of its environment: what `context.tools` is, and
 * what the environment's default agent loop uses.
 * @example
 * const reply = await client.chat.completions.create({ model, messages, tools: [...context.tools.definitions] });
 * const result = await context.tools.call('add', { a: 1, b: 2 }); // { content: '3', isError: false }
 */
export interface Toolbox {
  /** Every tool, as OpenAI chat `tools` definitions (the sources' own names, no prefix). */
  readonly definitions: readonly ToolDefinition[];
  /**
   * Calls a tool by name with its arguments (an object, or the JSON text a model wrote). Answers
   * an error result, never a rejection, for an unknown tool, bad arguments or a failing tool; it
   * rejects only when the rollout is aborted.
   */
  call(name: string, args: unknown, options?: ToolCallOptions): Promise<ToolResult>;
}
