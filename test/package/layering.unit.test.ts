/**
 * The folders of `src/` import each other only downwards, as docs/architecture.md draws them.
 * Every `import`, `export … from`, `import()` and `import('…')` type in src/**\/*.ts is read with
 * the TypeScript parser, mapped to the top folder it reaches, and checked against the allowed
 * matrix below; the folder graph must have no cycle. A failure names the file and the import.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { type ImportKind, importsOf, typeScriptFiles } from './support/imports.js';

const src = path.resolve(import.meta.dirname, '../../src');

/** One import of one source file. */
interface Edge {
  /** The importing file, relative to the repository (`src/rewards/relative-judge.ts`). */
  file: string;
  /** The specifier as written. */
  specifier: string;
  /** Top folder of the importer (`rewards`), or `index.ts` for the root entry. */
  from: string;
  /** Top folder of the target. */
  to: string;
  kind: ImportKind;
}

/** A folder may import these folders: every kind, or only the kinds listed (and maybe only from some files). */
type Rule = { folder: string; kinds?: readonly ImportKind[]; files?: readonly string[] };

const any = (...folders: string[]): Rule[] => folders.map((folder) => ({ folder }));
const typesOnly = (folder: string): Rule => ({ folder, kinds: ['type'] });

/** Which folders each folder may import (itself always). Keep in step with docs/architecture.md. */
const allowed: Record<string, Rule[] | 'anything'> = {
  schema: [],
  internal: [typesOnly('schema')],
  client: any('schema', 'internal'),
  rewards: [...any('schema', 'internal'), typesOnly('client')],
  rollout: [...any('schema', 'internal', 'rewards'), typesOnly('client')],
  training: any('schema', 'internal', 'client', 'rollout', 'rewards'),
  tools: any('schema', 'internal'),
  environments: any('schema', 'internal', 'client', 'rollout', 'rewards', 'training', 'tools'),
  backends: [
    ...any('schema', 'internal', 'client', 'rollout', 'rewards', 'training', 'text'),
    // The local service is loaded lazily, by the local backend only: `policyloop` stays light.
    ...['server', 'engine'].map((folder) => ({
      folder,
      kinds: ['dynamic', 'type'] as const,
      files: ['src/backends/local-backend.ts'],
    })),
    // The Tinker engine (itself loaded lazily; its sampling and training sides in their own files)
    // implements the engine's interface and builds its training data with the engine's pure data
    // builders; it loads no tfjs.
    {
      folder: 'engine',
      files: [
        'src/backends/tinker/tinker-engine.ts',
        'src/backends/tinker/sampling-sessions.ts',
        'src/backends/tinker/training-jobs.ts',
      ],
    },
  ],
  text: any('schema', 'internal'),
  engine: any('schema', 'internal', 'text'),
  server: any('schema', 'internal', 'engine'),
  testing: 'anything',
  cli: 'anything',
  'index.ts': any(
    'schema',
    'internal',
    'client',
    'rollout',
    'rewards',
    'training',
    'backends',
    'tools',
    'environments',
  ),
};

/** The top folder of a path under `src/` (`index.ts` for a file directly in it), or undefined outside. */
function topFolder(file: string): string | undefined {
  const relative = path.relative(src, file);
  if (relative.startsWith('..') || path.isAbsolute(relative)) return undefined;
  const [first, ...rest] = relative.split(path.sep);
  return rest.length === 0 ? 'index.ts' : first;
}

/** The top folder a specifier reaches from `file`, or undefined for a package outside ours. */
function targetFolder(file: string, specifier: string): string | undefined {
  if (specifier.startsWith('.')) return topFolder(path.resolve(path.dirname(file), specifier));
  const self = /^policyloop(?:\/(\w+))?$/.exec(specifier); // importing ourselves by package name
  if (self) return self[1] ?? 'index.ts';
  return undefined;
}

/** Every import between two different top folders of `src/`. */
function crossFolderEdges(): Edge[] {
  return typeScriptFiles(src).flatMap((file) => {
    const from = topFolder(file)!;
    return importsOf(file).flatMap(({ specifier, kind }) => {
      const to = targetFolder(file, specifier);
      if (to === undefined || to === from) return [];
      return [{ file: path.relative(path.dirname(src), file), specifier, from, to, kind }];
    });
  });
}

/** The edges the matrix does not allow, each as a sentence naming the file and the import. */
function violations(edges: readonly Edge[]): string[] {
  return edges.flatMap((edge) => {
    const rules = allowed[edge.from];
    if (rules === 'anything') return [];
    const describeRules = (rules ?? [])
      .map(
        (rule) =>
          `${rule.folder}${rule.kinds ? ` (${rule.kinds.join('/')} only)` : ''}${rule.files ? ` from ${rule.files.join(', ')}` : ''}`,
      )
      .join(', ');
    const ok = (rules ?? []).some(
      (rule) =>
        rule.folder === edge.to &&
        (rule.kinds === undefined || rule.kinds.includes(edge.kind)) &&
        (rule.files === undefined || rule.files.includes(edge.file)),
    );
    if (ok) return [];
    const kind =
      edge.kind === 'static' ? 'imports' : edge.kind === 'dynamic' ? 'dynamically imports' : 'imports types from';
    return [
      `${edge.file} ${kind} '${edge.specifier}' (${edge.to}); ${edge.from} may import: ${describeRules || 'nothing of ours'}`,
    ];
  });
}

/** The cycles of the folder graph, each as `a -> b -> a` with one import per arrow. */
function cycles(edges: readonly Edge[]): string[] {
  const graph = new Map<string, Map<string, Edge>>();
  for (const edge of edges) {
    const targets = graph.get(edge.from) ?? new Map<string, Edge>();
    if (!targets.has(edge.to)) targets.set(edge.to, edge);
    graph.set(edge.from, targets);
  }
  const found: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (folder: string): void => {
    state.set(folder, 'open');
    stack.push(folder);
    for (const [next] of graph.get(folder) ?? []) {
      if (state.get(next) === 'open') {
        const loop = [...stack.slice(stack.indexOf(next)), next];
        const via = loop
          .slice(0, -1)
          .map((each, index) => graph.get(each)?.get(loop[index + 1]!))
          .map((edge) => `${edge?.file} imports '${edge?.specifier}'`);
        found.push(`${loop.join(' -> ')} (${via.join('; ')})`);
      } else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(folder, 'done');
  };
  for (const folder of [...graph.keys()].sort()) if (!state.has(folder)) visit(folder);
  return found;
}

describe('layering of src/', () => {
  const edges = crossFolderEdges();

  it('reads the imports of every folder, of every kind', () => {
    expect(edges.length).toBeGreaterThan(100);
    expect(new Set(edges.map((edge) => edge.kind))).toEqual(new Set(['static', 'dynamic', 'type']));
  });

  it('has a rule for every top folder of src/', () => {
    const folders = new Set(typeScriptFiles(src).map((file) => topFolder(file)!));
    expect([...folders].filter((folder) => !(folder in allowed))).toEqual([]);
  });

  it('imports only what the matrix allows', () => {
    expect(violations(edges)).toEqual([]);
  });

  it('has no cycle between folders', () => {
    expect(cycles(edges)).toEqual([]);
  });

  it('the checks catch what they are for', () => {
    const edge = (file: string, specifier: string, kind: ImportKind = 'static'): Edge => ({
      file,
      specifier,
      from: file.split('/')[1]!,
      to: path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)).split('/')[1]!,
      kind,
    });
    expect(violations([edge('src/rewards/judge.ts', '../rollout/x.js')])).toEqual([
      "src/rewards/judge.ts imports '../rollout/x.js' (rollout); rewards may import: schema, internal, client (type only)",
    ]);
    expect(violations([edge('src/rollout/x.ts', '../client/index.js')])).toHaveLength(1); // values of client
    expect(violations([edge('src/rollout/x.ts', '../client/index.js', 'type')])).toEqual([]);
    expect(violations([edge('src/backends/local-backend.ts', '../server/index.js')])).toHaveLength(1); // static
    expect(violations([edge('src/backends/local-backend.ts', '../server/index.js', 'dynamic')])).toEqual([]);
    expect(violations([edge('src/backends/other.ts', '../server/index.js', 'dynamic')])).toHaveLength(1);
    expect(violations([edge('src/training/x.ts', '../backends/local-backend.js')])).toHaveLength(1);
    expect(
      cycles([edge('src/a/x.ts', '../b/y.js'), edge('src/b/y.ts', '../c/z.js'), edge('src/c/z.ts', '../b/w.js')]),
    ).toEqual(["b -> c -> b (src/b/y.ts imports '../c/z.js'; src/c/z.ts imports '../b/w.js')"]);
  });
});
