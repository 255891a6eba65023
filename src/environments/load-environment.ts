/**
 * `loadEnvironment`: an environment by id, a file path (`.ts` through tsx, `.js`, `.mjs`) or a
 * package name resolved from the working directory as the user's own project would import it
 * (its `exports`, with the `import` condition), whose module exports an `Environment` as `default`
 * or a `loadEnvironment(args)` function.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { option, optionsSchema, parseOptions, parseValue } from '../internal/option-schema.js';
import { environmentWithArgs } from './define-environment.js';
import type { Environment } from './environment.js';
import { EnvironmentLoadError } from './environment-errors.js';

/** Options of {@link loadEnvironment}. */
export interface LoadEnvironmentOptions {
  /**
   * The directory a file path is relative to and a package is resolved from (its `node_modules`
   * and the ones above it).
   * @default process.cwd()
   */
  cwd?: string | undefined;
}

const LoadOptionsSchema = optionsSchema<LoadEnvironmentOptions>()({ cwd: option.nonEmptyString().optional() });

const ArgsSchema = z.record(z.string(), z.unknown(), { error: 'an object of arguments' });

/** File extensions of modules that are loaded as files (not package names) when the file exists. */
const MODULE_FILE = /\.(?:[cm]?[jt]s|tsx)$/;
/** TypeScript files: loaded through tsx. */
const TYPESCRIPT_FILE = /\.(?:[cm]?ts|tsx)$/;

/** What the exports conditions match, in Node's order of preference for `import()`. */
const IMPORT_CONDITIONS = new Set(['node', 'import', 'module-sync', 'default']);

/** Whether `value` is an environment: what `defineEnvironment` makes (or an object of that shape). */
export function isEnvironment(value: unknown): value is Environment {
  if (typeof value !== 'object' || value === null) return false;
  const environment = value as Partial<Environment>;
  return (
    environment.kind === 'environment' &&
    typeof environment.name === 'string' &&
    typeof environment.start === 'function' &&
    typeof environment.dataset === 'function' &&
    typeof environment.evalDataset === 'function'
  );
}

/** "a function", "an object", "a string", "an array", "null"... */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (isEnvironment(value)) return 'an environment';
  const type = typeof value;
  if (type === 'function')
    return /^class[\s{]/.test(Function.prototype.toString.call(value)) ? 'a class' : 'a function';
  if (type === 'undefined') return 'undefined';
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

/** The module's exports by name, each with its kind. */
function exportsOf(module: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.keys(module)
      .sort()
      .map((name) => [name, kindOf(module[name])]),
  );
}

/** "`default` (an object), `helper` (a function)", or "nothing". */
function describeExports(found: Readonly<Record<string, string>>): string {
  const names = Object.entries(found).map(([name, kind]) => `\`${name}\` (${kind})`);
  return names.length === 0 ? 'nothing' : names.join(', ');
}

/** Whether `id` names a file (a path, or a module file that exists) rather than a package. */
function isFileId(id: string, cwd: string): boolean {
  if (path.isAbsolute(id) || id.startsWith('./') || id.startsWith('../') || id === '.' || id === '..') return true;
  if (id.startsWith('.\\') || id.startsWith('..\\')) return true;
  return MODULE_FILE.test(id) && existsSync(path.resolve(cwd, id));
}

/** `@scope/name/sub/path` → `{ name: '@scope/name', subpath: './sub/path' }`. */
function splitPackageId(id: string): { name: string; subpath: string } {
  const parts = id.split('/');
  const size = id.startsWith('@') ? 2 : 1;
  const name = parts.slice(0, size).join('/');
  const rest = parts.slice(size).join('/');
  return { name, subpath: rest === '' ? '.' : `./${rest}` };
}

/** A target of `exports` (a string, an array of fallbacks, or conditions) for `import()`, or undefined. */
function exportTarget(target: unknown, conditions: ReadonlySet<string>): string | undefined {
  if (typeof target === 'string') return target;
  if (Array.isArray(target)) {
    for (const item of target) {
      const found = exportTarget(item, conditions);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (typeof target !== 'object' || target === null) return undefined;
  for (const [condition, value] of Object.entries(target)) {
    if (!conditions.has(condition)) continue;
    const found = exportTarget(value, conditions);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** The file `subpath` of a package's `exports` points to (exact keys, then `*` patterns), or undefined. */
function resolveExports(exports: unknown, subpath: string): string | undefined {
  const isSubpathMap =
    typeof exports === 'object' &&
    exports !== null &&
    !Array.isArray(exports) &&
    Object.keys(exports).some((key) => key.startsWith('.'));
  const map = (isSubpathMap ? exports : { '.': exports }) as Record<string, unknown>;
  // A CommonJS-only package exports `require` alone: `import()` loads it too.
  const resolve = (target: unknown): string | undefined =>
    exportTarget(target, IMPORT_CONDITIONS) ?? exportTarget(target, new Set(['require']));
  if (subpath in map) return resolve(map[subpath]);
  for (const [key, target] of Object.entries(map)) {
    const star = key.indexOf('*');
    if (star === -1) continue;
    const prefix = key.slice(0, star);
    const suffix = key.slice(star + 1);
    if (!subpath.startsWith(prefix) || !subpath.endsWith(suffix) || subpath.length < key.length - 1) continue;
    const match = subpath.slice(prefix.length, subpath.length - suffix.length);
    return resolve(target)?.replaceAll('*', match);
  }
  return undefined;
}

/**
 * The file a package id resolves to from `cwd`, as an ESM `import` of it in the user's project
 * would: the nearest `node_modules/<name>` from `cwd` up, then its `exports` (or `main`).
 */
function resolvePackage(id: string, cwd: string): string {
  const { name, subpath } = splitPackageId(id);
  let directory = path.resolve(cwd);
  for (;;) {
    const folder = path.join(directory, 'node_modules', name);
    const manifest = path.join(folder, 'package.json');
    if (existsSync(manifest)) {
      let pkg: { exports?: unknown; main?: unknown };
      try {
        pkg = JSON.parse(readFileSync(manifest, 'utf8')) as typeof pkg;
      } catch (error) {
        throw new EnvironmentLoadError(id, `Cannot read the package.json of \`${name}\` (${manifest})`, {
          cause: error,
        });
      }
      let target: string | undefined;
      if (pkg.exports !== undefined) target = resolveExports(pkg.exports, subpath);
      else if (subpath === '.') target = typeof pkg.main === 'string' ? pkg.main : 'index.js';
      else target = subpath;
      if (target === undefined) {
        throw new EnvironmentLoadError(
          id,
          `The package \`${name}\` (${folder}) exports no \`${subpath}\` for import (see its package.json "exports")`,
        );
      }
      const file = path.resolve(folder, target);
      if (!existsSync(file)) {
        throw new EnvironmentLoadError(
          id,
          `The package \`${name}\` points \`${subpath}\` to ${file}, which does not exist`,
        );
      }
      return file;
    }
    const parent = path.dirname(directory);
    if (parent === directory) {
      throw new EnvironmentLoadError(
        id,
        `Cannot find the environment package \`${name}\` from ${path.resolve(cwd)}: install it (npm install ${name}), or give a file path (./env.ts)`,
      );
    }
    directory = parent;
  }
}

/** tsx's `tsImport`, resolved from `cwd` as the user's project has it, or undefined when it is not installed there. */
async function tsxImport(
  cwd: string,
): Promise<((specifier: string, options: { parentURL: string }) => Promise<unknown>) | undefined> {
  let api: string;
  try {
    api = resolvePackage('tsx/esm/api', cwd);
  } catch {
    return undefined;
  }
  const module = (await import(pathToFileURL(api).href)) as { tsImport?: unknown };
  return typeof module.tsImport === 'function'
    ? (module.tsImport as (specifier: string, options: { parentURL: string }) => Promise<unknown>)
    : undefined;
}

/** Errors of a TypeScript file imported without a TypeScript loader. */
const NEEDS_A_LOADER = new Set([
  'ERR_UNKNOWN_FILE_EXTENSION',
  'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX',
  'ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING',
]);

/**
 * Imports the module of `file`. A TypeScript file goes through tsx when the project has it;
 * without it, through the process's own loader (a script run with tsx, or Node's type stripping),
 * and when that cannot read it the error says to install tsx.
 */
async function importFile(id: string, file: string, cwd: string): Promise<Record<string, unknown>> {
  const url = pathToFileURL(file).href;
  const typescript = TYPESCRIPT_FILE.test(file);
  try {
    const tsImport = typescript ? await tsxImport(cwd) : undefined;
    if (tsImport !== undefined) {
      const parentURL = pathToFileURL(path.join(cwd, 'index.js')).href;
      return (await tsImport(url, { parentURL })) as Record<string, unknown>;
    }
    return (await import(url)) as Record<string, unknown>;
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (typescript && (NEEDS_A_LOADER.has(String(code)) || error instanceof SyntaxError)) {
      throw new EnvironmentLoadError(
        id,
        `Loading the TypeScript environment ${file} needs tsx, which is not installed in ${cwd}: run \`npm install --save-dev tsx\`, or compile the environment to JavaScript`,
        { cause: error },
      );
    }
    const message = error instanceof Error ? error.message : String(error);
    throw new EnvironmentLoadError(id, `Importing the environment module ${file} failed: ${message}`, { cause: error });
  }
}

/** The environment a module gives: its `loadEnvironment(args)`, else its `default`; refused naming what it exports. */
async function environmentOf(
  id: string,
  module: Record<string, unknown>,
  args: Readonly<Record<string, unknown>>,
): Promise<Environment> {
  const found = exportsOf(module);
  // A CommonJS module is its `default` (module.exports): look inside it too.
  const main = module['default'];
  const inner =
    typeof main === 'object' && main !== null && !isEnvironment(main) ? (main as Record<string, unknown>) : {};
  const loader = [module['loadEnvironment'], inner['loadEnvironment'], isEnvironment(main) ? undefined : main].find(
    (candidate): candidate is (args: unknown) => unknown => typeof candidate === 'function',
  );
  if (loader !== undefined) {
    let loaded: unknown;
    try {
      loaded = await loader(args);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new EnvironmentLoadError(id, `The \`loadEnvironment\` of ${id} threw: ${message}`, { cause: error, found });
    }
    if (isEnvironment(loaded)) return environmentWithArgs(loaded, args);
    throw new EnvironmentLoadError(
      id,
      `Expected the \`loadEnvironment\` of ${id} to return an environment (from defineEnvironment), got ${kindOf(loaded)}`,
      { found },
    );
  }
  const environment = isEnvironment(main) ? main : isEnvironment(inner['default']) ? inner['default'] : undefined;
  if (environment !== undefined) return environmentWithArgs(environment as Environment, args);
  throw new EnvironmentLoadError(
    id,
    `Expected ${id} to export an environment as \`default\` (export default defineEnvironment(...)) or a \`loadEnvironment(args)\` function; it exports ${describeExports(found)}`,
    { found },
  );
}

/**
 * Loads an environment by id: a file path (`./envs/math.ts` through tsx, which must be installed
 * in the project; `.js`, `.mjs`) or a package name (`@acme/env-math`, or a subpath of one)
 * resolved from the working directory as the project's own `import` would (its `node_modules`,
 * the package's `exports`). The module exports an `Environment` as `default`, or a
 * `loadEnvironment(args)` function (sync or async) that returns one, called with `args`. The
 * environment carries `args` (for eval metadata).
 * @throws {EnvironmentLoadError} when the file or package is not found, its module fails to import,
 * a TypeScript file has no tsx, or it exports no environment (the message lists what it exports).
 * @example
 * const environment = await loadEnvironment('@acme/env-math', { difficulty: 'hard' });
 * const local = await loadEnvironment('./envs/arithmetic.ts');
 * await new RLTrainer({ model, environment, maxSteps: 50 }).run();
 */
export async function loadEnvironment<T = unknown>(
  id: string,
  args: Readonly<Record<string, unknown>> = {},
  options: LoadEnvironmentOptions = {},
): Promise<Environment<T>> {
  parseValue('id', option.nonEmptyString(), id);
  const checkedArgs = parseValue('args', ArgsSchema, args);
  const cwd = path.resolve(parseOptions(LoadOptionsSchema, options).cwd ?? process.cwd());
  let file: string;
  if (isFileId(id, cwd)) {
    file = path.resolve(cwd, id);
    if (!existsSync(file) || !statSync(file).isFile()) {
      throw new EnvironmentLoadError(id, `Cannot find the environment file ${file}`);
    }
  } else {
    file = resolvePackage(id, cwd);
  }
  const module = await importFile(id, file, cwd);
  return (await environmentOf(id, module, checkedArgs)) as Environment<T>;
}
