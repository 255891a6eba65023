/**
 * No public entry exports a name that shadows a JavaScript or DOM global: a user who writes
 * `import { File } from 'policyloop/schema'` would silently lose the global `File` in that module.
 * The names come from importing each entry (its values) and from the TypeScript compiler (its
 * type-only exports too); the globals are what `globalThis` holds in Node and every `declare var`
 * or `declare function` of TypeScript's lib.dom.d.ts.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');

/** The public entries: package export and source file. */
const entries = {
  policyloop: 'src/index.ts',
  'policyloop/schema': 'src/schema/index.ts',
  'policyloop/client': 'src/client/index.ts',
  'policyloop/server': 'src/server/index.ts',
  'policyloop/testing': 'src/testing/index.ts',
} as const;

/** Names lib.dom.d.ts declares as global values (`declare var Audio: ...`, `declare function fetch(...)`). */
function domGlobalNames(): Set<string> {
  const require = createRequire(import.meta.url);
  const text = readFileSync(path.join(path.dirname(require.resolve('typescript')), 'lib.dom.d.ts'), 'utf8');
  return new Set([...text.matchAll(/^declare (?:var|function) ([A-Za-z_$][\w$]*)/gm)].map((match) => match[1]!));
}

/**
 * Every name each entry exports, type-only ones included. Only our own sources are read: files
 * under node_modules (and the default libs) are replaced by empty ones, which keeps this fast and
 * does not change which names our modules export.
 */
function exportedNames(): Map<string, string[]> {
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    noLib: true,
    types: [],
    noEmit: true,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, languageVersion, ...rest) =>
    fileName.includes(`${path.sep}node_modules${path.sep}`)
      ? ts.createSourceFile(fileName, '', languageVersion)
      : getSourceFile(fileName, languageVersion, ...rest);
  const files = Object.values(entries).map((entry) => path.join(root, entry));
  const program = ts.createProgram(files, options, host);
  const checker = program.getTypeChecker();
  return new Map(
    Object.entries(entries).map(([name, entry]) => {
      const source = program.getSourceFile(path.join(root, entry));
      const moduleSymbol = source && checker.getSymbolAtLocation(source);
      if (!moduleSymbol) throw new Error(`cannot read the exports of ${entry}`);
      return [name, checker.getExportsOfModule(moduleSymbol).map((symbol) => symbol.getName())];
    }),
  );
}

describe('exported names', () => {
  const domGlobals = domGlobalNames();
  const shadows = (name: string) => name in globalThis || domGlobals.has(name);

  it('the global lists are real: they hold the names this test exists for', () => {
    for (const name of ['File', 'Function', 'Audio', 'History', 'Response', 'Event', 'Image', 'Text'])
      expect(shadows(name), name).toBe(true);
    expect(shadows('TrainableModel')).toBe(false);
  });

  it.each(Object.keys(entries))('%s shadows no JavaScript or DOM global (values)', async (entry) => {
    const module = (await import(path.join(root, entries[entry as keyof typeof entries]))) as object;
    const names = Object.keys(module);
    expect(names.length).toBeGreaterThan(3);
    expect(names.filter(shadows)).toEqual([]);
  });

  it('no entry shadows a global with any export, type-only ones included', () => {
    const all = exportedNames();
    expect(all.get('policyloop')).toContain('RewardFn'); // a type-only export is seen
    const offending = [...all].flatMap(([entry, names]) => names.filter(shadows).map((name) => `${entry}: ${name}`));
    expect(offending).toEqual([]);
  });
});
