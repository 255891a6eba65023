/**
 * A Python >= 3.12 and a venv built from a requirements file, cached under `.cache/` (rebuilt when
 * the file or the Python changes), for tests that run a Python program in a child process. Without
 * such a Python, or without a package index to build the venv from, a test skips with the reason,
 * unless its `require` environment variable is `1` (CI sets it), which makes either a failure.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const MINUTE = 60_000;

/** A Python >= 3.12 and its full version, or why there is none. */
export function findPython(): { python: string; version: string } | { reason: string } {
  const candidates = [process.env['POLICYLOOP_PYTHON'], 'python3.13', 'python3.12', 'python3'];
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

/** The Python of a venv. */
export function venvPython(venv: string): string {
  return process.platform === 'win32' ? path.join(venv, 'Scripts', 'python.exe') : path.join(venv, 'bin', 'python');
}

/** A cached venv of `requirements` at `venv`, built with `python`. */
export class CachedVenv {
  constructor(
    readonly venv: string,
    readonly requirements: string,
    readonly python: { python: string; version: string },
  ) {}

  /** The cache key: the requirements and the Python they were installed for. */
  hash(): string {
    return createHash('sha256')
      .update(readFileSync(this.requirements))
      .update(`\n${this.python.python} ${this.python.version}`)
      .digest('hex');
  }

  /** Whether the venv is built for the current requirements and Python. */
  isCurrent(): boolean {
    const hashFile = path.join(this.venv, 'requirements.sha256');
    return existsSync(venvPython(this.venv)) && existsSync(hashFile) && readFileSync(hashFile, 'utf8') === this.hash();
  }

  /** Builds the venv beside its place and moves it in (a half-built one is never reused); returns its Python. */
  async ensure(): Promise<string> {
    if (this.isCurrent()) return venvPython(this.venv);
    const building = `${this.venv}.building-${process.pid}`;
    rmSync(building, { recursive: true, force: true });
    mkdirSync(path.dirname(this.venv), { recursive: true });
    await runToEnd(this.python.python, ['-m', 'venv', building], 5 * MINUTE);
    await runToEnd(
      venvPython(building),
      ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '-r', this.requirements],
      20 * MINUTE,
    );
    writeFileSync(path.join(building, 'requirements.sha256'), this.hash());
    rmSync(this.venv, { recursive: true, force: true });
    renameSync(building, this.venv);
    return venvPython(this.venv);
  }
}

/** Whether the package index answers (asked only when a venv must be built): undefined, or why not. */
export async function indexUnreachable(packageName: string): Promise<string | undefined> {
  const index = (process.env['PIP_INDEX_URL'] ?? 'https://pypi.org/simple').replace(/\/+$/, '');
  try {
    const response = await fetch(`${index}/${packageName}/`, { signal: AbortSignal.timeout(15_000) });
    return response.ok ? undefined : `the package index ${index} answered ${response.status}`;
  } catch (error) {
    return `the package index ${index} is not reachable (${error instanceof Error ? error.message : String(error)})`;
  }
}

/** Runs a command to its end; rejects with its output when it fails or outlives `timeoutMs`. */
function runToEnd(command: string, args: string[], timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else
        reject(
          new Error(`${command} ${args.join(' ')} ended with ${signal ?? `code ${code}`}\n${output.slice(-4000)}`),
        );
    });
  });
}
