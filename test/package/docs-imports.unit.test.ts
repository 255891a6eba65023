/**
 * The docs say nothing the package does not have: every name that a code block in README.md or
 * docs/*.md imports from a `policyloop` entry is exported by that entry (values and types).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { entries, exportedNames, root } from './support/exports.js';

const documents = [
  'README.md',
  ...readdirSync(path.join(root, 'docs'))
    .filter((file) => file.endsWith('.md'))
    .map((file) => `docs/${file}`),
];

/** `{ name, entry, document }` for every name imported from a policyloop entry in a document. */
function importedNames(): { name: string; entry: string; document: string }[] {
  const found: { name: string; entry: string; document: string }[] = [];
  for (const document of documents) {
    const text = readFileSync(path.join(root, document), 'utf8');
    for (const match of text.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'(policyloop(?:\/[\w-]+)?)'/g)) {
      const entry = match[3] as string;
      for (const part of (match[2] as string).split(',')) {
        const name = part
          .trim()
          .replace(/^type\s+/, '')
          .split(/\s+as\s+/)[0]
          ?.trim();
        if (name) found.push({ name, entry, document });
      }
    }
  }
  return found;
}

describe('imports shown in the docs', () => {
  it('name only what the entries export', () => {
    const exported = exportedNames();
    const imports = importedNames();
    expect(imports.length).toBeGreaterThan(20);
    const missing = imports
      .filter(({ name, entry }) => !(exported.get(entry) ?? []).includes(name))
      .map(({ name, entry, document }) => `${document}: ${name} from '${entry}'`);
    expect(missing).toEqual([]);
  });

  it('use only the package entries that exist', () => {
    const unknown = importedNames()
      .map(({ entry, document }) => `${document}: ${entry}`)
      .filter((line) => !Object.keys(entries).includes(line.split(': ')[1] as string));
    expect(unknown).toEqual([]);
  });
});
