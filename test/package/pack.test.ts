/**
 * `npm pack` as a contributor runs it on a fresh clone (nothing installed yet), then the tarball
 * installed into an empty project the way a user installs it, without the optional local-service
 * parts. Proves that the build step installs what it needs, that the tarball carries the docs and
 * examples its README links to, and that every public entry resolves from the installed package.
 * Then README's Install section, run as printed in an empty directory: its commands make an ESM
 * project, install the tarball with `openai` and `tsx` (optional parts included) and run the
 * quickstart there, which trains against the local service.
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

// Three installed projects and a clone's node_modules: removing them takes minutes on a busy disk.
afterAll(() => rmSync(work, { recursive: true, force: true }), 600_000);

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

/** The shell block of README's "## Install" section, split at its `# 1.`, `# 2.`, `# 3.` comments. */
function readmeInstallSteps(): string[][] {
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Install\n'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) throw new Error("README's Install section has no sh block");
  const steps: string[][] = [];
  for (const line of block.split('\n')) {
    if (/^# \d\./.test(line)) steps.push([]);
    else if (line.trim() !== '' && !line.startsWith('#')) steps[steps.length - 1]?.push(line);
  }
  return steps;
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

  // Installs the optional parts from the registry (npm's cache first) and, on Node 20 and 22,
  // builds better-sqlite3: minutes on a loaded 2-core machine.
  it("follows README's Install section into an empty directory and runs the quickstart there", () => {
    const [clone, project, quickstart] = readmeInstallSteps();
    const { version, repository } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      version: string;
      repository: { url: string };
    };
    // Step 1 clones the repository package.json names and packs it: what the first test did.
    expect(clone).toEqual([`git clone ${repository.url.replace(/^git\+/, '')}`, 'cd policyloop && npm pack && cd ..']);
    const home = path.join(work, 'readme');
    execFileSync('mkdir', ['-p', path.join(home, 'policyloop')]);
    cpSync(tarball, path.join(home, 'policyloop', `policyloop-${version}.tgz`));
    // Steps 2 and 3, as printed, one shell.
    const script = ['set -euo pipefail', ...(project ?? []), ...(quickstart ?? [])].join('\n');
    expect(script).toContain('npx tsx train.ts');
    const environment: NodeJS.ProcessEnv = { ...process.env, ...quiet, npm_config_prefer_offline: 'true' };
    for (const name of ['WANDB_API_KEY', 'POLICYLOOP_API_KEY', 'POLICYLOOP_BASE_URL']) delete environment[name];
    const output = execFileSync('bash', ['-c', script], {
      cwd: home,
      encoding: 'utf8',
      env: environment,
      stdio: 'pipe',
      timeout: 900_000,
    });
    const manifest = JSON.parse(readFileSync(path.join(home, 'my-agent', 'package.json'), 'utf8')) as {
      type?: string;
      dependencies?: Record<string, string>;
    };
    expect(manifest.type).toBe('module');
    expect(Object.keys(manifest.dependencies ?? {}).sort()).toEqual(['openai', 'policyloop', 'tsx']);
    expect(output.match(/^step \d+: mean reward/gm)).toHaveLength(12);
    expect(output).toMatch(/^history: .*quickstart.*history\.jsonl$/m);
  }, 900_000);
});
