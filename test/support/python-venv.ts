/**
 * Test support: a Python interpreter found on this machine and a venv built from a requirements
 * file, cached under the repo's ignored `.cache/` folder and rebuilt only when the requirements (or
 * the interpreter) change. Used by every suite whose client is a Python program: the Tinker suite
 * (test/support/skyrl-server.ts), the ART suite, the contract test and the Python endpoint test.
 *
 * The venv is built in place under a lock (a `<venv>.lock` folder holding the builder's pid), so
 * that two test files starting together build it once; the hash file is written last, so a build
 * that died half-way is never taken for a finished one.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const MINUTE = 60_000;

/** A Python interpreter that passed {@link findPython}'s probe. */
export interface FoundPython {
  /** Absolute path of the interpreter (`sys.executable`). */
  readonly python: string;
  /** Its full version, such as `3.12.1`. */
  readonly version: string;
}

/** What {@link findPython} looks for. */
export interface FindPythonOptions {
  /** Lowest accepted `[major, minor]`. */
  readonly min: readonly [number, number];
  /** First `[major, minor]` no longer accepted. */
  readonly below: readonly [number, number];
  /** An environment variable that names the interpreter to try first. */
  readonly envVar?: string | undefined;
  /** Says who needs it, for the reason given when none is found, such as `'skyrl 0.4.0'`. */
  readonly purpose: string;
}

/**
 * The first Python in the accepted range that also has the `venv` and `ensurepip` modules (Debian
 * splits them off into python3-venv): the interpreter named
 * by `envVar`, then `python3.N` for each accepted minor version in ascending order, then
 * `python3`, then every pyenv version (`$PYENV_ROOT/versions/*`, ascending). Lower versions come
 * first on purpose: they are the ones upstream wheels were built and measured for.
 *
 * @example
 * const found = findPython({ min: [3, 12], below: [3, 15], purpose: 'skyrl' });
 * if ('reason' in found) console.log(found.reason);
 */
export function findPython(options: FindPythonOptions): FoundPython | { reason: string } {
  const [minMajor, minMinor] = options.min;
  const [belowMajor, belowMinor] = options.below;
  const candidates: string[] = [];
  const named = options.envVar === undefined ? undefined : process.env[options.envVar];
  if (named !== undefined && named !== '') candidates.push(named);
  for (let minor = minMinor; minMajor === 3 && (belowMajor > 3 || minor < belowMinor); minor += 1) {
    candidates.push(`python3.${minor}`);
    if (minor > 40) break;
  }
  candidates.push('python3');
  const versions = path.join(process.env['PYENV_ROOT'] ?? path.join(os.homedir(), '.pyenv'), 'versions');
  if (existsSync(versions)) {
    const byVersion = (name: string) => name.split(/[.-]/).map((part) => Number.parseInt(part, 10) || 0);
    const sorted = readdirSync(versions).sort((a, b) => {
      const [x, y] = [byVersion(a), byVersion(b)];
      for (let index = 0; index < Math.max(x.length, y.length); index += 1) {
        const difference = (x[index] ?? 0) - (y[index] ?? 0);
        if (difference !== 0) return difference;
      }
      return 0;
    });
    for (const version of sorted) candidates.push(path.join(versions, version, 'bin', 'python3'));
  }
  const probe = [
    'import sys, venv, ensurepip',
    'ensurepip.version()',
    `ok = (${minMajor}, ${minMinor}) <= sys.version_info[:2] < (${belowMajor}, ${belowMinor})`,
    'print(ok, sys.version.split()[0], sys.executable, sep="\\n")',
  ].join('\n');
  for (const candidate of candidates) {
    const result = spawnSync(candidate, ['-c', probe], { encoding: 'utf8', timeout: 20_000 });
    const [ok, version, executable] = result.status === 0 ? result.stdout.trim().split('\n') : [];
    if (ok === 'True' && executable !== undefined && version !== undefined) return { python: executable, version };
  }
  return {
    reason: `no Python >= ${minMajor}.${minMinor} and < ${belowMajor}.${belowMinor} with venv (${options.purpose} needs it) on PATH or in pyenv`,
  };
}

/** The interpreter inside a venv. */
export function venvPython(venv: string): string {
  return process.platform === 'win32' ? path.join(venv, 'Scripts', 'python.exe') : path.join(venv, 'bin', 'python');
}

/** The folder of a venv's executables (`bin`, or `Scripts` on Windows). */
export function venvBin(venv: string): string {
  return path.dirname(venvPython(venv));
}

/**
 * Whether a package index answers for `packageName`: `undefined` when it does, else why not. Only
 * worth asking when a venv must be built.
 */
export async function packageIndexProblem(packageName: string): Promise<string | undefined> {
  const index = (process.env['UV_DEFAULT_INDEX'] ?? process.env['PIP_INDEX_URL'] ?? 'https://pypi.org/simple').replace(
    /\/+$/,
    '',
  );
  try {
    const response = await fetch(`${index}/${packageName}/`, { signal: AbortSignal.timeout(15_000) });
    await response.body?.cancel();
    return response.ok ? undefined : `the package index ${index} answered ${response.status} for ${packageName}`;
  } catch (error) {
    return `the package index ${index} is not reachable (${error instanceof Error ? error.message : String(error)})`;
  }
}

/**
 * Runs a command to its end and resolves to its output; rejects with the command, how it ended
 * and the tail of its stderr when it fails, outlives `timeoutMs` or `signal` aborts.
 */
export function runCommand(
  command: string,
  args: readonly string[],
  options: {
    timeoutMs: number;
    env?: NodeJS.ProcessEnv | undefined;
    cwd?: string | undefined;
    input?: string | undefined;
    signal?: AbortSignal | undefined;
    /** Reject when the command exits non-zero (it always rejects on a timeout or an abort). @default true */
    check?: boolean | undefined;
  },
): Promise<{ stdout: string; stderr: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    options.signal?.throwIfAborted();
    const child = spawn(command, args, {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
    let why: string | undefined;
    const stop = (reason: string) => {
      why = reason;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => stop(`over its ${options.timeoutMs} ms timeout`), options.timeoutMs);
    const onAbort = () => stop('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.once('error', (error) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      reject(new Error(`Expected ${command} to start; it failed: ${error.message}`, { cause: error }));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      if (why === undefined && (code === 0 || options.check === false)) resolve({ stdout, stderr, code });
      else
        reject(
          new Error(
            `Expected \`${command} ${args.join(' ')}\` to exit 0; it ended with ${signal ?? `code ${code}`}${why === undefined ? '' : ` (${why})`}\n${stderr.slice(-4000)}`,
          ),
        );
    });
  });
}

/** How {@link ensureVenv} builds a venv. */
export interface EnsureVenvOptions {
  /** The interpreter the venv is made from. */
  readonly python: FoundPython;
  /** The venv's folder. */
  readonly venv: string;
  /** The requirements file; its bytes (and the interpreter) key the cache. */
  readonly requirements: string;
  /**
   * Install with uv, pip-installed first at the version the requirements pin (`uv==X` must be a
   * line of the file), instead of pip. @default false
   */
  readonly useUv?: boolean | undefined;
  /** Limit for the whole build, lock wait included. @default 30 minutes */
  readonly timeoutMs?: number | undefined;
  /** Aborts the build (or the wait for another process's build). */
  readonly signal?: AbortSignal | undefined;
}

/** What {@link ensureVenv} did. */
export interface EnsuredVenv {
  /** The venv's interpreter. */
  readonly python: string;
  /** Whether this call built it (false: it was current, or another process just built it). */
  readonly built: boolean;
  /** Seconds this call spent, lock wait included. */
  readonly seconds: number;
}

const HASH_FILE = 'requirements.sha256';

/** The cache key of a venv: the requirements' bytes and the interpreter they were installed for. */
export function venvKey(requirements: string, python: FoundPython): string {
  return createHash('sha256')
    .update(readFileSync(requirements))
    .update(`\n${python.python} ${python.version}`)
    .digest('hex');
}

/** Whether `venv` was completely built from these requirements for this interpreter. */
export function venvIsCurrent(venv: string, requirements: string, python: FoundPython): boolean {
  const hashFile = path.join(venv, HASH_FILE);
  return (
    existsSync(venvPython(venv)) &&
    existsSync(hashFile) &&
    readFileSync(hashFile, 'utf8') === venvKey(requirements, python)
  );
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes `<venv>.lock` (waiting while a live process holds it); resolves to its release. */
async function takeLock(lock: string, deadline: number, signal: AbortSignal | undefined): Promise<() => void> {
  mkdirSync(path.dirname(lock), { recursive: true });
  for (;;) {
    signal?.throwIfAborted();
    try {
      mkdirSync(lock);
      writeFileSync(path.join(lock, 'pid'), String(process.pid));
      return () => rmSync(lock, { recursive: true, force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    let holder = Number.NaN;
    try {
      holder = Number.parseInt(readFileSync(path.join(lock, 'pid'), 'utf8'), 10);
    } catch {
      // The holder has made the folder but not written its pid yet: wait a little.
    }
    if (Number.isInteger(holder) && !processAlive(holder)) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline)
      throw new Error(`Expected the venv lock ${lock} to be released; process ${holder} still holds it`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/**
 * Makes `venv` current for `requirements` and `python`: reuses it when its hash file matches,
 * otherwise wipes it and builds it again (`python -m venv`, then pip, or uv when `useUv`).
 *
 * @example
 * const { python } = await ensureVenv({ python: found, venv: '.cache/x-venv', requirements: 'requirements.txt' });
 */
export async function ensureVenv(options: EnsureVenvOptions): Promise<EnsuredVenv> {
  const started = Date.now();
  const timeoutMs = options.timeoutMs ?? 30 * MINUTE;
  const deadline = started + timeoutMs;
  const { venv, requirements, python, signal } = options;
  const seconds = () => (Date.now() - started) / 1000;
  if (venvIsCurrent(venv, requirements, python)) return { python: venvPython(venv), built: false, seconds: seconds() };
  const release = await takeLock(`${venv}.lock`, deadline, signal);
  try {
    if (venvIsCurrent(venv, requirements, python))
      return { python: venvPython(venv), built: false, seconds: seconds() };
    rmSync(venv, { recursive: true, force: true });
    const left = () => Math.max(1, deadline - Date.now());
    await runCommand(python.python, ['-m', 'venv', venv], { timeoutMs: Math.min(left(), 5 * MINUTE), signal });
    const pythonInVenv = venvPython(venv);
    const pip = ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input'];
    if (options.useUv === true) {
      const uvPin = readFileSync(requirements, 'utf8')
        .split('\n')
        .map((line) => line.trim())
        .find((line) => /^uv==\S+$/.test(line));
      if (uvPin === undefined) throw new Error(`Expected a line \`uv==VERSION\` in ${requirements}; found none`);
      await runCommand(pythonInVenv, [...pip, uvPin], { timeoutMs: left(), signal });
      await runCommand(
        path.join(venvBin(venv), 'uv'),
        ['pip', 'install', '--python', pythonInVenv, '-r', requirements],
        { timeoutMs: left(), signal },
      );
    } else {
      await runCommand(pythonInVenv, [...pip, '-r', requirements], { timeoutMs: left(), signal });
    }
    writeFileSync(path.join(venv, HASH_FILE), venvKey(requirements, python));
    return { python: pythonInVenv, built: true, seconds: seconds() };
  } finally {
    release();
  }
}
