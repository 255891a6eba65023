/**
 * `mcpServer`: an MCP server (a command over stdio, or a URL over streamable HTTP) as a
 * {@link ToolSource} an environment lists in its `tools`. The SDK is loaded only when the source
 * starts (mcp-client.ts is the one module that imports it).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { abortReason } from '../../internal/delay.js';
import { option, optionsSchema, parseOptions, parseValue } from '../../internal/option-schema.js';
import type {
  RolloutTools,
  StartedToolSource,
  ToolCallOptions,
  ToolDefinition,
  ToolResult,
  ToolRolloutInfo,
  ToolSource,
  ToolSourceStartOptions,
} from '../tool-types.js';
import type { McpConnection, ResolvedMcpConfig } from './mcp-client.js';
import { McpServerError } from './mcp-errors.js';
import { toToolResult } from './tool-result.js';

/** A server run as a command, spoken to over its stdin and stdout. */
export interface McpCommandConfig {
  /** The command: a path, or a name looked up on `PATH` (`npx`, `node`, `uvx`...). */
  command: string;
  /** Its arguments. */
  args?: readonly string[] | undefined;
  /**
   * Environment variables, over a safe default set (`HOME`, `PATH`, `SHELL`, `TERM`, `USER`,
   * `LOGNAME`), as the SDK's stdio transport does. Pass `{ ...process.env, ... }` for all of ours.
   */
  env?: Readonly<Record<string, string>> | undefined;
  /** Its working directory. @default the script's */
  cwd?: string | undefined;
}

/** A server at a URL, spoken to over streamable HTTP. */
export interface McpUrlConfig {
  /** The MCP endpoint, e.g. `http://127.0.0.1:3001/mcp`. */
  url: string | URL;
  /** Headers sent with every request (e.g. `Authorization`). */
  headers?: Readonly<Record<string, string>> | undefined;
}

/** Where a server is: a command or a URL. */
export type McpServerConfig = McpCommandConfig | McpUrlConfig;

/** What a config function is called with. */
export interface McpConfigContext {
  /**
   * The rollout's task; `undefined` when the source starts (the probe that lists the tools) and,
   * with `scope: 'shared'`, for the one server of the run.
   */
  readonly task: unknown;
  /**
   * A fresh temporary folder, removed when the rollout ends (with `scope: 'shared'`, the run's,
   * removed when the run ends): where a server keeps per-rollout state on disk.
   */
  readonly tempDir: string;
}

/** A config, or a function making one for each rollout (from its task and its temporary folder). */
export type McpServerConfigSource =
  | McpServerConfig
  | ((rollout: McpConfigContext) => McpServerConfig | Promise<McpServerConfig>);

/** Options of {@link mcpServer}. */
export interface McpServerOptions {
  /**
   * How messages name the server.
   * @default the command with its arguments, or the URL
   */
  name?: string | undefined;
  /**
   * `'rollout'`: a fresh server for each rollout (for a URL, a fresh MCP session), closed when the
   * rollout ends, so that no state leaks between rollouts. `'shared'`: one server (one session)
   * for the whole run, its tools called by every rollout at once.
   * @default 'rollout'
   */
  scope?: 'rollout' | 'shared' | undefined;
  /**
   * Limit of one tool call, in milliseconds: past it the call is cancelled (the server is told)
   * and answered with an error tool message; the rollout goes on.
   * @default 60000
   */
  timeout?: number | undefined;
  /**
   * Limit of a server's start (spawn and `initialize`; at the run's start, also the tool listing),
   * in milliseconds.
   * @default 30000
   */
  startTimeout?: number | undefined;
  /**
   * The longest result text given to the model; a longer one is answered with an error tool
   * message instead (as OpenPipe ART does).
   * @default 20000
   */
  maxResultChars?: number | undefined;
  /**
   * The tools offered, when not all: a list of the server's tool names, or an object from the
   * server's name to the name the model sees (`true` keeps it). A name the server does not list
   * fails the start.
   * @default every tool the server lists
   */
  tools?: readonly string[] | Readonly<Record<string, string | true>> | undefined;
}

/** An MCP server as a tool source: what {@link mcpServer} returns. */
export interface McpToolSource extends ToolSource {
  /** Whether each rollout gets its own server, or the run shares one. */
  readonly scope: 'rollout' | 'shared';
  /** The config (or config function) it was made with. */
  readonly config: McpServerConfigSource;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

const McpServerOptionsSchema = optionsSchema<McpServerOptions>()({
  name: option.nonEmptyString().optional(),
  scope: option.oneOf(['rollout', 'shared']).default('rollout'),
  timeout: option.timeout().default(60_000),
  startTimeout: option.timeout().default(30_000),
  maxResultChars: option.integer({ min: 1 }).default(20_000),
  tools: z
    .union(
      [
        z.array(option.nonEmptyString()).readonly(),
        z.record(z.string(), z.union([z.literal(true), z.string().regex(TOOL_NAME)])).readonly(),
      ],
      { error: 'a list of tool names, or an object from tool names to new names (or true)' },
    )
    .optional(),
});

const stringRecord = z.record(z.string(), z.string({ error: 'a string' }), {
  error: 'an object of strings',
});

const CommandConfigSchema = z.strictObject(
  {
    command: option.nonEmptyString(),
    args: z.array(option.string(), { error: 'an array of strings' }).readonly().optional(),
    env: stringRecord.optional(),
    cwd: option.nonEmptyString().optional(),
  },
  { error: 'a config `{ command, args?, env?, cwd? }` or `{ url, headers? }`' },
);

const UrlConfigSchema = z.strictObject(
  {
    url: z.union([z.instanceof(URL), z.url({ protocol: /^https?$/, error: 'an http(s) URL' })], {
      error: 'an http(s) URL',
    }),
    headers: stringRecord.optional(),
  },
  { error: 'a config `{ command, args?, env?, cwd? }` or `{ url, headers? }`' },
);

/** Checks a config: a command's or a URL's, not both. */
function checkConfig(name: string, config: unknown): ResolvedMcpConfig {
  const isUrl = typeof config === 'object' && config !== null && 'url' in config;
  return isUrl ? parseValue(name, UrlConfigSchema, config) : parseValue(name, CommandConfigSchema, config);
}

/** The default name: the command with its arguments, or the URL. */
function defaultName(config: McpServerConfigSource): string {
  if (typeof config === 'function') return config.name === '' ? 'mcp-server' : `${config.name}()`;
  if ('url' in config) return String(config.url);
  return [config.command, ...(config.args ?? [])].join(' ');
}

/** The adapter over the SDK, loaded on first use. */
let adapter: Promise<typeof import('./mcp-client.js')> | undefined;
function loadAdapter(name: string): Promise<typeof import('./mcp-client.js')> {
  adapter ??= import('./mcp-client.js').catch((error: unknown) => {
    adapter = undefined;
    throw new McpServerError(
      name,
      'config',
      'needs the package `@modelcontextprotocol/sdk` (an optional dependency of policyloop): npm install @modelcontextprotocol/sdk',
      { cause: error },
    );
  });
  return adapter;
}

/** A temporary folder, made now (the run's, or a probe's). */
function makeTempDir(): Promise<string> {
  return mkdtemp(path.join(tmpdir(), 'policyloop-mcp-'));
}

/**
 * An MCP server as a tool source for an environment's `tools`, beside function tools: its tools
 * are offered to the model under the server's own names (no prefix), and the environment's
 * default agent loop calls them. `config` is a command (`{ command, args?, env?, cwd? }`, spoken
 * to over stdio) or a URL (`{ url, headers? }`, over streamable HTTP), or a function of the
 * rollout's `{ task, tempDir }` returning one, called for each rollout: a server that keeps state
 * on disk gets the rollout's own temporary folder, removed when the rollout ends.
 *
 * By default (`scope: 'rollout'`) each rollout gets a fresh server (a fresh session at a URL),
 * stopped when the rollout ends, ends with a throw, or is aborted: every process it started is
 * killed (its whole process group), also when the script is interrupted (SIGINT, SIGTERM).
 * `scope: 'shared'` starts one server for the run.
 *
 * Starting the source (when a run starts the environment) fails fast with an
 * {@link McpServerError} naming the server: a command that does not exist, a server that exits
 * during `initialize`, an unreachable URL. To list the tools before any rollout, the start runs the
 * server once: a config function is then called with `task: undefined` and a temporary folder of
 * its own (removed after).
 *
 * A tool's answer is its text content joined by newlines; an `isError` result, a protocol error,
 * a call past `timeout` and a result over `maxResultChars` are error tool messages, and the
 * rollout goes on.
 * @example
 * const memory = mcpServer(({ tempDir }) => ({
 *   command: 'npx',
 *   args: ['-y', '@modelcontextprotocol/server-memory'],
 *   env: { MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl') },
 * }), { name: 'memory' });
 * const everything = mcpServer({ url: 'http://127.0.0.1:3001/mcp' }, { timeout: 10_000 });
 * const environment = defineEnvironment({ name: 'notes', dataset, tools: [memory, everything], reward });
 */
export function mcpServer(config: McpServerConfigSource, options?: McpServerOptions): McpToolSource {
  const parsed = parseOptions(McpServerOptionsSchema, options);
  if (typeof config !== 'function') checkConfig('config', config);
  const name = parsed.name ?? defaultName(config);
  const settings: Settings = { ...parsed, name, config };
  return {
    kind: 'tool-source',
    name,
    scope: parsed.scope,
    config,
    start: (startOptions) => startSource(settings, startOptions),
  };
}

/** Everything a started source needs. */
interface Settings {
  readonly name: string;
  readonly config: McpServerConfigSource;
  readonly scope: 'rollout' | 'shared';
  readonly timeout: number;
  readonly startTimeout: number;
  readonly maxResultChars: number;
  readonly tools?: readonly string[] | Readonly<Record<string, string | true>> | undefined;
}

/** Calls the config (function) and checks what it gave. */
async function resolveConfig(settings: Settings, context: McpConfigContext): Promise<ResolvedMcpConfig> {
  const { config, name } = settings;
  if (typeof config !== 'function') return config as ResolvedMcpConfig;
  let made: unknown;
  try {
    made = await config(context);
  } catch (error) {
    throw new McpServerError(
      name,
      'config',
      `config function threw: ${error instanceof Error ? error.message : String(error)}`,
      {
        cause: error,
      },
    );
  }
  try {
    return checkConfig('config()', made);
  } catch (error) {
    throw new McpServerError(name, 'config', `config function returned a bad config: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** Opens a connection (the adapter loaded first). */
async function connect(
  settings: Settings,
  config: ResolvedMcpConfig,
  signal: AbortSignal | undefined,
): Promise<McpConnection> {
  const { connectMcp } = await loadAdapter(settings.name);
  return connectMcp(config, { name: settings.name, timeout: settings.startTimeout, signal });
}

/** The model's name of each offered tool, from the server's listing and `options.tools`. */
function offeredTools(
  settings: Settings,
  listed: readonly { name: string; description?: string | undefined; inputSchema: Readonly<Record<string, unknown>> }[],
): { definitions: ToolDefinition[]; serverNames: Map<string, string> } {
  const { tools, name } = settings;
  const renames = new Map<string, string>();
  if (tools === undefined) for (const tool of listed) renames.set(tool.name, tool.name);
  else if (Array.isArray(tools)) for (const tool of tools as readonly string[]) renames.set(tool, tool);
  else for (const [tool, to] of Object.entries(tools)) renames.set(tool, to === true ? tool : to);
  const byName = new Map(listed.map((tool) => [tool.name, tool]));
  const missing = [...renames.keys()].filter((tool) => !byName.has(tool));
  if (missing.length > 0) {
    throw new McpServerError(
      name,
      'tools',
      `does not offer ${missing.map((tool) => `\`${tool}\``).join(', ')} (named in \`options.tools\`); it offers ${
        listed.map((tool) => `\`${tool.name}\``).join(', ') || 'no tools'
      }`,
    );
  }
  const definitions: ToolDefinition[] = [];
  const serverNames = new Map<string, string>();
  for (const [tool, exposed] of renames) {
    const listing = byName.get(tool);
    if (listing === undefined) continue; // refused above
    serverNames.set(exposed, tool);
    definitions.push({
      type: 'function',
      function: {
        name: exposed,
        ...(listing.description === undefined ? {} : { description: listing.description }),
        parameters: { ...listing.inputSchema },
      },
    });
  }
  return { definitions, serverNames };
}

async function startSource(settings: Settings, options: ToolSourceStartOptions = {}): Promise<StartedToolSource> {
  const { signal } = options;
  const { name, scope, startTimeout } = settings;
  // The probe (and, shared, the run's server) gets a folder of its own when the config is a function.
  const tempDir = typeof settings.config === 'function' ? await makeTempDir() : undefined;
  const removeTempDir = async (): Promise<void> => {
    if (tempDir !== undefined) await rm(tempDir, { recursive: true, force: true });
  };
  let probe: McpConnection | undefined;
  let listing: ReturnType<typeof offeredTools>;
  try {
    const config = await resolveConfig(settings, { task: undefined, tempDir: tempDir ?? tmpdir() });
    probe = await connect(settings, config, signal);
    let listed: Awaited<ReturnType<McpConnection['listTools']>>;
    try {
      listed = await probe.listTools({ timeout: startTimeout, signal });
    } catch (error) {
      if (signal?.aborted) throw abortReason(signal);
      throw new McpServerError(name, 'protocol', `could not list its tools: ${(error as Error).message}`, {
        cause: error,
      });
    }
    listing = offeredTools(settings, listed);
  } catch (error) {
    await probe?.close();
    await removeTempDir();
    throw error;
  }
  if (scope === 'rollout') {
    await probe.close();
    await removeTempDir();
    return rolloutScoped(settings, listing);
  }
  return shared(settings, listing, probe, removeTempDir);
}

type Listing = ReturnType<typeof offeredTools>;

/** The tools of one connection, as a rollout gets them. */
function toolsOf(
  settings: Settings,
  listing: Listing,
  connection: () => McpConnection | undefined,
  close: () => Promise<void>,
): RolloutTools {
  return {
    definitions: listing.definitions,
    async call(tool: string, args: unknown, callOptions: ToolCallOptions = {}): Promise<ToolResult> {
      const { signal } = callOptions;
      if (signal?.aborted) throw abortReason(signal);
      const serverName = listing.serverNames.get(tool);
      if (serverName === undefined) {
        return { content: `Error: MCP server \`${settings.name}\` offers no tool \`${tool}\``, isError: true };
      }
      const argumentsObject = args ?? {};
      if (typeof argumentsObject !== 'object' || Array.isArray(argumentsObject)) {
        return { content: `Error: tool \`${tool}\` expects an object of arguments`, isError: true };
      }
      const open = connection();
      if (open === undefined) {
        return { content: `Error: MCP server \`${settings.name}\` is closed`, isError: true };
      }
      const outcome = await open.callTool(serverName, argumentsObject as Record<string, unknown>, {
        timeout: settings.timeout,
        signal,
      });
      if (!outcome.ok) {
        const why = outcome.timedOut
          ? `timed out after ${settings.timeout} ms and was cancelled`
          : `failed: ${outcome.message}`;
        return { content: `Error: tool \`${tool}\` of MCP server \`${settings.name}\` ${why}`, isError: true };
      }
      return toToolResult(tool, outcome.result, settings.maxResultChars);
    },
    close,
  };
}

/** A fresh server (or session) for each rollout. */
function rolloutScoped(settings: Settings, listing: Listing): StartedToolSource {
  const open = new Set<McpConnection>();
  // Starts under way: a runner that stopped waiting for one (an aborted rollout) may close the run first.
  const starting = new Set<Promise<unknown>>();
  return {
    name: settings.name,
    definitions: listing.definitions,
    async open(rollout: ToolRolloutInfo): Promise<RolloutTools> {
      const { signal } = rollout;
      if (signal.aborted) throw abortReason(signal);
      const config = await resolveConfig(settings, {
        task: rollout.task,
        // Read only when the function asks: the rollout's folder is made on first read.
        get tempDir() {
          return rollout.tempDir;
        },
      });
      const connecting = connect(settings, config, signal);
      const settled = connecting.then(
        (connection) => {
          open.add(connection);
        },
        () => {},
      );
      starting.add(settled);
      void settled.finally(() => starting.delete(settled));
      const connection = await connecting;
      let closed = false;
      const close = async (): Promise<void> => {
        closed = true;
        signal.removeEventListener('abort', onAbort);
        open.delete(connection);
        await connection.close();
      };
      // An aborted rollout's server stops at once, whether or not its tools are closed soon.
      const onAbort = (): void => void close();
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) onAbort();
      return toolsOf(settings, listing, () => (closed ? undefined : connection), close);
    },
    async close() {
      // Servers of rollouts not closed (a runner that did not close them, or stopped waiting for
      // their start) stop with the run.
      while (starting.size > 0) await Promise.all([...starting]);
      await Promise.all([...open].map((connection) => connection.close()));
      open.clear();
    },
  };
}

/** One server (one session) for the run. */
function shared(
  settings: Settings,
  listing: Listing,
  connection: McpConnection,
  removeTempDir: () => Promise<void>,
): StartedToolSource {
  let closing: Promise<void> | undefined;
  return {
    name: settings.name,
    definitions: listing.definitions,
    async open(rollout: ToolRolloutInfo): Promise<RolloutTools> {
      if (rollout.signal.aborted) throw abortReason(rollout.signal);
      return toolsOf(
        settings,
        listing,
        () => (closing === undefined ? connection : undefined),
        async () => {},
      );
    },
    close() {
      closing ??= (async () => {
        await connection.close();
        await removeTempDir();
      })();
      return closing;
    },
  };
}
