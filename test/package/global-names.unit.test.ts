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
import { describe, expect, it } from 'vitest';
import { entries, exportedNames, root } from './support/exports.js';

/** Names lib.dom.d.ts declares as global values (`declare var Audio: ...`, `declare function fetch(...)`). */
function domGlobalNames(): Set<string> {
  const require = createRequire(import.meta.url);
  const text = readFileSync(path.join(path.dirname(require.resolve('typescript')), 'lib.dom.d.ts'), 'utf8');
  return new Set([...text.matchAll(/^declare (?:var|function) ([A-Za-z_$][\w$]*)/gm)].map((match) => match[1]!));
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
