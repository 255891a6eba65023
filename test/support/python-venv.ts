/**
 * A pinned Python tool for a test: a Python >= 3.12 (python3.13, python3.12 or python3 on PATH, or
 * pyenv's), a venv built from a requirements file under the ignored `.cache/` folder and reused
 * while the file's hash (and the Python it was built for) is the same, and a way to run commands
 * with a time limit. The same recipe as the ART suite's (test/art/art.test.ts).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** A Python found, or why there is none. */
export type FoundPython = { python: string; version: string } | { reason: string };

const MINUTE = 60_000;

/** A Python >= 3.12 with `venv`: `preferred` first (an environment variable's value), then PATH, then pyenv's. */
export function findPython(preferred?: string | undefined): FoundPython {
  const candidates = [preferred, 'python3.13', 'python3.12', 'python3'];
  const versions = path.join(process.env['PYENV_ROOT'] ?? path.join(os.homedir(), '.pyenv'), 'versions');
  if (existsSync(versions))
    for (const version of readdirSync(versions).sort().reverse())
      candidates.push(path.join(versions, version, 'bin', 'python3'));
  for (const candidate of candidates) {
    if (candidate === undefined || candidate === '') continue;
    const probe = spawnSync(
      candidate,
      ['-c', 'import sys, venv; print(sys.version_info >= (3, 12), sys.version.split()[0], sys.executable, sep="\\n")'],
      { encoding: 'utf8', timeout: 20_000 },
    );
    const [ok, version, executable] = probe.status === 0 ? probe.stdout.trim().split('\n') : [];
    if (ok === 'True' && executable !== undefined && version !== undefined) return { python: executable, version };
  }
  return { reason: 'no Python >= 3.12 with venv on PATH or in pyenv' };
}

/** A venv built from a requirements file. */
export interface PinnedVenv {
  /** The venv folder (under `.cache/`). */
  readonly directory: string;
  /** The requirements file it is built from. */
  readonly requirements: string;
  /** The Python it is built with. */
  readonly python: { python: string; version: string };
}

/** The venv's python executable. */
export function venvPython(directory: string): string {
  return process.platform === 'win32'
    ? path.join(directory, 'Scripts', 'python.exe')
    : path.join(directory, 'bin', 'python');
}

function hashOf(venv: PinnedVenv): string {
  return createHash('sha256')
    .update(readFileSync(venv.requirements))
    .update(`\n${venv.python.python} ${venv.python.version}`)
    .digest('hex');
}

const HASH_FILE = 'requirements.sha256';

/** Whether the venv is built from the requirements as they are now, for this Python. */
export function venvIsCurrent(venv: PinnedVenv): boolean {
  const hashFile = path.join(venv.directory, HASH_FILE);
  return (
    existsSync(venvPython(venv.directory)) && existsSync(hashFile) && readFileSync(hashFile, 'utf8') === hashOf(venv)
  );
}

/** Undefined when the package index answers for `packageName`, else why not (asked only when a venv must be built). */
export async function indexProblem(packageName: string): Promise<string | undefined> {
  const index = (process.env['PIP_INDEX_URL'] ?? 'https://pypi.org/simple').replace(/\/+$/, '');
  try {
    const response = await fetch(`${index}/${packageName}/`, { signal: AbortSignal.timeout(15_000) });
    return response.ok ? undefined : `the package index ${index} answered ${response.status}`;
  } catch (error) {
    return `the package index ${index} is not reachable (${error instanceof Error ? error.message : String(error)})`;
  }
}

/** Runs a command to its end; rejects with its output when it fails or outlives `timeoutMs`. */
export function run(
  command: string,
  args: readonly string[],
  options: { timeoutMs: number; env?: NodeJS.ProcessEnv | undefined; cwd?: string | undefined },
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (signal !== null)
        reject(
          new Error(
            `${command} ${args.join(' ')} ended with ${signal}${signal === 'SIGKILL' ? ` (over ${options.timeoutMs} ms)` : ''}\n${stderr.slice(-4000)}`,
          ),
        );
      else resolve({ code: code ?? 1, stdout, stderr });
    });
  });
}

/**
 * The venv's python, building the venv first when it is not current: beside its final place, moved
 * in when whole, so that a half-built one is never reused.
 */
export async function ensureVenv(venv: PinnedVenv): Promise<string> {
  if (venvIsCurrent(venv)) return venvPython(venv.directory);
  const building = `${venv.directory}.building-${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(path.dirname(venv.directory), { recursive: true });
  const succeed = async (command: string, args: string[], timeoutMs: number): Promise<void> => {
    const result = await run(command, args, { timeoutMs });
    if (result.code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.code}):\n${result.stderr}`);
  };
  await succeed(venv.python.python, ['-m', 'venv', building], 5 * MINUTE);
  await succeed(
    venvPython(building),
    ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '-r', venv.requirements],
    20 * MINUTE,
  );
  writeFileSync(path.join(building, HASH_FILE), hashOf(venv));
  rmSync(venv.directory, { recursive: true, force: true });
  renameSync(building, venv.directory);
  return venvPython(venv.directory);
}
