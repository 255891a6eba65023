/**
 * The narrow adapter over the official MCP SDK (`@modelcontextprotocol/sdk` v1): the only module
 * that imports it, loaded with `import()` when an `mcpServer` starts, so that `policyloop` stays
 * light for scripts without one. It does four things: connect (a command over its stdio, or a URL
 * over streamable HTTP, `initialize` included), list the tools, call one, close. Failures to
 * connect become `McpServerError`s naming the server; a call's failure is an answer, not a throw.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, JSONRPCMessageSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { abortReason } from '../../internal/delay.js';
import { McpServerError } from './mcp-errors.js';
import { ProcessTransport } from './process-transport.js';
import type { McpCallResult } from './tool-result.js';

/** A server to connect to, its config resolved. */
export type ResolvedMcpConfig =
  | {
      readonly command: string;
      readonly args?: readonly string[] | undefined;
      readonly env?: Readonly<Record<string, string>> | undefined;
      readonly cwd?: string | undefined;
    }
  | { readonly url: string | URL; readonly headers?: Readonly<Record<string, string>> | undefined };

/** A tool as the server lists it. */
export interface McpListedTool {
  readonly name: string;
  readonly description?: string | undefined;
  readonly inputSchema: Readonly<Record<string, unknown>>;
}

/** What a call answered: the server's result, or why there is none. */
export type McpCallOutcome =
  | { readonly ok: true; readonly result: McpCallResult }
  | { readonly ok: false; readonly message: string; readonly timedOut: boolean };

/** One connection to one server (one MCP session). */
export interface McpConnection {
  /** The pid of the server process, for a command. */
  readonly pid: number | undefined;
  /** The session id, for a URL. */
  readonly sessionId: string | undefined;
  /** Every tool the server lists (all pages). */
  listTools(options: { timeout: number; signal?: AbortSignal | undefined }): Promise<McpListedTool[]>;
  /** Calls a tool; rejects only when `signal` aborted (with its reason). */
  callTool(
    name: string,
    args: Record<string, unknown>,
    options: { timeout: number; signal?: AbortSignal | undefined },
  ): Promise<McpCallOutcome>;
  /** Ends the session (a URL's is terminated) and stops the server process (its whole group). */
  close(): Promise<void>;
}

/** Options of {@link connectMcp}. */
export interface ConnectOptions {
  /** The server's name, for errors. */
  readonly name: string;
  /** Limit of the start (spawn and `initialize`), in milliseconds. */
  readonly timeout: number;
  /** Aborts the start. */
  readonly signal?: AbortSignal | undefined;
}

/** The most pages of `tools/list` read (as the v2 SDK's `listMaxPages`). */
const MAX_TOOL_PAGES = 64;

const CLIENT_INFO = { name: 'policyloop', version: '1' };

/** The SDK's request options: its types take no `signal: undefined` (someone else's API keeps its shape). */
function requestOptions(timeout: number, signal: AbortSignal | undefined): { timeout: number; signal?: AbortSignal } {
  return signal === undefined ? { timeout } : { timeout, signal };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The text of a fetch failure: `fetch failed` says nothing, its cause (ECONNREFUSED ...) does. */
function describeFetchError(error: unknown): string {
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  const detail = cause instanceof Error ? ((cause as { code?: string }).code ?? cause.message) : undefined;
  return detail === undefined ? messageOf(error) : `${messageOf(error)} (${detail})`;
}

/**
 * Connects to a server: spawns the command (in a process group of its own) or opens a session at
 * the URL, and runs `initialize`. Rejects with an {@link McpServerError} naming it.
 */
export async function connectMcp(config: ResolvedMcpConfig, options: ConnectOptions): Promise<McpConnection> {
  const { name, timeout, signal } = options;
  if (signal?.aborted) throw abortReason(signal);
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  let lastError: unknown;
  client.onerror = (error) => {
    lastError = error;
  };

  if ('command' in config) {
    const transport = new ProcessTransport(
      {
        command: config.command,
        args: config.args ?? [],
        // As the SDK's stdio transport: a safe default set of variables (PATH, HOME...), then the config's.
        env: { ...getDefaultEnvironment(), ...config.env },
        cwd: config.cwd,
      },
      (line) => JSONRPCMessageSchema.parse(JSON.parse(line)),
    );
    const closeTransport = (): Promise<void> => transport.close();
    try {
      await client.connect(transport as Transport, requestOptions(timeout, signal));
    } catch (error) {
      await closeTransport();
      if (signal?.aborted) throw abortReason(signal);
      throw commandError(name, config.command, error, transport, timeout);
    }
    return connection(client, { pid: transport.pid, sessionId: undefined, close: closeTransport });
  }

  const url = new URL(config.url);
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { ...config.headers } },
  });
  try {
    await client.connect(transport, requestOptions(timeout, signal));
  } catch (error) {
    await transport.close().catch(() => {});
    if (signal?.aborted) throw abortReason(signal);
    throw urlError(name, url, error, lastError, timeout);
  }
  return connection(client, {
    pid: undefined,
    sessionId: transport.sessionId,
    async close() {
      // A fresh session per rollout: end it on the server too (a 405 is fine, as the spec allows).
      await transport.terminateSession().catch(() => {});
      await transport.close().catch(() => {});
    },
  });
}

function commandError(
  name: string,
  command: string,
  error: unknown,
  transport: ProcessTransport,
  timeout: number,
): McpServerError {
  const stderr = transport.stderr;
  const code = (error as { code?: unknown } | undefined)?.code;
  if (transport.pid === undefined) {
    const why = code === 'ENOENT' ? 'was not found' : code === 'EACCES' ? 'is not executable' : 'could not be run';
    return new McpServerError(
      name,
      'spawn',
      `could not start: the command \`${command}\` ${why} (${messageOf(error)})`,
      {
        cause: error,
      },
    );
  }
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
    return new McpServerError(name, 'timeout', `did not answer \`initialize\` within ${timeout} ms`, {
      cause: error,
      stderr,
    });
  }
  const exit = transport.exit;
  if (exit !== undefined) {
    const how = exit.signal === null ? `with code ${exit.code}` : `on ${exit.signal}`;
    return new McpServerError(name, 'exited', `exited ${how} during \`initialize\``, { cause: error, stderr });
  }
  return new McpServerError(name, 'protocol', `failed during \`initialize\`: ${messageOf(error)}`, {
    cause: error,
    stderr,
  });
}

function urlError(name: string, url: URL, error: unknown, lastError: unknown, timeout: number): McpServerError {
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
    return new McpServerError(name, 'timeout', `did not answer \`initialize\` within ${timeout} ms at ${url.href}`, {
      cause: error,
    });
  }
  if (error instanceof StreamableHTTPError) {
    return new McpServerError(name, 'unreachable', `answered \`initialize\` at ${url.href} with ${error.message}`, {
      cause: error,
    });
  }
  const why = error instanceof McpError ? describeFetchError(lastError ?? error) : describeFetchError(error);
  return new McpServerError(name, 'unreachable', `could not be reached at ${url.href}: ${why}`, { cause: error });
}

function connection(
  client: Client,
  handle: { pid: number | undefined; sessionId: string | undefined; close(): Promise<void> },
): McpConnection {
  let closing: Promise<void> | undefined;
  return {
    pid: handle.pid,
    sessionId: handle.sessionId,
    async listTools({ timeout, signal }) {
      const tools: McpListedTool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_TOOL_PAGES; page++) {
        const result = await client.listTools(cursor === undefined ? {} : { cursor }, requestOptions(timeout, signal));
        for (const tool of result.tools) {
          tools.push({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema });
        }
        cursor = result.nextCursor;
        if (cursor === undefined) break;
      }
      return tools;
    },
    async callTool(name, args, { timeout, signal }) {
      try {
        const result = await client.callTool({ name, arguments: args }, undefined, requestOptions(timeout, signal));
        return { ok: true, result: result as McpCallResult };
      } catch (error) {
        if (signal?.aborted) throw abortReason(signal);
        const timedOut = error instanceof McpError && error.code === ErrorCode.RequestTimeout;
        return { ok: false, message: messageOf(error), timedOut };
      }
    },
    close() {
      closing ??= (async () => {
        await handle.close();
        await client.close().catch(() => {});
      })();
      return closing;
    },
  };
}
