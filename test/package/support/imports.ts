/**
 * Every import of a TypeScript file, read with the TypeScript parser (no type checking): shared by
 * the layering test of src/ and the test of how tests import the package.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** How an import loads its target: at module load, only when called, or not at all (types). */
export type ImportKind = 'static' | 'dynamic' | 'type';

/** Every `.ts` file under `directory`, recursively. */
export function typeScriptFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) return typeScriptFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** Every import of one file (`import`, `export … from`, `import()`, `import('…')` types), with its kind. */
export function importsOf(file: string): Array<{ specifier: string; kind: ImportKind }> {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const found: Array<{ specifier: string; kind: ImportKind }> = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      // `import { type A }` still loads the module under verbatimModuleSyntax; only `import type` does not.
      found.push({ specifier: node.moduleSpecifier.text, kind: node.importClause?.isTypeOnly ? 'type' : 'static' });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push({ specifier: node.moduleSpecifier.text, kind: node.isTypeOnly ? 'type' : 'static' });
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      found.push({ specifier: node.arguments[0].text, kind: 'dynamic' });
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      found.push({ specifier: node.argument.literal.text, kind: 'type' });
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const expression = node.moduleReference.expression;
      if (ts.isStringLiteral(expression)) found.push({ specifier: expression.text, kind: 'static' });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}
