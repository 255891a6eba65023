/** `policyloop serve` as a user runs it: the ready line, the dev-key notice, keys, clean stops. */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { DATABASE_FILE, DEV_API_KEY } from 'policyloop/server';
import { temporaryDirectory } from './support/harness.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

interface Run {
  readonly child: ChildProcess;
  readonly lines: string[];
  readonly nextLine: () => Promise<string>;
  readonly exit: Promise<number | null>;
  readonly stderr: () => string;
}

function run(args: string[], environment: Record<string, string> = {}): Run {
  // The developer's own key must not change which key the service under test accepts.
  const env: NodeJS.ProcessEnv = { ...process.env, ...environment };
  if (environment['POLICYLOOP_API_KEY'] === undefined) delete env['POLICYLOOP_API_KEY'];
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    const waiter = waiting.shift();
    if (waiter === undefined) lines.push(line);
    else waiter(line);
  });
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    lines,
    exit,
    stderr: () => stderr,
    nextLine: () =>
      new Promise<string>((resolve, reject) => {
        const buffered = lines.shift();
        if (buffered !== undefined) return resolve(buffered);
        const timer = setTimeout(() => reject(new Error(`no output within 30 s; stderr: ${stderr}`)), 30_000);
        waiting.push((line) => {
          clearTimeout(timer);
          resolve(line);
        });
      }),
  };
}

describe('policyloop serve', () => {
  it('prints its URL when ready, says it uses the dev key, serves, and stops cleanly on SIGTERM', async () => {
    const dataDir = temporaryDirectory();
    const cli = run(['serve', '--port', '0', '--data-dir', dataDir], { POLICYLOOP_ENGINE_RUNTIME: '' });
    const ready = await cli.nextLine();
    const match = /^policyloop listening on (http:\/\/127\.0\.0\.1:(\d+))$/.exec(ready);
    expect(match, ready).not.toBeNull();
    expect(Number(match?.[2])).toBeGreaterThan(0);
    expect(await cli.nextLine()).toContain(DEV_API_KEY);
    const url = match?.[1] as string;
    // The development key is public: the dashboard link carries it in the fragment.
    expect(await cli.nextLine()).toBe(`dashboard: ${url}/#key=${DEV_API_KEY}`);
    // onnxruntime-node is installed here, so the engine's default is onnxruntime on every core.
    expect(await cli.nextLine()).toMatch(/^engine runtime: onnxruntime \d+\.\d+\.\d+, \d+ threads?$/);
    const response = await fetch(`${url}/v1/preview/models`, {
      method: 'POST',
      headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ project: 'cli', name: 'm', base_model: 'policyloop/tiny-chat' }),
    });
    expect(response.status).toBe(200);
    expect(existsSync(join(dataDir, DATABASE_FILE))).toBe(true);
    expect(cli.stderr()).not.toContain('warning');
    cli.child.kill('SIGTERM');
    expect(await cli.exit).toBe(0);
    expect(cli.lines).toEqual([]);
  });

  it('prints the runtime POLICYLOOP_ENGINE_RUNTIME picks, which GET /v1/system-check reports too', async () => {
    const cli = run(['serve', '--port', '0', '--data-dir', temporaryDirectory()], {
      POLICYLOOP_ENGINE_RUNTIME: 'tfjs-wasm',
    });
    const url = /on (\S+)$/.exec(await cli.nextLine())?.[1] as string;
    let line = await cli.nextLine();
    while (!line.startsWith('engine runtime: ')) line = await cli.nextLine();
    expect(line).toMatch(/^engine runtime: tfjs-wasm \d+\.\d+\.\d+, 1 thread$/);
    const check = (await (await fetch(`${url}/v1/system-check`)).json()) as {
      gpu_queue: { runtime?: Record<string, unknown> };
    };
    expect(check.gpu_queue.runtime).toMatchObject({
      name: 'tfjs-wasm',
      threads: 1,
      fallback_reason: null,
      description: line.slice('engine runtime: '.length),
    });
    cli.child.kill('SIGTERM');
    expect(await cli.exit).toBe(0);
  });

  it('warns when it listens beyond loopback with the public development key it was allowed to use', async () => {
    const cli = run([
      'serve',
      '--host',
      '0.0.0.0',
      '--port',
      '0',
      '--data-dir',
      temporaryDirectory(),
      '--allow-public-dev-key',
    ]);
    expect(await cli.nextLine()).toMatch(/^policyloop listening on http:\/\/0\.0\.0\.0:\d+$/);
    expect(await cli.nextLine()).toContain(DEV_API_KEY);
    cli.child.kill('SIGTERM');
    expect(await cli.exit).toBe(0);
    expect(cli.stderr()).toContain('warning: listening on 0.0.0.0 with the public development key');
  });

  it('accepts only the --api-key keys given, prints nothing about the dev key, and stops on SIGINT', async () => {
    const cli = run([
      'serve',
      '--port',
      '0',
      '--data-dir',
      temporaryDirectory(),
      '--api-key',
      'key-one',
      '--api-key',
      'key-two',
    ]);
    const url = /on (\S+)$/.exec(await cli.nextLine())?.[1] as string;
    expect(await cli.nextLine()).toBe(`dashboard: ${url}/`);
    expect(await cli.nextLine()).toMatch(/^engine runtime: /);
    const status = async (key: string) =>
      (await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;
    expect([await status('key-one'), await status('key-two'), await status(DEV_API_KEY)]).toEqual([200, 200, 401]);
    cli.child.kill('SIGINT');
    expect(await cli.exit).toBe(0);
    expect(cli.lines).toEqual([]);
    expect(cli.stderr()).not.toContain('key-one');
  });

  it('takes its key from POLICYLOOP_API_KEY when no --api-key is given, without printing it', async () => {
    const cli = run(['serve', '--port', '0', '--data-dir', temporaryDirectory()], {
      POLICYLOOP_API_KEY: 'from-the-environment',
    });
    const url = /on (\S+)$/.exec(await cli.nextLine())?.[1] as string;
    expect(await cli.nextLine()).toBe('using the API key from POLICYLOOP_API_KEY');
    expect(await cli.nextLine()).toBe(`dashboard: ${url}/`);
    expect(await cli.nextLine()).toMatch(/^engine runtime: /);
    const status = async (key: string) =>
      (await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;
    expect([await status('from-the-environment'), await status(DEV_API_KEY)]).toEqual([200, 401]);
    cli.child.kill('SIGTERM');
    expect(await cli.exit).toBe(0);
    expect(cli.lines.join('\n') + cli.stderr()).not.toContain('from-the-environment');
  });

  it('exits 1 with the reason when the port is taken, and leaves the data directory usable', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const taken = (blocker.address() as AddressInfo).port;
    const dataDir = temporaryDirectory();
    try {
      const refused = run(['serve', '--port', String(taken), '--data-dir', dataDir]);
      expect(await refused.exit).toBe(1);
      expect(refused.stderr()).toContain('EADDRINUSE');
      expect(refused.lines).toEqual([]);
    } finally {
      blocker.close();
    }
    // The failed start released its lock: the same directory serves on another port.
    const retry = run(['serve', '--port', '0', '--data-dir', dataDir]);
    expect(await retry.nextLine()).toMatch(/^policyloop listening on /);
    retry.child.kill('SIGTERM');
    expect(await retry.exit, retry.stderr()).toBe(0);
  });

  it('refuses bad arguments and unknown commands with a usage message', async () => {
    const badPort = run(['serve', '--port', 'eighty']);
    expect(await badPort.exit).toBe(2);
    expect(badPort.stderr()).toContain('--port');
    const unknownOption = run(['serve', '--colour', 'blue']);
    expect(await unknownOption.exit).toBe(2);
    const unknownCommand = run(['fly']);
    expect(await unknownCommand.exit).toBe(2);
    expect(unknownCommand.stderr()).toContain('Usage: policyloop <command>');
    const help = run(['serve', '--help']);
    expect(await help.exit).toBe(0);
    expect(help.lines.join('\n')).toContain('--data-dir');
  });
});
