/**
 * `serveMcp`: a rollout's tools as an MCP server at a loopback URL, for agents written with a
 * framework that has its own MCP client (the AI SDK's, the Agents SDK's).
 */
import { abortReason } from '../../internal/delay.js';
import { option, optionsSchema, parseOptions } from '../../internal/option-schema.js';
import type { Toolbox } from '../tool-types.js';
import { McpServerError } from './mcp-errors.js';

/** Options of {@link serveMcp}. */
export interface ServeMcpOptions {
  /**
   * The server's name, as its `initialize` answer gives it.
   * @default 'policyloop-tools'
   */
  name?: string | undefined;
  /** Stops the server when it aborts (pass the rollout's `context.signal`). */
  signal?: AbortSignal | undefined;
}

/** A running {@link serveMcp} endpoint. */
export interface McpEndpoint {
  /** The streamable-HTTP MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** Stops it. Idempotent. */
  close(): Promise<void>;
}

const ServeMcpOptionsSchema = optionsSchema<ServeMcpOptions>()({
  name: option.nonEmptyString().default('policyloop-tools'),
  signal: option.signal().optional(),
});

/**
 * Serves `tools` (a rollout's `context.tools`: its function tools and MCP servers, the same
 * per-rollout servers the default loop would call) as a streamable-HTTP MCP server on a free
 * loopback port, until `close()` (or `signal` aborts). A framework's MCP client connects to `url`
 * and lists and calls the tools; each call goes through the toolbox, with its timeouts, result
 * limits and error messages. The model's calls are recorded as usual: the framework sends the
 * tool results back to the model, through `model.fetch()`.
 * @example
 * const endpoint = await serveMcp(context.tools, { signal: context.signal });
 * try {
 *   const server = new MCPServerStreamableHttp({ url: endpoint.url, name: 'tools' });
 *   await server.connect();
 *   const agent = new Agent({ name: 'notes', model, mcpServers: [server] });
 *   await run(agent, task.prompt);
 *   await server.close();
 * } finally {
 *   await endpoint.close();
 * }
 */
export async function serveMcp(tools: Toolbox, options: ServeMcpOptions = {}): Promise<McpEndpoint> {
  const { name, signal } = parseOptions(ServeMcpOptionsSchema, options);
  if (signal?.aborted) throw abortReason(signal);
  let bridge: typeof import('./mcp-bridge-server.js');
  try {
    bridge = await import('./mcp-bridge-server.js');
  } catch (error) {
    throw new McpServerError(
      name,
      'config',
      'needs the package `@modelcontextprotocol/sdk` (an optional dependency of policyloop): npm install @modelcontextprotocol/sdk',
      { cause: error },
    );
  }
  const listening = await bridge.listenBridge(tools, name);
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    signal?.removeEventListener('abort', onAbort);
    closing ??= listening.close();
    return closing;
  };
  const onAbort = (): void => void close();
  signal?.addEventListener('abort', onAbort, { once: true });
  return { url: listening.url, close };
}
