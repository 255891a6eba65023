/**
 * A script interrupted in the middle of its rollouts, for the signal tests: it starts a
 * per-rollout `server-memory` source (its processes marked with POLICYLOOP_MCP_TEST_MARK) behind a
 * shell that also starts a helper (`sleep`), which, unlike the server, does not end when its
 * stdin closes: only killing the server's process group ends it. It opens
 * ROLLOUTS rollouts, prints `ready`, and waits. With HANDLE_SIGNAL set it has its own handler for
 * that signal (as the CLI has), which prints `handled` and exits 0 a little later.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { mcpServer } from 'policyloop';
import { MARK_VARIABLE, referenceServer } from './mcp-harness.js';

const mark = process.env[MARK_VARIABLE] ?? '';
const source = mcpServer(({ tempDir }) => ({
  command: 'sh',
  args: ['-c', `sleep 300 & exec "${process.execPath}" "${referenceServer('memory')}"`],
  env: { [MARK_VARIABLE]: mark, MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl') },
}));
const run = await source.start();
const rollouts = Number(process.env.ROLLOUTS ?? '2');
for (let index = 0; index < rollouts; index++) {
  const tempDir = await mkdtemp(path.join(tmpdir(), 'mcp-interrupted-'));
  const tools = await run.open({ task: index, tempDir, signal: new AbortController().signal });
  await tools.call('read_graph', {});
}
const handled = process.env.HANDLE_SIGNAL;
if (handled !== undefined) {
  process.on(handled, () => {
    console.log('handled');
    setTimeout(() => process.exit(0), 200);
  });
}
console.log('ready');
setInterval(() => {}, 1_000);
