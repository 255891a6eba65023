/**
 * `policyloop serve` as a child process on a free loopback port, for suites whose client is another
 * program (OpenPipe ART, schemathesis): resolves once the command prints its address.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** A running `policyloop serve`: its process, base URL and what it printed on stderr so far. */
export interface ServeProcess {
  readonly child: ChildProcess;
  readonly url: string;
  stderr(): string;
}

/**
 * Starts `policyloop serve --port 0 --data-dir DIR --api-key KEY ...args` with `env` (no
 * `POLICYLOOP_API_KEY` unless `env` sets it; a variable set to `undefined` is removed); rejects when it exits or prints no address within 60 s.
 */
export function startServeProcess(options: {
  dataDir: string;
  apiKey: string;
  args?: readonly string[];
  env?: NodeJS.ProcessEnv;
}): Promise<ServeProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env, POLICYLOOP_API_KEY: undefined, ...options.env };
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete env[name];
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(ROOT, 'src/cli/main.ts'),
      'serve',
      '--port',
      '0',
      '--data-dir',
      options.dataDir,
      '--api-key',
      options.apiKey,
      ...(options.args ?? []),
    ],
    { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`policyloop serve printed no address within 60 s: ${stderr}`)),
      60_000,
    );
    child.once('exit', (code) => reject(new Error(`policyloop serve exited with ${code}: ${stderr}`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', (line) => {
      clearTimeout(timer);
      const match = /^policyloop listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
      if (match === null) reject(new Error(`unexpected first line from policyloop serve: ${line}`));
      else resolve({ child, url: match[1] as string, stderr: () => stderr });
    });
  });
}
