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
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureVenv, findPython, packageIndexProblem, runCommand, venvIsCurrent } from '../support/python-venv.js';
import { type ServeProcess, startServeProcess } from '../support/serve-process.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const REQUIREMENTS = path.join(HERE, 'requirements.txt');
const SCRIPT = path.join(HERE, 'art_script.py');
const VENV = path.join(ROOT, '.cache', 'art-venv');
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

// Any Python >= 3.12 (openpipe-art needs it); no upper bound.
const found = findPython({ min: [3, 12], below: [4, 0], envVar: 'POLICYLOOP_ART_PYTHON', purpose: 'openpipe-art' });

let skipReason = 'reason' in found ? found.reason : undefined;
if (
  skipReason === undefined &&
  !venvIsCurrent(VENV, REQUIREMENTS, found as Exclude<typeof found, { reason: string }>)
) {
  skipReason = await packageIndexProblem('openpipe-art');
}
if (skipReason !== undefined) {
  if (REQUIRED) throw new Error(`POLICYLOOP_REQUIRE_ART=1 but the ART suite cannot run: ${skipReason}`);
  console.log(`ART conformance skipped: ${skipReason}`);
}

/** Runs a command to its end; rejects with its output when it fails or outlives `timeoutMs`. */
function run(command: string, args: string[], timeoutMs: number, env: NodeJS.ProcessEnv = process.env, cwd = ROOT) {
  return runCommand(command, args, { timeoutMs, env, cwd });
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
    let serve: ServeProcess | undefined;
    let summary: Summary;
    let scriptLog = '';
    let pythonPath = '';

    beforeAll(async () => {
      const { python } = await ensureVenv({
        python: found as Exclude<typeof found, { reason: string }>,
        venv: VENV,
        requirements: REQUIREMENTS,
      });
      pythonPath = python;
      root = await mkdtemp(path.join(os.tmpdir(), 'policyloop-art-'));
      const dataDir = path.join(root, 'data');
      serve = await startServeProcess({ dataDir, apiKey: API_KEY, args: sftServeOptions(dataDir) });
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
