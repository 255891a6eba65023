/**
 * A user who installed with `--omit=optional` and then starts a local backend must learn what to
 * install, not read Node's bare "Cannot find package". A child node refuses the local service's
 * optional packages exactly as Node does when one is missing.
 */
import { spawnSync } from 'node:child_process';
import * as nodeModule from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Resolves like Node does when `hono` is not installed. */
const withoutHono = `
export async function resolve(specifier, context, nextResolve) {
  if (specifier === 'hono' || specifier.startsWith('hono/')) {
    const error = new Error("Cannot find package '" + specifier + "' imported from " + context.parentURL);
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return nextResolve(specifier, context);
}`;

describe.skipIf(!('register' in nodeModule))('LocalBackend without the optional dependencies', () => {
  it('fails with a message naming the packages to install and the hosted alternative', () => {
    const script = `
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(withoutHono)}));
const { LocalBackend, PolicyloopError } = await import(${JSON.stringify(new URL('src/index.ts', `file://${root}`).href)});
try {
  await LocalBackend.start({ dataDir: 'unused' });
  console.log('started');
} catch (error) {
  console.log(error instanceof PolicyloopError ? 'PolicyloopError' : 'other', error.message);
}`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], {
      cwd: root,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, NO_COLOR: '1' },
    });
    expect(child.status, child.stderr).toBe(0);
    expect(child.stdout).toMatch(
      /^PolicyloopError The local service needs its optional dependencies, and `hono` is not installed/,
    );
    expect(child.stdout).toContain(
      'npm install hono @hono/node-server better-sqlite3 @tensorflow/tfjs-core @tensorflow/tfjs-backend-wasm',
    );
    expect(child.stdout).toContain('HostedBackend');
  });
});
