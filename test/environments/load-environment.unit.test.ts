/**
 * `loadEnvironment` by id: a TypeScript file (through tsx, as `policyloop eval file.ts` loads the
 * examples), a `.mjs` file, a package folder in a `node_modules` (ESM-only, with `exports`), the
 * `loadEnvironment(args)` export, and the refusals of a module that exports nothing usable.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EnvironmentLoadError, InvalidArgumentError, loadEnvironment } from 'policyloop';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
let dir: string;

/**
 * A module text whose environment is a plain object of the Environment shape (a file outside the
 * project cannot import `policyloop`; `defineEnvironment` makes the same shape).
 */
const plainEnvironment = (name: string, tasks: string) => `{
  kind: 'environment',
  name: ${JSON.stringify(name)},
  args: {},
  spec: {},
  hasEvalDataset: false,
  async *dataset() { yield* ${tasks}; },
  async *evalDataset() { yield* ${tasks}; },
  async start() { throw new Error('not in this test'); },
}`;

async function write(file: string, text: string): Promise<string> {
  const full = path.join(dir, file);
  await mkdir(path.dirname(full), { recursive: true });
  await writeFile(full, text);
  return full;
}

async function tasksOf(environment: { dataset(): AsyncIterable<unknown> }): Promise<unknown[]> {
  const tasks: unknown[] = [];
  for await (const task of environment.dataset()) tasks.push(task);
  return tasks;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'policyloop-load-env-'));
  // An ESM-only package (no `require` condition, no `main`): `require.resolve` cannot find it.
  await write(
    'project/node_modules/@acme/env-x/package.json',
    JSON.stringify({
      name: '@acme/env-x',
      type: 'module',
      exports: {
        '.': { types: './dist/index.d.ts', import: './dist/index.js' },
        './hard': { import: './dist/hard.js' },
      },
      peerDependencies: { policyloop: '*' },
    }),
  );
  await write(
    'project/node_modules/@acme/env-x/dist/index.js',
    `export function loadEnvironment(args) {
       const count = args.count ?? 2;
       return { ...${plainEnvironment('env-x', "Array.from({ length: count }, (_, i) => ({ prompt: 'task ' + i }))")}, name: 'env-x-' + count };
     }`,
  );
  await write(
    'project/node_modules/@acme/env-x/dist/hard.js',
    `export default ${plainEnvironment('env-x-hard', '[]')};`,
  );
  await mkdir(path.join(dir, 'project/src/deep'), { recursive: true });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('loadEnvironment', () => {
  it('loads a TypeScript file through tsx: its default export, defined with defineEnvironment', async () => {
    const environment = await loadEnvironment('examples/environments/uppercase.ts', {}, { cwd: root });
    expect(environment).toMatchObject({ kind: 'environment', name: 'uppercase', hasEvalDataset: true, args: {} });
    const tasks = await tasksOf(environment);
    expect(tasks).toHaveLength(1024);
    expect(tasks[0]).toMatchObject({
      prompt: expect.stringMatching(/^[a-z]{4}$/),
      answer: expect.stringMatching(/^[A-Z]{4}$/),
    });
  });

  it('calls a `loadEnvironment(args)` export with the args, and the environment carries them', async () => {
    const file = path.join(root, 'test/fixtures/environments/counting.ts');
    const environment = await loadEnvironment(file, { count: 5 }, { cwd: root });
    expect(environment.name).toBe('counting-5');
    expect(environment.args).toEqual({ count: 5 });
    expect(await tasksOf(environment)).toHaveLength(5);
    expect((await loadEnvironment(file, {}, { cwd: root })).name).toBe('counting-3');
  });

  it('loads a .mjs file by a relative path from the working directory', async () => {
    await write('project/envs/plain.mjs', `export default ${plainEnvironment('plain', "[{ prompt: 'hi' }]")};`);
    const environment = await loadEnvironment('./envs/plain.mjs', { seed: 1 }, { cwd: path.join(dir, 'project') });
    expect(environment.name).toBe('plain');
    expect(environment.args).toEqual({ seed: 1 });
    expect(await tasksOf(environment)).toEqual([{ prompt: 'hi' }]);
  });

  it('resolves a package from the working directory as an import would: node_modules up the tree, ESM-only exports, subpaths', async () => {
    const cwd = path.join(dir, 'project/src/deep');
    const environment = await loadEnvironment('@acme/env-x', { count: 3 }, { cwd });
    expect(environment.name).toBe('env-x-3');
    expect(environment.args).toEqual({ count: 3 });
    expect(await tasksOf(environment)).toEqual([{ prompt: 'task 0' }, { prompt: 'task 1' }, { prompt: 'task 2' }]);
    expect((await loadEnvironment('@acme/env-x/hard', {}, { cwd })).name).toBe('env-x-hard');
  });

  it('refuses a module that exports no environment, naming what it exports', async () => {
    const file = await write(
      'nothing-usable.mjs',
      `export const VERSION = '1'; export const helper = () => 1; export default { name: 'x' };`,
    );
    const error = await loadEnvironment(file).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(EnvironmentLoadError);
    expect((error as EnvironmentLoadError).message).toBe(
      `Expected ${file} to export an environment as \`default\` (export default defineEnvironment(...)) or a \`loadEnvironment(args)\` function; it exports \`VERSION\` (a string), \`default\` (an object), \`helper\` (a function)`,
    );
    expect((error as EnvironmentLoadError).found).toEqual({
      VERSION: 'a string',
      default: 'an object',
      helper: 'a function',
    });
    expect((error as EnvironmentLoadError).id).toBe(file);

    const empty = await write('empty.mjs', 'export {};');
    await expect(loadEnvironment(empty)).rejects.toThrow(/; it exports nothing$/);
  });

  it('refuses a loadEnvironment that returns something else, or throws', async () => {
    const wrong = await write('wrong.mjs', 'export function loadEnvironment() { return 42; }');
    await expect(loadEnvironment(wrong)).rejects.toThrow(
      `Expected the \`loadEnvironment\` of ${wrong} to return an environment (from defineEnvironment), got a number`,
    );
    const throwing = await write(
      'throwing.mjs',
      "export async function loadEnvironment() { throw new Error('no key'); }",
    );
    const error = await loadEnvironment(throwing).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(EnvironmentLoadError);
    expect((error as Error).message).toBe(`The \`loadEnvironment\` of ${throwing} threw: no key`);
    expect(((error as Error).cause as Error).message).toBe('no key');
  });

  it('says what is missing: a file, a package, an export of a package', async () => {
    await expect(loadEnvironment('./missing.ts', {}, { cwd: dir })).rejects.toThrow(
      `Cannot find the environment file ${path.join(dir, 'missing.ts')}`,
    );
    await expect(loadEnvironment('@acme/env-missing', {}, { cwd: dir })).rejects.toThrow(
      `Cannot find the environment package \`@acme/env-missing\` from ${dir}: install it (npm install @acme/env-missing), or give a file path (./env.ts)`,
    );
    await expect(loadEnvironment('@acme/env-x/none', {}, { cwd: path.join(dir, 'project') })).rejects.toThrow(
      /^The package `@acme\/env-x` \(.*\) exports no `\.\/none` for import/,
    );
    const broken = await write('broken.mjs', "throw new Error('boom at import');");
    await expect(loadEnvironment(broken)).rejects.toThrow(
      `Importing the environment module ${broken} failed: boom at import`,
    );
  });

  it('refuses bad arguments before loading anything', async () => {
    await expect(loadEnvironment('')).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(loadEnvironment('x', [] as never)).rejects.toThrow(/^Expected `args` to be an object of arguments/);
    await expect(loadEnvironment('x', {}, { cdw: dir } as never)).rejects.toThrow(
      'Unknown option `cdw`; did you mean `cwd`?',
    );
  });
});
