/**
 * An option's default is declared once, in its schema (`.default(...)`), and its docs say the same:
 * for every `optionsSchema<T>()({ ... })` in src/, each option whose schema has a default has a
 * `@default` tag on `T`'s property (what an editor shows on hover), and when the tag is a plain
 * value (`1000`, `300_000 (5 minutes)`, `'characters'`, `[]`) it equals the schema's. Tags in words
 * (`64 MiB`, "the client's `timeout`") are read by people only.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { root } from './support/exports.js';

/** Files of src/ (recursively) that declare options schemas. */
function schemaFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(folder, entry.name);
    if (entry.isDirectory()) return schemaFiles(file);
    return entry.name.endsWith('.ts') && readFileSync(file, 'utf8').includes('optionsSchema<') ? [file] : [];
  });
}

/** A program over our sources, with the ES lib (for `Pick`) and without node_modules (fast). */
function program(files: readonly string[]): ts.Program {
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    types: [],
    noEmit: true,
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const lib = path.dirname(ts.getDefaultLibFilePath(options));
  host.getSourceFile = (fileName, languageVersion, ...rest) =>
    fileName.includes(`${path.sep}node_modules${path.sep}`) && !fileName.startsWith(lib)
      ? ts.createSourceFile(fileName, '', languageVersion)
      : getSourceFile(fileName, languageVersion, ...rest);
  return ts.createProgram(files, options, host);
}

const NOT_A_VALUE = Symbol('not a plain value');

/** The value of a constant expression (literals, arithmetic, constants), or NOT_A_VALUE. */
function evaluate(node: ts.Expression, checker: ts.TypeChecker): unknown {
  if (ts.isParenthesizedExpression(node)) return evaluate(node.expression, checker);
  if (ts.isNumericLiteral(node)) return Number(node.text);
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (node.kind === ts.SyntaxKind.TrueKeyword) return true;
  if (node.kind === ts.SyntaxKind.FalseKeyword) return false;
  if (ts.isArrayLiteralExpression(node)) {
    const items = node.elements.map((item) => evaluate(item, checker));
    return items.includes(NOT_A_VALUE) ? NOT_A_VALUE : items;
  }
  if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.MinusToken) {
    const value = evaluate(node.operand, checker);
    return typeof value === 'number' ? -value : NOT_A_VALUE;
  }
  if (ts.isBinaryExpression(node)) {
    const left = evaluate(node.left, checker);
    const right = evaluate(node.right, checker);
    if (typeof left !== 'number' || typeof right !== 'number') return NOT_A_VALUE;
    if (node.operatorToken.kind === ts.SyntaxKind.AsteriskToken) return left * right;
    if (node.operatorToken.kind === ts.SyntaxKind.PlusToken) return left + right;
    if (node.operatorToken.kind === ts.SyntaxKind.MinusToken) return left - right;
    if (node.operatorToken.kind === ts.SyntaxKind.AsteriskAsteriskToken) return left ** right;
    return NOT_A_VALUE;
  }
  if (ts.isIdentifier(node)) {
    const declaration = declarationOf(node, checker);
    if (declaration && ts.isVariableDeclaration(declaration) && declaration.initializer) {
      return evaluate(declaration.initializer, checker);
    }
  }
  return NOT_A_VALUE;
}

/** The declaration an identifier names, through imports. */
function declarationOf(node: ts.Node, checker: ts.TypeChecker): ts.Declaration | undefined {
  let symbol = checker.getSymbolAtLocation(node);
  if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
  return symbol?.valueDeclaration ?? symbol?.declarations?.[0];
}

/** The value a `@default` tag states, or NOT_A_VALUE for words: `300_000 (5 minutes)` is 300000. */
function tagValue(text: string): unknown {
  const plain = text.replace(/\s*\(.*\)\s*$/s, '').trim();
  if (/^-?[\d_]+(\.\d+)?(e-?\d+)?$/.test(plain)) return Number(plain.replaceAll('_', ''));
  if (plain === 'Infinity') return Number.POSITIVE_INFINITY;
  if (plain === 'true' || plain === 'false') return plain === 'true';
  if (/^'[^']*'$/.test(plain)) return plain.slice(1, -1);
  if (plain === '[]' || plain === '{}') return JSON.parse(plain);
  return NOT_A_VALUE;
}

/** The argument of the outermost `.default(...)` of a field's schema chain, if any. */
function defaultArgument(field: ts.Expression): ts.Expression | undefined {
  let node: ts.Expression = field;
  while (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
    if (node.expression.name.text === 'default') return node.arguments[0];
    node = node.expression.expression;
  }
  return undefined;
}

/** The fields of a shape: its properties, and those of the shapes spread into it. */
function shapeFields(shape: ts.Expression, checker: ts.TypeChecker): Map<string, ts.Expression> {
  const fields = new Map<string, ts.Expression>();
  if (ts.isIdentifier(shape)) {
    const declaration = declarationOf(shape, checker);
    if (declaration && ts.isVariableDeclaration(declaration) && declaration.initializer) {
      return shapeFields(declaration.initializer, checker);
    }
    return fields;
  }
  if (!ts.isObjectLiteralExpression(shape)) return fields;
  for (const property of shape.properties) {
    if (ts.isSpreadAssignment(property)) {
      for (const [name, field] of shapeFields(property.expression, checker)) fields.set(name, field);
    } else if (ts.isPropertyAssignment(property) && ts.isIdentifier(property.name)) {
      fields.set(property.name.text, property.initializer);
    }
  }
  return fields;
}

interface Declared {
  /** `file: Interface.option`. */
  readonly where: string;
  readonly schemaDefault: unknown;
  /** The `@default` tag's text, or undefined without one. */
  readonly tag: string | undefined;
}

/** Every option with a schema default, in every `optionsSchema<T>()(shape)` of src/. */
function declaredDefaults(): Declared[] {
  const files = schemaFiles(path.join(root, 'src'));
  const built = program(files);
  const checker = built.getTypeChecker();
  const found: Declared[] = [];
  for (const file of files) {
    const source = built.getSourceFile(file);
    if (!source) continue;
    const visit = (node: ts.Node): void => {
      // optionsSchema<T>()(shape)
      if (
        ts.isCallExpression(node) &&
        ts.isCallExpression(node.expression) &&
        ts.isIdentifier(node.expression.expression) &&
        node.expression.expression.text === 'optionsSchema' &&
        node.expression.typeArguments?.[0] &&
        node.arguments[0]
      ) {
        const typeNode = node.expression.typeArguments[0];
        const type = checker.getTypeFromTypeNode(typeNode);
        for (const [name, field] of shapeFields(node.arguments[0], checker)) {
          const argument = defaultArgument(field);
          if (argument === undefined) continue;
          const property = checker.getPropertyOfType(type, name);
          const tag = property?.getJsDocTags(checker).find((item) => item.name === 'default');
          found.push({
            where: `${path.relative(root, file)}: ${typeNode.getText(source)}.${name}`,
            schemaDefault: evaluate(argument, checker),
            tag: tag === undefined ? undefined : ts.displayPartsToString(tag.text),
          });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

describe('option defaults: declared in the schema, stated in the docs', () => {
  const declared = declaredDefaults();

  it('finds the options schemas of src/ and their defaults', () => {
    expect(declared.length).toBeGreaterThan(40);
    expect(declared.map((item) => item.where)).toContain(
      'src/rollout/gather-trajectory-groups.ts: GatherOptions<unknown>.groupSize',
    );
  });

  it('every option with a default says it in a @default tag', () => {
    expect(declared.filter((item) => item.tag === undefined).map((item) => item.where)).toEqual([]);
  });

  it('a @default tag that is a plain value is the schema default', () => {
    const compared = declared.filter(
      (item) => item.tag !== undefined && tagValue(item.tag) !== NOT_A_VALUE && item.schemaDefault !== NOT_A_VALUE,
    );
    expect(compared.length).toBeGreaterThan(25);
    const differing = compared
      .filter((item) => JSON.stringify(tagValue(item.tag as string)) !== JSON.stringify(item.schemaDefault))
      .map((item) => `${item.where}: @default ${item.tag}, schema ${JSON.stringify(item.schemaDefault)}`);
    expect(differing).toEqual([]);
  });
});
