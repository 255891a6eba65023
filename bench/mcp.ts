/**
 * What `mcpServer` adds to a tool call over the SDK's own `client.callTool`, and what a
 * per-rollout server costs to start. Against the official `server-everything` (its `echo` tool):
 *
 * - `stdio`: the SDK's `Client` over its `StdioClientTransport` (baseline) against an
 *   `mcpServer({ command })` opened for one rollout (our process-group transport, the name
 *   mapping, the result made into a tool message), each making CALLS sequential calls;
 * - `http`: the same over streamable HTTP to one `server-everything streamableHttp` on loopback
 *   (the SDK's `StreamableHTTPClientTransport` against `mcpServer({ url })`);
 * - `start`: a per-rollout `server-memory` opened and closed (spawn, `initialize`, one call, the
 *   process group stopped) against the SDK's connect, one call and close of the same command.
 *
 * Per side: wall time per call (or per start), and the script's CPU per call (`process.cpuUsage`),
 * each the median over rounds, in a rotating order within each round; the ratios are ours over the
 * SDK's. Run: `npx tsx bench/mcp.ts` (`--rounds N`, default 5; `--calls N`, default 300).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { mcpServer } from 'policyloop';

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}
const ROUNDS = Number(flag('--rounds') ?? 5);
const CALLS = Number(flag('--calls') ?? 300);
const STARTS = 8;
const ROOT = path.resolve(import.meta.dirname, '..');
const server = (name: string) =>
  path.join(ROOT, 'node_modules/@modelcontextprotocol', `server-${name}`, 'dist/index.js');

interface Measure {
  wallMs: number;
  cpuMs: number;
}

async function measure(count: number, work: () => Promise<void>): Promise<Measure> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  await work();
  const wall = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallMs: wall / count, cpuMs: (used.user + used.system) / 1000 / count };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
    probe.once('error', reject);
  });
}

async function startHttpEverything(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, [server('everything'), 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes('listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited with ${code}: ${stderr}`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, child };
}

const rollout = async () => ({
  task: undefined,
  tempDir: await mkdtemp(path.join(os.tmpdir(), 'bench-mcp-')),
  signal: new AbortController().signal,
});

/** `calls` echo calls through the SDK's own client. */
async function sdkCalls(client: Client): Promise<Measure> {
  return measure(CALLS, async () => {
    for (let index = 0; index < CALLS; index++) {
      await client.callTool({ name: 'echo', arguments: { message: `hi ${index}` } });
    }
  });
}

/** `calls` echo calls through an opened mcpServer. */
async function ourCalls(
  tools: Awaited<ReturnType<Awaited<ReturnType<ReturnType<typeof mcpServer>['start']>>['open']>>,
) {
  return measure(CALLS, async () => {
    for (let index = 0; index < CALLS; index++) {
      const result = await tools.call('echo', { message: `hi ${index}` });
      if (result.isError) throw new Error(result.content);
    }
  });
}

const results: Record<string, { wall: number[]; cpu: number[] }> = {};
function record(name: string, value: Measure): void {
  results[name] ??= { wall: [], cpu: [] };
  results[name].wall.push(value.wallMs);
  results[name].cpu.push(value.cpuMs);
}

// Stdio: one SDK client and one mcpServer rollout, each on its own server-everything process.
const sdkStdio = new Client({ name: 'bench', version: '1' });
await sdkStdio.connect(
  new StdioClientTransport({ command: process.execPath, args: [server('everything')], stderr: 'ignore' }),
);
const ourStdioRun = await mcpServer(
  { command: process.execPath, args: [server('everything')] },
  { tools: ['echo'] },
).start();
const ourStdioInfo = await rollout();
const ourStdio = await ourStdioRun.open(ourStdioInfo);

// HTTP: one server, a session for each side.
const http = await startHttpEverything();
const sdkHttp = new Client({ name: 'bench', version: '1' });
await sdkHttp.connect(new StreamableHTTPClientTransport(new URL(http.url)));
const ourHttpRun = await mcpServer({ url: http.url }, { tools: ['echo'] }).start();
const ourHttp = await ourHttpRun.open(await rollout());

// Starts: a per-rollout server-memory.
const memory = await mcpServer(
  ({ tempDir }) => ({
    command: process.execPath,
    args: [server('memory')],
    env: { MEMORY_FILE_PATH: path.join(tempDir, 'm.jsonl') },
  }),
  { tools: ['read_graph'] },
).start();

const sides: Record<string, () => Promise<Measure>> = {
  'stdio sdk': () => sdkCalls(sdkStdio),
  'stdio ours': () => ourCalls(ourStdio),
  'http sdk': () => sdkCalls(sdkHttp),
  'http ours': () => ourCalls(ourHttp),
  'start sdk': () =>
    measure(STARTS, async () => {
      for (let index = 0; index < STARTS; index++) {
        const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-mcp-'));
        const client = new Client({ name: 'bench', version: '1' });
        await client.connect(
          new StdioClientTransport({
            command: process.execPath,
            args: [server('memory')],
            env: { PATH: process.env.PATH ?? '', MEMORY_FILE_PATH: path.join(dir, 'm.jsonl') },
            stderr: 'ignore',
          }),
        );
        await client.callTool({ name: 'read_graph', arguments: {} });
        await client.close();
        await rm(dir, { recursive: true, force: true });
      }
    }),
  'start ours': () =>
    measure(STARTS, async () => {
      for (let index = 0; index < STARTS; index++) {
        const info = await rollout();
        const tools = await memory.open(info);
        await tools.call('read_graph', {});
        await tools.close();
        await rm(info.tempDir, { recursive: true, force: true });
      }
    }),
};

const names = Object.keys(sides);
for (let round = 0; round < ROUNDS; round++) {
  // A rotating order, so that a change of the machine's load hits every side.
  const order = names.map((_, index) => names[(index + round) % names.length] as string);
  for (const name of order) record(name, await (sides[name] as () => Promise<Measure>)());
  console.log(
    `round ${round + 1}: ${names.map((name) => `${name} ${(results[name]?.wall.at(-1) ?? 0).toFixed(3)} ms`).join(', ')}`,
  );
}

const line = (name: string, unit: string) => {
  const wall = median(results[name]?.wall ?? []);
  const cpu = median(results[name]?.cpu ?? []);
  return { wall, cpu, text: `${name.padEnd(11)} ${wall.toFixed(3)} ms wall, ${cpu.toFixed(3)} ms CPU per ${unit}` };
};
console.log(
  `\nmedians over ${ROUNDS} rounds (${CALLS} calls, ${STARTS} starts per round; load ${os.loadavg()[0]?.toFixed(1)})`,
);
for (const [kind, unit] of [
  ['stdio', 'call'],
  ['http', 'call'],
  ['start', 'start'],
] as const) {
  const sdk = line(`${kind} sdk`, unit);
  const ours = line(`${kind} ours`, unit);
  console.log(sdk.text);
  console.log(ours.text);
  console.log(
    `${kind}: ours/sdk wall ${(ours.wall / sdk.wall).toFixed(2)}, CPU ${(ours.cpu / sdk.cpu).toFixed(2)}; added ${((ours.wall - sdk.wall) * 1000).toFixed(0)} µs wall, ${((ours.cpu - sdk.cpu) * 1000).toFixed(0)} µs CPU per ${unit}`,
  );
}

await ourStdio.close();
await ourStdioRun.close();
await rm(ourStdioInfo.tempDir, { recursive: true, force: true });
await ourHttp.close();
await ourHttpRun.close();
await memory.close();
await sdkStdio.close();
await sdkHttp.close();
http.child.kill();
