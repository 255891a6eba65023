/**
 * The package's promises to its users, read from package.json and tsconfig.json: an ESM package
 * for Node >= 20.3 with explicit entry points (root, training, schema, client, server, testing, tinker) and a
 * `policyloop` command, three light runtime dependencies, the heavy local-service parts optional,
 * and `openai` 6 or 7 as a peer.
 * (`lightweight-import.test.ts` checks that the client really loads without the heavy parts.)
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const root = new URL('../../', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
  type?: string;
  engines?: Record<string, string>;
  exports?: Record<string, unknown>;
  bin?: Record<string, string>;
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
};

/** `[major, minor, patch]` of `1.2.3`; missing parts are 0. */
function parseVersion(text: string): [number, number, number] {
  const [major = 0, minor = 0, patch = 0] = text.replace(/^v/, '').split('.').map(Number);
  return [major, minor, patch];
}

function compare(a: readonly number[], b: readonly number[]): number {
  for (let index = 0; index < 3; index += 1) {
    const difference = (a[index] ?? 0) - (b[index] ?? 0);
    if (difference !== 0) return Math.sign(difference);
  }
  return 0;
}

/**
 * Whether `version` satisfies `range`, for the forms manifests use here: `||` of space-separated
 * comparators (`>=`, `>`, `<=`, `<`, `=`), carets (`^6.0.0`) and plain versions.
 */
function satisfies(version: string, range: string): boolean {
  const wanted = parseVersion(version);
  return range.split('||').some((alternative) =>
    alternative
      .trim()
      .split(/\s+/)
      .every((comparator) => {
        const match = /^(>=|<=|>|<|=|\^)?(\d+(?:\.\d+){0,2})$/.exec(comparator);
        if (!match?.[2])
          throw new Error(`Unsupported range comparator ${JSON.stringify(comparator)} in ${JSON.stringify(range)}`);
        const bound = parseVersion(match[2]);
        const order = compare(wanted, bound);
        switch (match[1]) {
          case '>=':
            return order >= 0;
          case '>':
            return order > 0;
          case '<=':
            return order <= 0;
          case '<':
            return order < 0;
          case '^':
            return order >= 0 && wanted[0] === bound[0];
          default:
            return order === 0;
        }
      }),
  );
}

describe('package.json', () => {
  it('is an ESM package for Node 20.3+, 22 and 24', () => {
    expect(manifest.type).toBe('module');
    const engine = manifest.engines?.['node'] ?? '';
    expect(satisfies('20.3.0', engine), engine).toBe(true);
    expect(satisfies('22.11.0', engine), engine).toBe(true);
    expect(satisfies('24.21.0', engine), engine).toBe(true);
    expect(satisfies('20.2.9', engine), engine).toBe(false);
  });

  it('exports exactly the public entries, each built from a source entry with its types', () => {
    const entries = Object.keys(manifest.exports ?? {}).filter((entry) => entry !== './package.json');
    expect(entries.sort()).toEqual(['.', './client', './schema', './server', './testing', './tinker', './training']);
    for (const entry of entries) {
      const target = manifest.exports?.[entry] as { types?: string; import?: string };
      expect(target.types, entry).toMatch(/^\.\/dist\/.*\.d\.ts$/);
      expect(target.import, entry).toMatch(/^\.\/dist\/.*\.js$/);
      // Conditions are matched in order: `types` must come before `import`.
      expect(Object.keys(target)[0], entry).toBe('types');
      const source = target.import?.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts') ?? '';
      expect(existsSync(new URL(source, root)), `${entry} -> ${source}`).toBe(true);
    }
  });

  it('has a `policyloop` command built from a source file with a node shebang', () => {
    const bin = manifest.bin?.['policyloop'] ?? '';
    expect(bin).toMatch(/^\.\/dist\/.*\.js$/);
    const source = new URL(bin.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'), root);
    expect(readFileSync(source, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
  });

  it('needs only zod, eventemitter3 (and commander for the bin) at run time; the local service’s parts are optional', () => {
    expect(Object.keys(manifest.dependencies ?? {}).sort()).toEqual(['commander', 'eventemitter3', 'zod']);
    const heavy = [
      'hono',
      '@hono/node-server',
      'better-sqlite3',
      '@tensorflow/tfjs-core',
      '@tensorflow/tfjs-backend-wasm',
      'p-queue',
    ];
    for (const name of heavy) {
      expect(manifest.optionalDependencies, name).toHaveProperty([name]);
      expect(manifest.dependencies ?? {}, name).not.toHaveProperty([name]);
    }
  });

  it('takes openai 6 or 7 as a peer', () => {
    const range = manifest.peerDependencies?.['openai'] ?? '';
    for (const version of ['6.0.0', '6.30.0', '7.0.0', '7.99.0'])
      expect(satisfies(version, range), `${version} in ${range}`).toBe(true);
    for (const version of ['5.23.0', '8.0.0']) expect(satisfies(version, range), `${version} in ${range}`).toBe(false);
  });

  it('`npm test` type-checks and lints before running every test; `npm run test:unit` runs the fast tier', () => {
    const test = manifest.scripts?.['test'] ?? '';
    const typecheck = manifest.scripts?.['typecheck'] ?? '';
    expect(test).toMatch(/^npm run typecheck && npm run lint && vitest run$/);
    expect(typecheck).toMatch(/\btsc --noEmit\b/);
    expect(manifest.scripts?.['test:unit']).toBe('vitest run --config vitest.unit.config.ts');
  });
});

describe('tsconfig.json', () => {
  it('maps each entry point to its source, so examples import `policyloop/...` as a user would', () => {
    const config = JSON.parse(readFileSync(new URL('tsconfig.json', root), 'utf8')) as {
      compilerOptions: { paths?: Record<string, string[]> };
    };
    const fromExports = Object.entries(manifest.exports ?? {})
      .filter(([entry]) => entry !== './package.json')
      .map(([entry, target]) => [
        `policyloop${entry.slice(1)}`,
        [(target as { import: string }).import.replace(/^\.\/dist\//, './src/').replace(/\.js$/, '.ts')],
      ]);
    expect(config.compilerOptions.paths).toEqual(Object.fromEntries(fromExports));
  });

  it('is strict, with the house flags, and resolves modules as Node ESM', () => {
    const config = JSON.parse(readFileSync(new URL('tsconfig.json', root), 'utf8')) as {
      compilerOptions: Record<string, unknown>;
    };
    expect(config.compilerOptions).toMatchObject({
      strict: true,
      noUncheckedIndexedAccess: true,
      exactOptionalPropertyTypes: true,
      verbatimModuleSyntax: true,
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
    });
  });
});

describe('the range check used above', () => {
  it('reads the forms it claims to', () => {
    expect(satisfies('6.1.0', '^6.0.0 || ^7.0.0')).toBe(true);
    expect(satisfies('8.0.0', '^6.0.0 || ^7.0.0')).toBe(false);
    expect(satisfies('20.3.0', '>=20.3')).toBe(true);
    expect(satisfies('7.5.0', '>=6.0.0 <8')).toBe(true);
    expect(() => satisfies('1.0.0', '~1.0.0')).toThrow(/Unsupported/);
  });
});
