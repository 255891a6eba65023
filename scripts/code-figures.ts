/**
 * Figures about the code, for notes such as an issue's closing note: the root entry's names (values
 * and types, read with the TypeScript compiler), the biggest class in src/ (lines and public
 * members), the longest function in src/, and how many test files are in the fast tier.
 *
 *   npx tsx scripts/code-figures.ts [repository directory]   (default: this repository)
 *
 * Another checkout works too (`git worktree add /tmp/before <commit>`), so figures before and
 * after a change come from one script. Lines are counted from the declaration's first line
 * (decorators and docstrings excluded) to its last.
 */
import path from 'node:path';
import ts from 'typescript';
import { ownSourcesProgram } from '../test/package/support/exports.js';
import { typeScriptFiles } from '../test/package/support/imports.js';

const repository = path.resolve(process.argv[2] ?? path.join(import.meta.dirname, '..'));
const src = path.join(repository, 'src');
const files = typeScriptFiles(src).filter((file) => !file.endsWith('.test.ts'));

/** The root entry's exported names, split into runtime values and type-only names. */
function rootNames(): { values: number; types: number; total: number } {
  const entry = path.join(src, 'index.ts');
  const program = ownSourcesProgram([entry]);
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  const moduleSymbol = source && checker.getSymbolAtLocation(source);
  if (!moduleSymbol) throw new Error(`cannot read the exports of ${entry}`);
  const exported = checker.getExportsOfModule(moduleSymbol);
  const isValue = (symbol: ts.Symbol): boolean => {
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    const typeOnly = (symbol.declarations ?? []).some(
      (declaration) =>
        (ts.isExportSpecifier(declaration) && (declaration.isTypeOnly || declaration.parent.parent.isTypeOnly)) ||
        (ts.isExportDeclaration(declaration) && declaration.isTypeOnly),
    );
    return !typeOnly && (target.flags & ts.SymbolFlags.Value) !== 0;
  };
  const values = exported.filter(isValue).length;
  return { values, types: exported.length - values, total: exported.length };
}

/** Lines a node spans in its file. */
function linesOf(node: ts.Node, source: ts.SourceFile): number {
  const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
  const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
  return end - start + 1;
}

interface Found {
  name: string;
  file: string;
  lines: number;
  publicMembers?: number;
}

/** The name a function-like node goes by: its own, its variable's, its property's, or `(anonymous)`. */
function functionName(node: ts.FunctionLikeDeclaration, owner: string | undefined): string {
  const own = node.name && !ts.isComputedPropertyName(node.name) ? node.name.getText() : undefined;
  const parent = node.parent;
  const assigned =
    (ts.isVariableDeclaration(parent) || ts.isPropertyDeclaration(parent) || ts.isPropertyAssignment(parent)) &&
    !ts.isComputedPropertyName(parent.name)
      ? parent.name.getText()
      : undefined;
  const name = own ?? assigned ?? '(anonymous)';
  return owner && (ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node) || ts.isAccessor(node) || assigned)
    ? `${owner}.${ts.isConstructorDeclaration(node) ? 'constructor' : name}`
    : name;
}

/** Public members of a class: not private, protected or #private; the constructor excluded. */
function publicMembers(node: ts.ClassLikeDeclaration): number {
  return node.members.filter((member) => {
    if (ts.isConstructorDeclaration(member) || ts.isClassStaticBlockDeclaration(member)) return false;
    if (member.name && ts.isPrivateIdentifier(member.name)) return false;
    const modifiers = ts.canHaveModifiers(member) ? (ts.getModifiers(member) ?? []) : [];
    return !modifiers.some(
      (modifier) => modifier.kind === ts.SyntaxKind.PrivateKeyword || modifier.kind === ts.SyntaxKind.ProtectedKeyword,
    );
  }).length;
}

/** The biggest class and the longest function of src/. */
function biggest(): { classes: Found[]; functions: Found[] } {
  const classes: Found[] = [];
  const functions: Found[] = [];
  for (const file of files) {
    const source = ts.createSourceFile(file, ts.sys.readFile(file) ?? '', ts.ScriptTarget.ES2022, true);
    const relative = path.relative(repository, file);
    const visit = (node: ts.Node, owner: string | undefined): void => {
      let nextOwner = owner;
      if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
        nextOwner = node.name?.text ?? '(anonymous class)';
        classes.push({
          name: nextOwner,
          file: relative,
          lines: linesOf(node, source),
          publicMembers: publicMembers(node),
        });
      } else if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        functions.push({
          name: functionName(node as ts.FunctionLikeDeclaration, owner),
          file: relative,
          lines: linesOf(node, source),
        });
      }
      ts.forEachChild(node, (child) => visit(child, nextOwner));
    };
    visit(source, undefined);
  }
  const byLines = (a: Found, b: Found) => b.lines - a.lines;
  return { classes: classes.sort(byLines), functions: functions.sort(byLines) };
}

/** Test files in all, and in the fast tier (`*.unit.test.ts`). */
function testFiles(): { all: number; unit: number } {
  const tests = ['test', 'src'].flatMap((folder) =>
    typeScriptFiles(path.join(repository, folder)).filter((file) => file.endsWith('.test.ts')),
  );
  return { all: tests.length, unit: tests.filter((file) => file.endsWith('.unit.test.ts')).length };
}

const names = rootNames();
const { classes, functions } = biggest();
const tests = testFiles();
const top = (found: Found[], count: number) =>
  found
    .slice(0, count)
    .map(
      (each) =>
        `  ${each.name} (${each.file}): ${each.lines} lines${each.publicMembers === undefined ? '' : `, ${each.publicMembers} public members`}`,
    )
    .join('\n');
console.log(`repository: ${repository}`);
console.log(`root entry names: ${names.total} (${names.values} values, ${names.types} types)`);
console.log(`biggest classes in src/ by lines:\n${top(classes, 3)}`);
console.log(`longest functions in src/:\n${top(functions, 3)}`);
console.log(`test files: ${tests.all}, of which fast tier (*.unit.test.ts): ${tests.unit}`);
