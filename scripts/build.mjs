#!/usr/bin/env node
/**
 * Builds dist/ with the repository's own TypeScript. `npm pack` runs it (prepack), also in a fresh
 * clone where nothing is installed yet: then it first installs the dev dependencies without their
 * install scripts (TypeScript and the type packages need none; better-sqlite3's native build is
 * only needed to run the local service, not to compile the package).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const run = (command, args) => execFileSync(command, args, { cwd: root, stdio: 'inherit' });

if (!existsSync(path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'))) {
  process.stderr.write('policyloop build: no node_modules yet, installing dependencies (without install scripts)\n');
  run(npm, ['ci', '--ignore-scripts', '--no-audit', '--no-fund']);
}
run(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json']);
// The BPE merges of policyloop/agent-chat are data the engine reads at run time.
cpSync(path.join(root, 'src', 'engine', 'data'), path.join(root, 'dist', 'engine', 'data'), { recursive: true });
// The dashboard's static page, styles and script are shipped as they are (no bundler).
cpSync(path.join(root, 'src', 'server', 'dashboard'), path.join(root, 'dist', 'server', 'dashboard'), {
  recursive: true,
});
