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
} as const;

/**
 * Every name each entry exports, type-only ones included. Only our own sources are read: files
 * under node_modules (and the default libs) are replaced by empty ones, which keeps this fast and
 * does not change which names our modules export.
 */
export function exportedNames(): Map<string, string[]> {
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
