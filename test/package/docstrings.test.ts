/**
 * Every symbol a user can import from a public entry point (`policyloop`, `policyloop/schema`,
 * `policyloop/client`, `policyloop/server`, `policyloop/testing`), and every public member of an exported class, carries a docstring: the
 * hover text in an editor is the first documentation a user reads.
 */
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const entries = [
  'src/index.ts',
  'src/schema/index.ts',
  'src/client/index.ts',
  'src/server/index.ts',
  'src/testing/index.ts',
];

function undocumented(): string[] {
  const program = ts.createProgram(
    entries.map((entry) => path.join(root, entry)),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      skipLibCheck: true,
      noEmit: true,
    },
  );
  const checker = program.getTypeChecker();
  const missing = new Set<string>();
  const hasDoc = (symbol: ts.Symbol): boolean =>
    symbol.getDocumentationComment(checker).some((part) => part.text.trim() !== '') ||
    (symbol.declarations ?? []).some((declaration) => ts.getJSDocCommentsAndTags(declaration).length > 0);

  for (const entry of entries) {
    const source = program.getSourceFile(path.join(root, entry));
    const moduleSymbol = source && checker.getSymbolAtLocation(source);
    if (!moduleSymbol) throw new Error(`cannot read the exports of ${entry}`);
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const declaration = symbol.declarations?.[0];
      if (!declaration || declaration.getSourceFile().fileName.includes('node_modules')) continue;
      const where = `${entry} ${exported.getName()}`;
      if (!hasDoc(symbol)) missing.add(where);
      if (!(symbol.flags & ts.SymbolFlags.Class) || !ts.isClassDeclaration(declaration)) continue;
      for (const member of declaration.members) {
        const modifiers = ts.canHaveModifiers(member) ? (ts.getModifiers(member) ?? []) : [];
        const hidden = modifiers.some(
          (modifier) =>
            modifier.kind === ts.SyntaxKind.PrivateKeyword || modifier.kind === ts.SyntaxKind.ProtectedKeyword,
        );
        const name = member.name;
        if (hidden || !name || ts.isPrivateIdentifier(name) || ts.isConstructorDeclaration(member)) continue;
        if (modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.OverrideKeyword)) continue;
        if (ts.getJSDocCommentsAndTags(member).length === 0) missing.add(`${where}.${name.getText()}`);
      }
    }
  }
  return [...missing].sort();
}

describe('public API documentation', () => {
  it('gives every exported symbol and public class member a docstring', () => {
    expect(undocumented()).toEqual([]);
  }, 120_000);
});
