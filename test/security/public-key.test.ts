/**
 * The development key is public (it is in the docs): the service refuses to listen beyond
 * loopback with it unless the user opts in by name (`allowPublicDevKey`, `--allow-public-dev-key`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { DEV_API_KEY, serve, type ServeHandle } from 'policyloop/server';
import { temporaryDirectory } from '../server/support/harness.js';
import { createStandInEngine } from '../server/support/stand-in-engine.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const handles: ServeHandle[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await Promise.all(handles.splice(0).map((handle) => handle.close()));
});

async function start(options: Parameters<typeof serve>[0]): Promise<ServeHandle> {
  const handle = await serve({ port: 0, engine: createStandInEngine(), ...options });
  handles.push(handle);
  return handle;
}

/** Health over loopback (a wildcard bind answers 127.0.0.1 too). */
async function health(port: number): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${port}/v1/health`);
  await response.arrayBuffer();
  return response.status;
}

function runCli(args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['POLICYLOOP_API_KEY'];
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const firstLine = new Promise<string | undefined>((resolve) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', resolve);
    child.once('exit', () => resolve(undefined));
  });
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, firstLine, exit, stderr: () => stderr };
}

describe('the public development key beyond loopback', () => {
  it('serve() refuses 0.0.0.0 with the default key, and with the key passed explicitly', async () => {
    const dataDir = temporaryDirectory();
    for (const apiKeys of [undefined, [DEV_API_KEY], ['my-own-key', DEV_API_KEY]]) {
      const refused = serve({ host: '0.0.0.0', port: 0, dataDir, engine: createStandInEngine(), apiKeys });
      await expect(refused).rejects.toThrow(/Refusing to listen on 0\.0\.0\.0 with the public development key/);
      await expect(refused).rejects.toThrow(/allowPublicDevKey/);
    }
    // Nothing was opened: a loopback service takes the same data directory and answers.
    const loopback = await start({ dataDir });
    expect(await health(loopback.port)).toBe(200);
  });

  it('serve() listens beyond loopback with a key of the user own, or when allowed by name', async () => {
    const ownKey = await start({ host: '0.0.0.0', apiKeys: ['a-long-private-key'], dataDir: temporaryDirectory() });
    const refused = await fetch(`http://127.0.0.1:${ownKey.port}/v1/local/models`, {
      headers: { authorization: `Bearer ${DEV_API_KEY}` },
    });
    expect(refused.status).toBe(401);
    expect((await refused.text()).length).toBeLessThan(1000);
    expect(await health(ownKey.port)).toBe(200);

    const allowed = await start({ host: '0.0.0.0', allowPublicDevKey: true, dataDir: temporaryDirectory() });
    const listed = await fetch(`http://127.0.0.1:${allowed.port}/v1/local/models`, {
      headers: { authorization: `Bearer ${DEV_API_KEY}` },
    });
    expect(listed.status).toBe(200);
    expect(await health(allowed.port)).toBe(200);
  });

  it('`policyloop serve --host 0.0.0.0` without --api-key exits 2 and names the flag that allows it', async () => {
    const cli = runCli(['serve', '--host', '0.0.0.0', '--port', '0', '--data-dir', temporaryDirectory()]);
    expect(await cli.firstLine).toBeUndefined();
    expect(await cli.exit).toBe(2);
    expect(cli.stderr()).toContain('refusing to listen on 0.0.0.0 with the public development key');
    expect(cli.stderr()).toContain('--allow-public-dev-key');
    expect(cli.stderr().length).toBeLessThan(2000);

    const allowed = runCli([
      'serve',
      '--host',
      '0.0.0.0',
      '--port',
      '0',
      '--data-dir',
      temporaryDirectory(),
      '--allow-public-dev-key',
    ]);
    const line = await allowed.firstLine;
    const port = Number(/:(\d+)$/.exec(line ?? '')?.[1]);
    expect(await health(port)).toBe(200);
    allowed.child.kill('SIGTERM');
    expect(await allowed.exit).toBe(0);
    expect(allowed.stderr()).toContain('warning: listening on 0.0.0.0 with the public development key');
  }, 60_000);
});
