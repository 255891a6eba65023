/**
 * Users who only talk to a hosted service must be able to install and import the client without
 * the local service's heavy parts (hono, @hono/node-server, better-sqlite3, tfjs), the Tinker
 * backend's protobuf library (@bufbuild/protobuf) and the MCP SDK (@modelcontextprotocol/sdk, loaded
 * only when an `mcpServer` starts), which are
 * optional dependencies. A child node process imports each entry with a resolve hook that fails
 * any import resolving into those packages, as if they were not installed.
 */
import { spawnSync } from 'node:child_process';
import * as nodeModule from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** A module-resolution hook that refuses the heavy packages, naming who imported them. */
const blockHeavyModules = `
const heavy = /\\/node_modules\\/(hono|@hono\\/node-server|better-sqlite3|@tensorflow\\/[^/]+|@bufbuild\\/[^/]+|@modelcontextprotocol\\/[^/]+)\\//;
export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (heavy.test(resolved.url)) {
    const error = new Error('heavy module ' + specifier + ' imported by ' + context.parentURL);
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return resolved;
}`;

/**
 * Imports `entry` (a path under `src/`) in a fresh node with the heavy packages blocked, runs
 * `then` (a module body with `entry` bound to the namespace) and returns the child's output.
 */
function importWithoutHeavyModules(
  entry: string,
  then = '',
): { status: number | null; stdout: string; stderr: string } {
  const script = `
import { register, createRequire } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(blockHeavyModules)}));
const entry = await import(${JSON.stringify(new URL(entry, new URL(`file://${root}`)).href)});
${then}
// CommonJS packages (better-sqlite3) could also come in through require(): none may be cached.
const cached = Object.keys(createRequire(import.meta.url).cache).filter((path) => /node_modules\\/(hono|@hono|better-sqlite3|@tensorflow)\\//.test(path));
if (cached.length > 0) throw new Error('heavy CommonJS modules loaded: ' + cached.join(', '));
console.log('imported', Object.keys(entry).length, 'exports');
`;
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, NO_COLOR: '1' },
  });
  return { status: child.status, stdout: child.stdout, stderr: child.stderr };
}

// Resolve hooks through `module.register` need Node >= 20.6; the package itself supports 20.3.
describe.skipIf(!('register' in nodeModule))('the client does not need the optional heavy dependencies', () => {
  it('the root entry imports, and a hosted model handle is made, with hono, SQLite and tfjs unavailable', () => {
    const child = importWithoutHeavyModules(
      'src/index.ts',
      `
const backend = new entry.HostedBackend({ apiKey: 'k', baseURL: 'http://svc/v1' });
const model = new entry.TrainableModel({ project: 'p', name: 'm', baseModel: 'b' });
if (backend.kind !== 'hosted' || model.name !== 'm') throw new Error('unexpected handles');
`,
    );
    expect(child.status, child.stderr).toBe(0);
    expect(child.stdout).toMatch(/imported \d+ exports/);
  });

  it('an mcpServer is made without the MCP SDK; starting it says which package to install', () => {
    const child = importWithoutHeavyModules(
      'src/index.ts',
      `
const source = entry.mcpServer({ command: 'some-server' }, { name: 'tools' });
const error = await source.start().then(() => undefined, (caught) => caught);
if (!(error instanceof entry.McpServerError)) throw new Error('expected an McpServerError, got ' + error);
if (!/npm install @modelcontextprotocol\\/sdk/.test(error.message)) throw new Error(error.message);
console.log(error.message);
`,
    );
    expect(child.status, child.stderr).toBe(0);
    expect(child.stdout).toMatch(/MCP server `tools` needs the package `@modelcontextprotocol\/sdk`/);
  });

  it('policyloop/client imports, and a client makes a call, with them unavailable', () => {
    const child = importWithoutHeavyModules(
      'src/client/index.ts',
      `
const fetch = async (url) => new Response(JSON.stringify(['base-model']), { status: 200 });
const client = new entry.TrainingClient({ apiKey: 'k', baseURL: 'http://svc/v1', fetch });
const models = await client.baseModels.list();
if (models[0] !== 'base-model') throw new Error('unexpected answer ' + JSON.stringify(models));
`,
    );
    expect(child.status, child.stderr).toBe(0);
    expect(child.stdout).toMatch(/imported \d+ exports/);
  });

  it('policyloop/training imports, and a log batcher is made, without them', () => {
    const child = importWithoutHeavyModules(
      'src/training.ts',
      `
const spoolPath = (await import('node:os')).tmpdir() + '/policyloop-unused-spool.jsonl';
const batcher = new entry.LogBatcher({ client: { models: { log: async () => ({}) } }, modelId: 'm', spoolPath });
if (batcher.stats().bufferedGroups !== 0) throw new Error('unexpected stats ' + JSON.stringify(batcher.stats()));
`,
    );
    expect(child.status, child.stderr).toBe(0);
  });

  it('policyloop/schema imports without them', () => {
    const child = importWithoutHeavyModules(
      'src/schema/index.ts',
      `if (entry.Trajectory.parse({}).reward !== 0) throw new Error('unexpected default');`,
    );
    expect(child.status, child.stderr).toBe(0);
  });

  it('policyloop/testing imports without them too (it starts the service lazily)', () => {
    const child = importWithoutHeavyModules('src/testing/index.ts');
    expect(child.status, child.stderr).toBe(0);
  });

  it('the guard works: policyloop/server does need them', () => {
    // Without this control, a hook that blocked nothing would let the tests above pass vacuously.
    const child = importWithoutHeavyModules('src/server/index.ts');
    expect(child.status).not.toBe(0);
    expect(child.stderr).toMatch(/heavy module (hono|@hono\/node-server|better-sqlite3|@tensorflow\/\S+) imported by/);
  });
});
