/**
 * The package's public entries and every name each exports (type-only ones included), read with
 * the TypeScript compiler: shared by the tests that check exported names.
 */
import path from 'node:path';
import ts from 'typescript';

/** The repository root. */
export const root = path.resolve(import.meta.dirname, '../../..');

/** The public entries: package export and source file. */
export const entries = {
  policyloop: 'src/index.ts',
  'policyloop/training': 'src/training.ts',
  'policyloop/schema': 'src/schema/index.ts',
  'policyloop/client': 'src/client/index.ts',
  'policyloop/server': 'src/server/index.ts',
  'policyloop/testing': 'src/testing/index.ts',
  'policyloop/tinker': 'src/tinker.ts',
} as const;

/**
 * A program over our own sources from `files`: files under node_modules (and the default libs) are
 * replaced by empty ones. That keeps it fast (no type of zod or the DOM is read) and changes
 * neither which names our modules export nor the docstrings they carry.
 */
export function ownSourcesProgram(files: readonly string[]): ts.Program {
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
  return ts.createProgram(files, options, host);
}

/** Every name each entry exports, type-only ones included. */
export function exportedNames(): Map<string, string[]> {
  const program = ownSourcesProgram(Object.values(entries).map((entry) => path.join(root, entry)));
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
