/**
 * `policyloop serve` (the real engine) in its own process with a capped heap, for tests whose
 * request could crash it: a crash is then seen (the process exits) instead of taking the test
 * runner down, and a runaway request fails fast instead of eating the shared machine's memory.
 * Every process started here is killed after each test of the file that imports this module.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, expect } from 'vitest';
import { DEV_API_KEY } from 'policyloop/server';

const MAIN = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));

/** Heap of a service process, in MiB: room for a body near the 64 MiB limit, not for gigabytes. */
export const SERVICE_HEAP_MIB = 1024;

/** A running service process. */
export interface ServiceProcess {
  readonly child: ChildProcess;
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  readonly dataDir: string;
  /** What it wrote to stderr so far. */
  stderr(): string;
}

const started: { child: ChildProcess; dataDir: string }[] = [];

afterEach(async () => {
  for (const { child, dataDir } of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
});

/** Starts `policyloop serve --port 0` on a fresh data directory, with the development key. */
export async function startService(): Promise<ServiceProcess> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'policyloop-security-'));
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['POLICYLOOP_API_KEY'];
  const child = spawn(
    process.execPath,
    [
      `--max-old-space-size=${SERVICE_HEAP_MIB}`,
      '--import',
      'tsx',
      MAIN,
      'serve',
      '--port',
      '0',
      '--data-dir',
      dataDir,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env },
  );
  started.push({ child, dataDir });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-20_000);
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve printed nothing within 60 s: ${stderr}`)), 60_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      const match = /listening on (\S+)$/.exec(line);
      if (match?.[1] === undefined) reject(new Error(`unexpected first line: ${line}`));
      else resolve(match[1]);
    });
    child.once('exit', (code, signal) => reject(new Error(`serve exited with ${code ?? signal}: ${stderr}`)));
  });
  child.stdout?.resume();
  return { child, url, dataDir, stderr: () => stderr };
}

/** An answer: status, body text and its size in bytes. */
export interface Answer {
  status: number;
  text: string;
  bytes: number;
}

/** Sends `body` (a string, sent as is) with the development key; a crash mid-request is an answer of status 0. */
export async function call(service: ServiceProcess, method: string, route: string, body?: string): Promise<Answer> {
  try {
    const response = await fetch(`${service.url}${route}`, {
      method,
      headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(120_000),
    });
    const bytes = Buffer.from(await response.arrayBuffer());
    return { status: response.status, text: bytes.toString('utf8'), bytes: bytes.byteLength };
  } catch (error) {
    return { status: 0, text: error instanceof Error ? error.message : String(error), bytes: 0 };
  }
}

/** Registers a model and returns its id. */
export async function createModel(service: ServiceProcess): Promise<string> {
  const answer = await call(
    service,
    'POST',
    '/v1/preview/models',
    JSON.stringify({ project: 'security', name: 'bounds', base_model: 'policyloop/tiny-chat' }),
  );
  expect(answer.status).toBe(200);
  return (JSON.parse(answer.text) as { id: string }).id;
}

/**
 * Fails unless the process still runs and answers `GET /v1/health` with 200 within one second
 * (the client gives up after a second: a wedged or dead service fails).
 */
export async function expectHealthy(service: ServiceProcess): Promise<void> {
  expect(service.child.exitCode, `the service exited: ${service.stderr()}`).toBeNull();
  expect(service.child.signalCode, `the service was killed: ${service.stderr()}`).toBeNull();
  const response = await fetch(`${service.url}/v1/health`, { signal: AbortSignal.timeout(1_000) });
  expect(response.status).toBe(200);
  await response.arrayBuffer();
}

/** `'1,1,...,1'` wrapped as a JSON array of `count` ones (a million ones are 2 MB). */
export function ones(count: number): string {
  return `[${'1,'.repeat(count - 1)}1]`;
}
