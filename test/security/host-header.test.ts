/**
 * DNS rebinding: a web page can make a browser send requests to 127.0.0.1 under the page's own
 * name. The listening service answers only the names it listens on (and those configured), so the
 * API and the dashboard are out of such a page's reach.
 */
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp, serve, type ServeHandle } from 'policyloop/server';
import { killChildren, runCli, startServeCli } from '../cli/support/run-cli.js';
import { temporaryDirectory } from '../server/support/harness.js';
import { createStandInEngine } from '../server/support/stand-in-engine.js';

const handles: ServeHandle[] = [];

afterEach(async () => {
  killChildren();
  await Promise.all(handles.splice(0).map((handle) => handle.close()));
});

async function start(options: Parameters<typeof serve>[0] = {}): Promise<ServeHandle> {
  const handle = await serve({ port: 0, dataDir: temporaryDirectory(), engine: createStandInEngine(), ...options });
  handles.push(handle);
  return handle;
}

/** A GET to the service on 127.0.0.1 with the given `Host` header (fetch does not let one set it). */
function get(port: number, path: string, host: string, apiKey?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'GET',
        headers: { host, ...(apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` }) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end();
  });
}

describe('Host header', () => {
  it('a loopback service refuses a foreign name with 421, on the API and the dashboard', async () => {
    const server = await start();
    for (const [path, key] of [
      ['/v1/local/models', server.apiKey],
      ['/', undefined],
      ['/v1/health', undefined],
    ] as const) {
      for (const host of [
        'attacker.example',
        'attacker.example:8000',
        'localhost.attacker.example',
        '127.0.0.1.nip.io',
      ]) {
        const answer = await get(server.port, path, host, key);
        expect(answer.status, `${host}${path}`).toBe(421);
        expect(answer.text.length).toBeLessThan(2000);
        const body = JSON.parse(answer.text) as { detail: string };
        expect(body.detail).toContain(`does not answer the host name ${JSON.stringify(host)}`);
        expect(body.detail).toContain('--allowed-host');
      }
    }
    // A long Host is not repeated whole.
    const long = await get(server.port, '/v1/health', `${'a'.repeat(5000)}.example`);
    expect(long.status).toBe(421);
    expect(long.text.length).toBeLessThan(2000);
    expect((await get(server.port, '/v1/health', `127.0.0.1:${server.port}`)).status).toBe(200);
  });

  it('a loopback service answers localhost, 127.0.0.1 and [::1] with any port', async () => {
    const server = await start();
    for (const host of [
      'localhost',
      `localhost:${server.port}`,
      'LOCALHOST:1',
      'localhost.',
      '127.0.0.1',
      '127.0.0.1:80',
      '[::1]',
      `[::1]:${server.port}`,
    ]) {
      const answer = await get(server.port, '/v1/local/models', host, server.apiKey);
      expect(answer.status, host).toBe(200);
    }
    // Its URL and the client work as before.
    const viaUrl = await fetch(`${server.url}/v1/health`);
    expect(viaUrl.status).toBe(200);
    expect((await viaUrl.text()).length).toBeLessThan(1000);
  });

  it('answers configured names (allowedHosts), and every name with *', async () => {
    const named = await start({ allowedHosts: ['mybox.lan', '192.168.7.7'] });
    expect((await get(named.port, '/v1/health', 'mybox.lan:8000')).status).toBe(200);
    expect((await get(named.port, '/v1/health', 'MyBox.LAN')).status).toBe(200);
    expect((await get(named.port, '/v1/health', '192.168.7.7')).status).toBe(200);
    expect((await get(named.port, '/v1/health', 'otherbox.lan')).status).toBe(421);
    expect((await get(named.port, '/v1/health', 'localhost')).status).toBe(200);

    const any = await start({ allowedHosts: ['*'] });
    expect((await get(any.port, '/v1/health', 'whatever.example')).status).toBe(200);

    await expect(start({ allowedHosts: ['http://mybox.lan/'] })).rejects.toThrow(/allowedHosts/);
    await expect(start({ allowedHosts: ['mybox.lan:8000'] })).rejects.toThrow(/without port/);
  });

  it('`policyloop serve --allowed-host` answers that name too, and refuses a malformed one with exit 2', async () => {
    const served = await startServeCli(temporaryDirectory(), ['--allowed-host', 'mybox.lan']);
    const port = Number(new URL(served.url).port);
    expect((await get(port, '/v1/health', 'mybox.lan:8000')).status).toBe(200);
    const refused = await get(port, '/v1/health', 'attacker.example');
    expect(refused.status).toBe(421);
    expect(refused.text.length).toBeLessThan(2000);
    expect((await get(port, '/v1/health', 'localhost')).status).toBe(200);
    await served.stop();

    const malformed = await runCli([
      'serve',
      '--port',
      '0',
      '--data-dir',
      temporaryDirectory(),
      '--allowed-host',
      'http://mybox.lan/',
    ]);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('--allowed-host');
    expect(malformed.stderr.length).toBeLessThan(2000);
  }, 60_000);

  it('leaves the in-process fetch handler alone (tests and embedders call it with any URL)', async () => {
    const app = await createApp({ dataDir: temporaryDirectory(), engine: createStandInEngine() });
    try {
      const response = await app.fetch(new Request('http://local/v1/health'));
      expect(response.status).toBe(200);
    } finally {
      await app.close();
    }
  });
});
