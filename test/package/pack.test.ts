/**
 * `npm pack` as a contributor runs it on a fresh clone (nothing installed yet), then the tarball
 * installed into an empty project the way a user installs it, without the optional local-service
 * parts. Proves that the build step installs what it needs, that the tarball carries the docs and
 * examples its README links to, and that every public entry resolves from the installed package.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const work = mkdtempSync(path.join(tmpdir(), 'policyloop-pack-'));
const quiet = { NO_COLOR: '1', npm_config_loglevel: 'error', npm_config_fund: 'false', npm_config_audit: 'false' };

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The files a fresh clone has: tracked, plus new ones git does not ignore. */
function cloneWorkingTree(target: string): void {
  const listed = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: root, encoding: 'utf8' });
  for (const file of listed.split('\0').filter((name) => name !== '')) {
    try {
      cpSync(path.join(root, file), path.join(target, file));
    } catch (error) {
      // A file deleted in the working tree but still tracked: a clone of this tree would not have it.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

function run(command: string, args: string[], cwd: string): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, ...quiet }, stdio: 'pipe' });
}

describe('npm pack from a fresh clone', () => {
  const clone = path.join(work, 'clone');
  let tarball = '';

  // An install of the build's dev dependencies and a full tsc build: minutes on a loaded 2-core machine.
  it('builds dist/ without a prior install and packs docs, examples, README and CHANGELOG', () => {
    cloneWorkingTree(clone);
    expect(readdirSync(clone)).not.toContain('node_modules');
    run(npm, ['pack', '--silent'], clone);
    const name = readdirSync(clone).find((file) => file.endsWith('.tgz'));
    expect(name).toBeDefined();
    tarball = path.join(clone, name as string);
    const files = run('tar', ['tzf', tarball], work).split('\n');
    for (const expected of [
      'package/dist/index.js',
      'package/dist/index.d.ts',
      'package/dist/cli/main.js',
      'package/README.md',
      'package/CHANGELOG.md',
      'package/docs/training.md',
      'package/docs/api/openapi.json',
      'package/examples/quickstart.ts',
    ]) {
      expect(files, expected).toContain(expected);
    }
    // Every relative link of the packed README points at a file that is in the tarball.
    const readme = readFileSync(path.join(clone, 'README.md'), 'utf8');
    const links = [...readme.matchAll(/\]\(((?!https?:|#)[^)\s]+)\)/g)].map((match) => match[1] as string);
    expect(links.length).toBeGreaterThan(5);
    for (const link of links) expect(files, `README links ${link}`).toContain(`package/${link.replace(/#.*$/, '')}`);
  }, 300_000);

  it('installs into an empty project without optional dependencies, and every entry loads', () => {
    const project = path.join(work, 'user-project');
    cpSync(tarball, path.join(work, 'policyloop.tgz'));
    execFileSync('mkdir', ['-p', project]);
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'user-project', type: 'module' }));
    run(
      npm,
      ['install', '--omit=optional', '--no-package-lock', path.join(work, 'policyloop.tgz'), 'openai@^6'],
      project,
    );
    const script = [
      "const root = await import('policyloop');",
      "const training = await import('policyloop/training');",
      "const schema = await import('policyloop/schema');",
      "const client = await import('policyloop/client');",
      "const testing = await import('policyloop/testing');",
      'console.log(JSON.stringify({',
      '  root: typeof root.TrainableModel, training: typeof training.LogBatcher,',
      '  schema: typeof schema.TrajectoryGroup?.parse,',
      '  client: typeof client.TrainingClient, testing: typeof testing.makeChoice }));',
    ].join('\n');
    const printed = run(process.execPath, ['--input-type=module', '-e', script], project);
    expect(JSON.parse(printed.trim())).toEqual({
      root: 'function',
      training: 'function',
      schema: 'function',
      client: 'function',
      testing: 'function',
    });
  });
});
