/**
 * Tests that show public behaviour reach the package the way users do, through its entries
 * (`policyloop`, `policyloop/training`, `policyloop/schema`, ...), so the suite also checks what a
 * user can import. Two rules, read from every import of every test file:
 * - no test imports an entry's source file by path (it names the entry instead);
 * - the folders whose tests are all about public behaviour import nothing from `src/` at all.
 * Tests of internals (the engine's parts, the store, a formatter, this folder) import `src/` files.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { entries, root } from './support/exports.js';
import { importsOf, typeScriptFiles } from './support/imports.js';

/** Folders of test/ whose files import nothing from src/: they test only what users can import. */
const entriesOnly = ['test/art', 'test/integrations', 'test/reliability', 'test/rewards'];
/** Folders that may import entry sources by path: this folder reads the entries' sources on purpose. */
const exempt = ['test/package'];

const entrySources = new Set(Object.values(entries).map((entry) => path.join(root, entry)));

/** Every import of a test file that reaches src/: `{ file, specifier, target }`, paths from the root. */
function sourceImports(): { file: string; specifier: string; target: string }[] {
  return typeScriptFiles(path.join(root, 'test')).flatMap((file) =>
    importsOf(file)
      .filter(({ specifier }) => specifier.startsWith('.'))
      .map(({ specifier }) => ({
        file: path.relative(root, file),
        specifier,
        target: path.resolve(path.dirname(file), specifier).replace(/\.js$/, '.ts'),
      }))
      .filter(({ target }) => target.startsWith(path.join(root, 'src') + path.sep)),
  );
}

const inFolder = (file: string, folders: readonly string[]) => folders.some((folder) => file.startsWith(`${folder}/`));
const topLevel = (file: string) => path.dirname(file) === 'test';

describe('how tests import the package', () => {
  const imports = sourceImports();

  it('reads the imports of the test files (some reach src/, as tests of internals do)', () => {
    expect(imports.length).toBeGreaterThan(20);
    expect(imports.some(({ file }) => file.startsWith('test/engine/'))).toBe(true);
  });

  it("no test imports an entry's source by path: it names the entry, as users do", () => {
    const offending = imports
      .filter(({ file, target }) => !inFolder(file, exempt) && entrySources.has(target))
      .map(({ file, specifier }) => `${file} imports '${specifier}'`);
    expect(offending).toEqual([]);
  });

  it(`${entriesOnly.join(', ')} and the top-level tests import nothing from src/`, () => {
    const offending = imports
      .filter(({ file }) => inFolder(file, entriesOnly) || topLevel(file))
      .map(({ file, specifier }) => `${file} imports '${specifier}'`);
    expect(offending).toEqual([]);
  });
});
