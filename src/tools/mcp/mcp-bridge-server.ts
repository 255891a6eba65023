/**
 * The server side of {@link serveMcp}: a loopback streamable-HTTP MCP endpoint (stateless, JSON
 * answers) over a rollout's toolbox, on the SDK's `Server`. Loaded with `import()` by
 * serve-mcp.ts, so that the SDK stays out of `policyloop` until a rollout asks for it.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { Toolbox } from '../tool-types.js';

/** A listening endpoint. */
export interface ListeningBridge {
  readonly url: string;
  close(): Promise<void>;
}

/** One MCP server for one request (stateless: no session to keep between requests). */
function requestServer(tools: Toolbox, name: string): Server {
  const server = new Server({ name, version: '1' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: tools.definitions.map(({ function: fn }) => ({
      name: fn.name,
      ...(fn.description === undefined ? {} : { description: fn.description }),
      inputSchema: { type: 'object' as const, ...fn.parameters },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const result = await tools.call(request.params.name, request.params.arguments ?? {}, { signal: extra.signal });
    return { content: [{ type: 'text' as const, text: result.content }], isError: result.isError };
  });
  return server;
}

/** Listens on 127.0.0.1 (a free port) and serves `tools` at `/mcp`. */
export async function listenBridge(tools: Toolbox, name: string): Promise<ListeningBridge> {
  const http = createServer((request, response) => {
    if (new URL(request.url ?? '/', 'http://127.0.0.1').pathname !== '/mcp') {
      response.statusCode = 404;
      response.end();
      return;
    }
    const server = requestServer(tools, name);
    const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true }); // no sessionIdGenerator: stateless
    response.on('close', () => {
      void transport.close();
      void server.close();
    });
    server
      .connect(transport)
      .then(() => transport.handleRequest(request, response))
      .catch(() => {
        if (!response.headersSent) response.statusCode = 500;
        response.end();
      });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
