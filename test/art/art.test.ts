/**
 * OpenPipe ART conformance: the hosted service's own Python client (`openpipe-art`, pinned in
 * requirements.txt), unchanged, trains against the real `policyloop serve` on loopback.
 *
 * The suite finds a Python >= 3.12 (python3.13, python3.12 or python3 on PATH, or pyenv's), builds
 * a venv from requirements.txt in .cache/art-venv (reused while the file's hash matches), starts
 * the CLI on a free port with a temp data dir, runs art_script.py (an ART user's script) and
 * asserts on the JSON summary it prints. Without such a Python, or without a package index to
 * build the venv from, it skips with one line saying why, unless POLICYLOOP_REQUIRE_ART=1 (CI
 * sets it in .ci/run), which makes either a failure.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const MAIN = path.join(ROOT, 'src/cli/main.ts');
const REQUIREMENTS = path.join(HERE, 'requirements.txt');
const SCRIPT = path.join(HERE, 'art_script.py');
const VENV = path.join(ROOT, '.cache', 'art-venv');
const HASH_FILE = path.join(VENV, 'requirements.sha256');
const REQUIRED = process.env['POLICYLOOP_REQUIRE_ART'] === '1';
const API_KEY = 'art-conformance-key';
/**
 * Extra `policyloop serve` options the file:// SFT step needs: it writes its JSONL under
 * `<dataDir>/sft/`, outside the models' own `sft-data` folders, so that folder is made a training
 * data root (file:// reads nothing else).
 */
function sftServeOptions(dataDir: string): string[] {
  return ['--training-data-root', path.join(dataDir, 'sft')];
}
const MINUTE = 60_000;

/** A Python >= 3.12 and its full version, or why there is none. */
function findPython(): { python: string; version: string } | { reason: string } {
  const candidates = [process.env['POLICYLOOP_ART_PYTHON'], 'python3.13', 'python3.12', 'python3'];
  const pyenv = process.env['PYENV_ROOT'] ?? path.join(os.homedir(), '.pyenv');
  const versions = path.join(pyenv, 'versions');
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
  return { reason: 'no Python >= 3.12 with venv (openpipe-art needs it) on PATH or in pyenv' };
}

const found = findPython();

/** The venv's cache key: the requirements and the Python they were installed for. */
function requirementsHash(): string {
  const python = 'python' in found ? `${found.python} ${found.version}` : '';
  return createHash('sha256').update(readFileSync(REQUIREMENTS)).update(`\n${python}`).digest('hex');
}

function venvPython(venv: string): string {
  return process.platform === 'win32' ? path.join(venv, 'Scripts', 'python.exe') : path.join(venv, 'bin', 'python');
}

function venvIsCurrent(): boolean {
  return (
    existsSync(venvPython(VENV)) && existsSync(HASH_FILE) && readFileSync(HASH_FILE, 'utf8') === requirementsHash()
  );
}

/** Whether the package index answers (only asked when the venv must be built). */
async function indexReachable(): Promise<string | undefined> {
  const index = (process.env['PIP_INDEX_URL'] ?? 'https://pypi.org/simple').replace(/\/+$/, '');
  try {
    const response = await fetch(`${index}/openpipe-art/`, { signal: AbortSignal.timeout(15_000) });
    return response.ok ? undefined : `the package index ${index} answered ${response.status}`;
  } catch (error) {
    return `the package index ${index} is not reachable (${error instanceof Error ? error.message : String(error)})`;
  }
}

let skipReason = 'reason' in found ? found.reason : undefined;
if (skipReason === undefined && !venvIsCurrent()) skipReason = await indexReachable();
if (skipReason !== undefined) {
  if (REQUIRED) throw new Error(`POLICYLOOP_REQUIRE_ART=1 but the ART suite cannot run: ${skipReason}`);
  console.log(`ART conformance skipped: ${skipReason}`);
}

/** Runs a command to its end; rejects with its output when it fails or outlives `timeoutMs`. */
function run(command: string, args: string[], timeoutMs: number, env: NodeJS.ProcessEnv = process.env, cwd = ROOT) {
  return new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(command, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve({ stdout, stderr });
      else
        reject(
          new Error(
            `${command} ${args.join(' ')} ended with ${signal ?? `code ${code}`}${signal === 'SIGKILL' ? ` (over ${timeoutMs} ms)` : ''}\n${stderr.slice(-4000)}`,
          ),
        );
    });
  });
}

/** Builds the venv beside its final place and moves it in, so a half-built one is never reused. */
async function ensureVenv(python: string): Promise<string> {
  if (venvIsCurrent()) return venvPython(VENV);
  const building = `${VENV}.building-${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(path.dirname(VENV), { recursive: true });
  await run(python, ['-m', 'venv', building], 5 * MINUTE);
  await run(
    venvPython(building),
    ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '-r', REQUIREMENTS],
    20 * MINUTE,
  );
  writeFileSync(path.join(building, 'requirements.sha256'), requirementsHash());
  rmSync(VENV, { recursive: true, force: true });
  renameSync(building, VENV);
  return venvPython(VENV);
}

/** Starts the real CLI on a free loopback port and resolves to its URL. */
function startServe(dataDir: string): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['POLICYLOOP_API_KEY'];
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      MAIN,
      'serve',
      '--port',
      '0',
      '--data-dir',
      dataDir,
      '--api-key',
      API_KEY,
      ...sftServeOptions(dataDir),
    ],
    { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`policyloop serve printed no address within 60 s: ${stderr}`)),
      MINUTE,
    );
    child.once('exit', (code) => reject(new Error(`policyloop serve exited with ${code}: ${stderr}`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', (line) => {
      clearTimeout(timer);
      const match = /^policyloop listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
      if (match === null) reject(new Error(`unexpected first line from policyloop serve: ${line}`));
      else resolve({ child, url: match[1] as string, stderr: () => stderr });
    });
  });
}

interface Check {
  ok: boolean;
  detail: unknown;
}
interface Summary {
  checks: Record<string, Check>;
  rl?: { means: number[]; first: number; last: number; steps: number[]; metric_names: string[] };
  log?: { step: number; val_rows: number; train_rows: number };
  checkpoints?: { before: number[]; kept: number[] };
  pipeline?: { step: number; eval_steps: number[]; completed_eval_steps: number[] };
  train_sft_error?: string;
  pipeline_local_backend_stand_in?: boolean;
  seconds: number;
}

const TITLE = 'OpenPipe ART (openpipe-art, unchanged) against policyloop serve';
describe.skipIf(skipReason !== undefined)(
  skipReason === undefined ? TITLE : `${TITLE} (skipped: ${skipReason})`,
  () => {
    let root: string;
    let serve: Awaited<ReturnType<typeof startServe>> | undefined;
    let summary: Summary;
    let scriptLog = '';
    let pythonPath = '';

    beforeAll(async () => {
      const python = await ensureVenv((found as { python: string }).python);
      pythonPath = python;
      root = await mkdtemp(path.join(os.tmpdir(), 'policyloop-art-'));
      const dataDir = path.join(root, 'data');
      serve = await startServe(dataDir);
      const env: NodeJS.ProcessEnv = { ...process.env, WANDB_MODE: 'disabled', PYTHONUNBUFFERED: '1' };
      delete env['WANDB_API_KEY'];
      const result = await run(
        python,
        [SCRIPT, `${serve.url}/v1`, API_KEY, path.join(root, 'work'), path.join(dataDir, 'sft')],
        15 * MINUTE,
        env,
      );
      scriptLog = result.stderr;
      const last = result.stdout.trim().split('\n').at(-1) ?? '';
      summary = JSON.parse(last) as Summary;
    }, 40 * MINUTE);

    afterAll(async () => {
      serve?.child.kill('SIGTERM');
      if (root !== undefined) await rm(root, { recursive: true, force: true });
    });

    it(
      'the complete script of docs/art.md trains offline as written',
      async () => {
        const docs = readFileSync(path.join(ROOT, 'docs', 'art.md'), 'utf8');
        const section = docs.slice(docs.indexOf('## A complete script that trains offline'));
        const script = /```python\n([\s\S]*?)```/.exec(section)?.[1];
        expect(script, 'docs/art.md has no python block after "A complete script"').toBeDefined();
        const work = path.join(root, 'docs-script');
        mkdirSync(work, { recursive: true });
        writeFileSync(path.join(work, 'train.py'), script as string);
        const env: NodeJS.ProcessEnv = {
          ...process.env,
          POLICYLOOP_URL: serve?.url,
          POLICYLOOP_API_KEY: API_KEY,
          STEPS: '2',
          PYTHONUNBUFFERED: '1',
        };
        delete env['WANDB_API_KEY'];
        const { stdout } = await run(pythonPath, [path.join(work, 'train.py')], 10 * MINUTE, env, work);
        expect(stdout).toMatch(/^step 1: mean reward [\d.]+$/m);
        expect(stdout).toMatch(/^step 2: mean reward [\d.]+$/m);
        expect(stdout).toMatch(/^latest step: 2$/m);
        expect(existsSync(path.join(work, '.art', 'art-offline', 'models', 'capitals', 'history.jsonl'))).toBe(true);
      },
      10 * MINUTE,
    );

    /** The named checks, each ok; a failure shows its detail and the script's log. */
    function expectChecks(...names: string[]): void {
      for (const name of names) {
        const check = summary.checks[name];
        expect(check, `check "${name}" did not run; script log:\n${scriptLog.slice(-3000)}`).toBeDefined();
        expect(check?.ok, `${name}: ${JSON.stringify(check?.detail)}`).toBe(true);
      }
    }

    it('every step of the script returns what ART expects (no failed check)', () => {
      const failed = Object.entries(summary.checks).filter(([, check]) => !check.ok);
      expect(failed, JSON.stringify(failed, null, 2)).toEqual([]);
      expect(Object.keys(summary.checks).length).toBeGreaterThanOrEqual(31);
    });

    it('registers get-or-create and samples through model.openai_client() by latest, pinned and unknown names', () => {
      expectChecks(
        'register',
        'inference latest name, n=2, logprobs',
        'inference pinned :step0',
        'inference unknown step is a 404',
        'inference with tools',
        'inference inside adapter_lease uses :step1',
      );
    });

    it('backend.train follows 16 jobs through their events and the reward rises as the engine test says', () => {
      expectChecks('backend.train returns consecutive steps', "reward moves (+0.3 as the engine's learning test)");
      expect(summary.rl?.steps).toEqual(Array.from({ length: 16 }, (_, index) => index + 1));
      expect((summary.rl?.last ?? 0) - (summary.rl?.first ?? 0)).toBeGreaterThanOrEqual(0.3);
      // ART maps our gradient_step names onto its own: these must keep arriving.
      expect(summary.rl?.metric_names).toEqual(
        expect.arrayContaining(['loss/train', 'loss/grad_norm', 'loss/entropy', 'loss/learning_rate', 'train/reward']),
      );
    });

    it('model.log, the step read back, checkpoint listing and deletion', () => {
      expectChecks(
        'get_step reads the latest checkpoint',
        'model.log writes train and val rows',
        "client.models.log accepts ART's trajectory groups",
        'checkpoints list pages through every step, ascending',
        'delete_checkpoints keeps the latest and the best',
        'checkpoint delete reports unknown steps',
        'step unchanged after deletion',
      );
      expect(summary.log?.step).toBe(16);
    });

    it("SFT through ART's client from data: and file:// URLs; wandb-artifact:// refused with a reason", () => {
      expectChecks(
        'model.train_sft without W&B stops before any job',
        'SFT job from a data: URL',
        'SFT job from a file:// URL',
        'SFT steps count as checkpoints',
        'SFT from wandb-artifact:// is refused',
      );
    });

    it('PipelineTrainer trains with ServerlessBackend and its evaluations complete', () => {
      expectChecks('PipelineTrainer trains 3 steps', 'PipelineTrainer evaluations complete');
      expect(summary.pipeline?.step).toBe(3);
    });

    it('tool-call histories, PPO, training without logprobs and groups with exceptions', () => {
      expectChecks(
        "tool-call history trains with loss_fn='ppo'",
        'no logprobs: the job fails, saying why',
        'no logprobs with allow_training_without_logprobs trains',
        'a group with an exception trains',
      );
    });

    it('errors reach ART as its typed exceptions, and the model is deleted', () => {
      expectChecks(
        'a wrong key is a 401',
        'invalid training job is a 422',
        'unknown model is a 404',
        'backend.delete removes the model and its inference name',
      );
    });
  },
);
