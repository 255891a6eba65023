/**
 * Every export of the client and of `src/internal/` carries a JSDoc docstring, and so does each
 * public member of the exported classes and interfaces (what an editor shows on hover).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const directories = ['../../src/client/', '../../src/client/resources/', '../../src/internal/'].map(
  (path) => new URL(path, import.meta.url),
);
const files = directories.flatMap((directory) =>
  readdirSync(directory)
    .filter((file) => file.endsWith('.ts'))
    .map((file) => new URL(file, directory)),
);

/** Names declared at `line` that must be documented: top-level exports and public class/interface members. */
function declaredName(line: string, insideExport: boolean): string | undefined {
  const exported =
    /^export (?:declare )?(?:abstract )?(?:async )?(?:const|let|function\*?|class|type|interface|enum) (\w+)/.exec(
      line,
    );
  if (exported?.[1]) return exported[1];
  if (!insideExport) return undefined;
  // Members two spaces in: fields, getters, methods, constructors; private (`#x`, `private`) ones are exempt.
  const member =
    /^ {2}(?:static )?(?:readonly )?(?:async )?(?:get |set )?\*?(\[Symbol\.[\w.]+\]|[A-Za-z_$][\w$]*)\??[(<:]/.exec(
      line,
    );
  if (member?.[1] === undefined || /^ {2}(?:private |protected )/.test(line)) return undefined;
  return member[1];
}

describe('documentation', () => {
  it('covers the client and internal folders', () => {
    expect(files.length).toBeGreaterThan(15);
  });

  it.each(files.map((file) => [file.pathname.replace(/^.*\/src\//, 'src/'), file] as const))('%s', (_name, file) => {
    const lines = readFileSync(file, 'utf8').split('\n');
    const undocumented: string[] = [];
    let previous = '';
    let owner: string | undefined;
    for (const line of lines) {
      if (/^export (?:declare )?(?:abstract )?(?:class|interface) /.test(line))
        owner = /(?:class|interface) (\w+)/.exec(line)?.[1];
      else if (/^\S/.test(line) && !line.startsWith('}')) owner = undefined;
      const name = declaredName(line, owner !== undefined);
      const documented = previous.endsWith('*/') || previous.startsWith('@');
      if (name !== undefined && !documented)
        undocumented.push(owner !== undefined && !line.startsWith('export') ? `${owner}.${name}` : name);
      if (line.trim() !== '' && !line.trim().startsWith('//')) previous = line.trim();
    }
    expect(undocumented).toEqual([]);
  });
});
