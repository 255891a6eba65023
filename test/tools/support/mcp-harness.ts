/**
 * The official MCP reference servers (devDependencies, run with this node), a streamable-HTTP
 * `server-everything` on a free loopback port, and a count of the processes a test's servers
 * left, found by a marker in their environment (so that an orphan re-parented to init counts too).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root. */
export const root = fileURLToPath(new URL('../../../', import.meta.url));

/** The script of a reference server (`memory`, `filesystem`, `everything`). */
export function referenceServer(name: 'memory' | 'filesystem' | 'everything'): string {
  return path.join(root, 'node_modules/@modelcontextprotocol', `server-${name}`, 'dist/index.js');
}

/** The environment variable that marks the processes of one test. */
export const MARK_VARIABLE = 'POLICYLOOP_MCP_TEST_MARK';

/** A fresh marker, to put in a server's `env` as `{ [MARK_VARIABLE]: mark }`. */
export function newMark(): string {
  return randomUUID();
}

/** The pids of every process on the machine whose environment carries `mark`. */
export function markedProcesses(mark: string): number[] {
  const needle = `${MARK_VARIABLE}=${mark}`;
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'utf8');
      if (!environ.split('\0').includes(needle)) continue;
      // A zombie has exited; only its parent's wait is missing.
      const state = /^\d+ \(.*\) (\S)/.exec(readFileSync(`/proc/${entry}/stat`, 'utf8'))?.[1];
      if (state !== 'Z') pids.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}

/** The process group of `pid` (field 5 of /proc/<pid>/stat), or undefined once it is gone. */
export function processGroup(pid: number): number | undefined {
  try {
    const fields = /^\d+ \(.*\) (.*)$/s.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1]?.split(' ');
    return fields === undefined ? undefined : Number(fields[2]);
  } catch {
    return undefined;
  }
}

/** Waits until `check()` is true (polling), for at most `ms`; answers its last value. */
export async function eventually(check: () => boolean, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/** A free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** A running `server-everything` over streamable HTTP. */
export interface HttpEverything {
  /** Its MCP endpoint. */
  readonly url: string;
  /** The child process. */
  readonly child: ChildProcess;
  /** Stops it. */
  close(): Promise<void>;
}

/** Starts `server-everything streamableHttp` on a free loopback port, waiting until it listens. */
export async function startHttpEverything(): Promise<HttpEverything> {
  const port = await freePort();
  const child = spawn(process.execPath, [referenceServer('everything'), 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server-everything did not listen:\n${stderr}`)), 20_000);
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes('listening')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server-everything exited with ${code}:\n${stderr}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}
