/**
 * The one docstring test. Every symbol a user can import from a public entry point (`policyloop`,
 * `policyloop/training`, `policyloop/schema`, `policyloop/client`, `policyloop/server`, `policyloop/testing`), every export of the wire schemas, of the client and
 * of `src/internal/`, and every public member of their exported classes (and, in the client and
 * internal folders, interfaces) carries a docstring: the hover text in an editor is the first
 * documentation a user reads. A schema and the type of the same name share one docstring.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ownSourcesProgram, entries as publicEntries } from './support/exports.js';

const root = path.resolve(import.meta.dirname, '../..');
/** The public entry points: their exports, and the public members of exported classes. */
const entries = Object.values(publicEntries);
/** Folders where every export, and every public member of an exported class or interface, is documented. */
const folders = ['src/schema', 'src/client', 'src/client/resources', 'src/internal'];
const folderFiles = folders.flatMap((folder) =>
  readdirSync(path.join(root, folder))
    .filter((file) => file.endsWith('.ts'))
    .map((file) => `${folder}/${file}`),
);

let built: ts.Program | undefined;

/** One program over all checked files (our sources only), built once. */
function program(): ts.Program {
  built ??= ownSourcesProgram([...entries, ...folderFiles].map((file) => path.join(root, file)));
  return built;
}

/** Public members of a class (or, with `interfaces`, of an interface) that lack a docstring. */
function undocumentedMembers(declaration: ts.Declaration, interfaces: boolean): string[] {
  const members: readonly (ts.ClassElement | ts.TypeElement)[] = ts.isClassDeclaration(declaration)
    ? declaration.members
    : interfaces && ts.isInterfaceDeclaration(declaration)
      ? declaration.members
      : [];
  const missing: string[] = [];
  for (const member of members) {
    const modifiers = ts.canHaveModifiers(member) ? (ts.getModifiers(member) ?? []) : [];
    const hidden = modifiers.some(
      (modifier) => modifier.kind === ts.SyntaxKind.PrivateKeyword || modifier.kind === ts.SyntaxKind.ProtectedKeyword,
    );
    const name = member.name;
    if (hidden || !name || ts.isPrivateIdentifier(name) || ts.isConstructorDeclaration(member)) continue;
    if (modifiers.some((modifier) => modifier.kind === ts.SyntaxKind.OverrideKeyword)) continue;
    if (ts.getJSDocCommentsAndTags(member).length === 0) missing.push(name.getText());
  }
  return missing;
}

/** `file` and what it exports without a docstring (`interfaces`: check interface members too). */
function undocumented(files: readonly string[], interfaces: boolean): Map<string, string[]> {
  const checker = program().getTypeChecker();
  const hasDoc = (symbol: ts.Symbol): boolean =>
    symbol.getDocumentationComment(checker).some((part) => part.text.trim() !== '') ||
    (symbol.declarations ?? []).some((declaration) => ts.getJSDocCommentsAndTags(declaration).length > 0);
  const result = new Map<string, string[]>();
  for (const file of files) {
    const source = program().getSourceFile(path.join(root, file));
    const moduleSymbol = source && checker.getSymbolAtLocation(source);
    const missing = new Set<string>();
    // A file without exports (a side-effect module) has no module symbol and nothing to document.
    for (const exported of moduleSymbol ? checker.getExportsOfModule(moduleSymbol) : []) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const declaration = symbol.declarations?.[0];
      if (!declaration || declaration.getSourceFile().fileName.includes('node_modules')) continue;
      if (!hasDoc(symbol)) missing.add(exported.getName());
      for (const member of undocumentedMembers(declaration, interfaces)) missing.add(`${exported.getName()}.${member}`);
    }
    result.set(file, [...missing].sort());
  }
  return result;
}

describe('docstrings', () => {
  it('finds the schema, client and internal files it checks', () => {
    expect(folderFiles.length).toBeGreaterThan(20);
  });

  it('gives every export of the public entries, and every public class member, a docstring', () => {
    for (const [file, missing] of undocumented(entries, false)) expect(missing, file).toEqual([]);
  }, 120_000);

  it('gives every export of schema/, client/ and internal/, and their class and interface members, a docstring', () => {
    for (const [file, missing] of undocumented(folderFiles, true)) expect(missing, file).toEqual([]);
  }, 120_000);
});
