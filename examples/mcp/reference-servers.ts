/**
 * How the examples run the official MCP reference servers: from this project's `node_modules`
 * when installed (fast, offline: `npm i -D @modelcontextprotocol/server-memory ...`), else through
 * `npx -y`, which downloads them on first use.
 */
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

/** The command and arguments that run reference server `name` (`memory`, `filesystem`, `everything`). */
export function referenceServer(
  name: 'memory' | 'filesystem' | 'everything',
  args: readonly string[] = [],
): { command: string; args: string[] } {
  const packageName = `@modelcontextprotocol/server-${name}`;
  try {
    const root = path.dirname(require.resolve(`${packageName}/package.json`));
    return { command: process.execPath, args: [path.join(root, 'dist', 'index.js'), ...args] };
  } catch {
    return { command: 'npx', args: ['-y', packageName, ...args] };
  }
}
