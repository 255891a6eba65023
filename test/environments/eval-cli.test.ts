/**
 * `policyloop eval` and `policyloop rescore` as a user runs them: the real bin (through tsx) on an
 * environment file, against an OpenAI-compatible stub server of our own that never sends logprobs
 * (`--base-url`), and against the embedded local service (several `--model` values side by side).
 * A run killed with SIGKILL, or stopped with SIGINT, mid-run is finished with `--resume`: no row
 * twice, none missing, and the groups written before the kill never run again (the environment
 * appends each rollout it starts to a side file). Rescore works with the model endpoint closed.
 * Exit code 2 for a bad flag and an environment that cannot be loaded.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalBackend, TrainableModel } from 'policyloop';
import type { EvaluationMetadata, EvaluationRow } from 'policyloop/training';
import { killChildren, runCli, startCli } from '../cli/support/run-cli.js';
import { type OpenAIStub, startOpenAIStub } from './support/openai-stub.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/eval-env.ts', import.meta.url));
const NO_ENV = fileURLToPath(new URL('./fixtures/no-env.ts', import.meta.url));

let dir: string;
let stub: OpenAIStub;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'policyloop-eval-cli-'));
});

afterEach(async () => {
  killChildren();
  await stub?.close();
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The parseable rows of a results file (a torn last line left out). */
async function rowsIn(file: string): Promise<EvaluationRow[]> {
  const text = existsSync(file) ? await readFile(file, 'utf8') : '';
  const rows: EvaluationRow[] = [];
  for (const line of text.split('\n')) {
    try {
      rows.push(JSON.parse(line) as EvaluationRow);
    } catch {
      // empty or torn
    }
  }
  return rows;
}

async function metadataIn(folder: string): Promise<EvaluationMetadata> {
  return JSON.parse(await readFile(path.join(folder, 'metadata.json'), 'utf8')) as EvaluationMetadata;
}

/** `policyloop eval` of the fixture whose `strict` rubric function throws on tasks 1 and 3, 2 rollouts each, into `out`. */
function evalFailingRubric(baseURL: string, out: string) {
  return runCli([
    'eval',
    FIXTURE,
    '--base-url',
    baseURL,
    '--model',
    'gpt-stub',
    '-r',
    '2',
    '--out',
    out,
    '--env-args',
    JSON.stringify({ failRubric: true }),
  ]);
}

const keyOf = (row: EvaluationRow): string => `q${row.example_id}:${row.rollout_index}`;

/** The examples all of whose `r` rows are in `rows`. */
function completeExamples(rows: readonly EvaluationRow[], r: number): Set<number> {
  const counts = new Map<number, Set<number>>();
  for (const row of rows) counts.set(row.example_id, (counts.get(row.example_id) ?? new Set()).add(row.rollout_index));
  return new Set([...counts].filter(([, indices]) => indices.size === r).map(([example]) => example));
}

/** Waits until `file` holds at least `count` rows. */
async function waitForRows(file: string, count: number): Promise<void> {
  for (let waited = 0; waited < 60_000; waited += 50) {
    if ((await rowsIn(file)).length >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${file} did not reach ${count} rows`);
}

async function lines(file: string): Promise<string[]> {
  return existsSync(file) ? (await readFile(file, 'utf8')).split('\n').filter((line) => line !== '') : [];
}

describe('policyloop eval against an OpenAI-compatible server that sends no logprobs', () => {
  it('evaluates, prints the numbers, writes the files, and passes sampling and the key', async () => {
    stub = await startOpenAIStub();
    const out = path.join(dir, 'stub');
    const args = ['eval', FIXTURE, '--base-url', stub.baseURL, '--api-key', 'sk-test', '--model', 'gpt-stub'];
    const run = await runCli([
      ...args,
      '-n',
      '3',
      '-r',
      '2',
      '--temperature',
      '0.3',
      '--max-tokens',
      '5',
      '--out',
      out,
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/qa-fixture .*: 3 task\(s\) x 2 rollout\(s\), correct at reward >= 0.5/);
    expect(run.stdout).toMatch(/^reward\s+1 ± 0$/m);
    expect(run.stdout).toMatch(/^correct\s+1 ± 0$/m);
    expect(run.stdout).toMatch(/^errors\s+0$/m);
    expect(run.stdout).toMatch(/^pass@1\s+1$/m);
    expect(run.stdout).toMatch(/^pass@2\s+1$/m);
    expect(run.stdout).toMatch(/^pass\^2\s+1$/m);
    expect(run.stdout).toContain(`results in ${out}`);
    const rows = await rowsIn(path.join(out, 'results.jsonl'));
    expect(rows.map(keyOf).sort()).toEqual(['q0:0', 'q0:1', 'q1:0', 'q1:1', 'q2:0', 'q2:1']);
    expect(rows[0]?.messages.at(-1)).toEqual({ role: 'assistant', content: `a${rows[0]?.example_id}` });
    expect(await metadataIn(out)).toMatchObject({
      env_id: FIXTURE,
      env_args: {},
      model: 'gpt-stub',
      base_url: stub.baseURL,
      num_examples: 3,
      rollouts_per_example: 2,
      sampling: { temperature: 0.3, max_tokens: 5 },
      avg_reward: 1,
      pass_at_k: { '1': 1, '2': 1 },
      errors: 0,
    });
    expect(stub.requests.length).toBe(6);
    for (const request of stub.requests) {
      expect(request.authorization).toBe('Bearer sk-test');
      expect(request.body).toMatchObject({ model: 'gpt-stub', temperature: 0.3, max_tokens: 5 });
    }

    // OPENAI_API_KEY, and --json.
    const json = await runCli(
      [
        'eval',
        FIXTURE,
        '--base-url',
        stub.baseURL,
        '--model',
        'gpt-stub',
        '-n',
        '1',
        '--json',
        '--out',
        path.join(dir, 'stub-json'),
      ],
      { OPENAI_API_KEY: 'sk-env' },
    );
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      model: 'gpt-stub',
      avg_reward: 1,
      out_dir: path.join(dir, 'stub-json'),
    });
    expect(stub.requests.at(-1)?.authorization).toBe('Bearer sk-env');
  });

  it('counts and prints the error rows of a throwing rubric function, and goes on', async () => {
    stub = await startOpenAIStub();
    const out = path.join(dir, 'rubric-error');
    const run = await evalFailingRubric(stub.baseURL, out);
    expect(run.code).toBe(0);
    // Tasks 1 and 3 of 4, both rollouts each.
    expect(run.stdout).toMatch(/^errors\s+4$/m);
    expect(run.stdout).toMatch(/^pass@1\s+0.5$/m);
    const rows = await rowsIn(path.join(out, 'results.jsonl'));
    const failed = rows.filter((row) => row.error !== null);
    expect(failed.map(keyOf).sort()).toEqual(['q1:0', 'q1:1', 'q3:0', 'q3:1']);
    expect(failed[0]?.error).toMatch(/`strict` threw: strict grader failed on q[13]/);
    expect(failed[0]?.messages.length).toBe(2);
    expect((await metadataIn(out)).errors).toBe(4);
  });

  it('rescore scores the saved rows again with the endpoint closed, into rescore-N, the originals untouched', async () => {
    stub = await startOpenAIStub();
    const out = path.join(dir, 'rescore');
    const eval_ = await evalFailingRubric(stub.baseURL, out);
    expect(eval_.code).toBe(0);
    const before = await readFile(path.join(out, 'results.jsonl'), 'utf8');
    const requests = stub.requests.length;
    await stub.close(); // the model endpoint is gone

    // Its own environment again (env_id, env_args): the same rubric errors.
    const same = await runCli(['rescore', out]);
    expect(same.code).toBe(0);
    expect(same.stdout).toMatch(/^errors\s+4$/m);
    expect(same.stdout).toContain(`results in ${path.join(out, 'rescore-1')}`);
    // Another environment's rubric (the same file without the failing grader): no error left.
    const fixed = await runCli(['rescore', out, '--env', FIXTURE, '--env-args', '{}', '--json']);
    expect(fixed.code).toBe(0);
    const metadata = JSON.parse(fixed.stdout);
    expect(metadata).toMatchObject({ errors: 0, avg_reward: 1, pass_all_k: { '1': 1, '2': 1 }, env_args: {} });
    expect(metadata.out_dir).toBe(path.join(out, 'rescore-2'));
    expect((await rowsIn(path.join(out, 'rescore-2', 'results.jsonl'))).length).toBe(8);
    expect(await readFile(path.join(out, 'results.jsonl'), 'utf8')).toBe(before);
    expect(stub.requests.length).toBe(requests);
  });
});

describe('policyloop eval --resume', () => {
  for (const signal of ['SIGKILL', 'SIGINT'] as const) {
    it(`finishes a run stopped by ${signal} mid-run: no row twice, none missing, written groups not rerun`, async () => {
      stub = await startOpenAIStub();
      stub.delay = 150;
      const out = path.join(dir, `resume-${signal}`);
      const calls = path.join(dir, `calls-${signal}.txt`);
      const envArgs = JSON.stringify({ tasks: 8, calls });
      const command = ['eval', FIXTURE, '--base-url', stub.baseURL, '--model', 'gpt-stub', '--env-args', envArgs];
      const results = path.join(out, 'results.jsonl');
      const first = startCli([...command, '-r', '2', '-c', '2', '--out', out]);
      await waitForRows(results, 4);
      first.child.kill(signal);
      const ended = await first.done;
      if (signal === 'SIGINT') {
        expect(ended.code).toBe(130);
        expect(ended.stderr).toMatch(
          /interrupted; the finished groups are in .*: finish with the same command and --resume/,
        );
      } else {
        expect(ended.code).toBeNull();
      }
      const written = await rowsIn(results);
      const kept = completeExamples(written, 2);
      expect(kept.size).toBeGreaterThanOrEqual(2);
      expect(kept.size).toBeLessThan(8);
      if (signal === 'SIGINT') expect(written.length).toBe(kept.size * 2); // only whole groups
      const callsBefore = (await lines(calls)).length;

      const resumed = await runCli([...command, '--resume', out]);
      expect(resumed.stderr).toBe('');
      expect(resumed.code).toBe(0);
      expect(resumed.stdout).toMatch(/8 task\(s\) x 2 rollout\(s\)/);
      const final = await rowsIn(results);
      const keys = final.map(keyOf);
      expect(new Set(keys).size).toBe(keys.length);
      expect(keys.sort()).toEqual(
        Array.from({ length: 8 }, (_, task) => [`q${task}:0`, `q${task}:1`])
          .flat()
          .sort(),
      );
      const rerun = (await lines(calls)).slice(callsBefore);
      for (const call of rerun) expect(kept.has(Number(/^q(\d+):/.exec(call)?.[1]))).toBe(false);
      expect(rerun.length).toBe((8 - kept.size) * 2);
      expect((await metadataIn(out)).num_examples).toBe(8);
    });
  }

  it('refuses to resume with another -r, naming the difference (exit 2)', async () => {
    stub = await startOpenAIStub();
    const out = path.join(dir, 'resume-refused');
    const command = ['eval', FIXTURE, '--base-url', stub.baseURL, '--model', 'gpt-stub', '-n', '1'];
    expect((await runCli([...command, '--out', out])).code).toBe(0);
    const refused = await runCli([...command, '-r', '3', '--resume', out]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/rolloutsPerExample 3: the run has rolloutsPerExample 1/);
  });
});

describe('policyloop eval exit codes', () => {
  it('exits 2 for a bad flag, bad --env-args, and an environment that cannot be loaded', async () => {
    const base = ['--base-url', 'http://127.0.0.1:9/v1', '--model', 'm'];
    const unknown = await runCli(['eval', FIXTURE, ...base, '--bogus']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown option '--bogus'/);
    const zero = await runCli(['eval', FIXTURE, ...base, '-r', '0']);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/--rollouts-per-example to be an integer >= 1, got "0"/);
    const badArgs = await runCli(['eval', FIXTURE, ...base, '--env-args', '[1]']);
    expect(badArgs.code).toBe(2);
    expect(badArgs.stderr).toMatch(/--env-args to be a JSON object/);
    const noModel = await runCli(['eval', FIXTURE]);
    expect(noModel.code).toBe(2);
    const nothing = await runCli(['eval', NO_ENV, ...base]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/no-env\.ts/);
    const missing = await runCli(['eval', path.join(dir, 'missing-env.ts'), ...base]);
    expect(missing.code).toBe(2);
    const noRun = await runCli(['rescore', path.join(dir, 'no-such-run')]);
    expect(noRun.code).toBe(2);
    expect(noRun.stderr).toMatch(/holds no evaluation/);
  });
});

describe('policyloop eval on the embedded local service', () => {
  let dataDir: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-eval-local-'));
    // A trained model to name as project/name:stepN.
    const backend = await LocalBackend.start({ dataDir });
    const model = await new TrainableModel({
      project: 'evals',
      name: 'agent',
      baseModel: 'policyloop/tiny-chat',
    }).register(backend);
    await model.trainSFT([
      {
        messages: [
          { role: 'user', content: 'q0' },
          { role: 'assistant', content: 'a0' },
        ],
      },
    ]);
    await model.close();
    await backend.close();
  }, 120_000);

  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('compares several --model values side by side, one subfolder each', async () => {
    const out = path.join(dir, 'local');
    const run = await runCli([
      'eval',
      FIXTURE,
      '--data-dir',
      dataDir,
      '--model',
      'policyloop/tiny-chat',
      '--model',
      'evals/agent:step1',
      '-n',
      '2',
      '-r',
      '2',
      '--max-tokens',
      '4',
      '--out',
      out,
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const [header] = run.stdout.split('\n').filter((line) => /policyloop\/tiny-chat/.test(line));
    expect(header).toMatch(/^\s+policyloop\/tiny-chat\s+evals\/agent:step1$/);
    expect(run.stdout).toMatch(/^reward\s+\S+ ± \S+\s+\S+ ± \S+$/m);
    expect(run.stdout).toMatch(/^pass@2\s+\S+\s+\S+$/m);
    for (const [model, slug] of [
      ['policyloop/tiny-chat', 'policyloop-tiny-chat'],
      ['evals/agent:step1', 'evals-agent-step1'],
    ] as const) {
      expect(run.stdout).toContain(`${model}: results in ${path.join(out, slug)}`);
      const metadata = await metadataIn(path.join(out, slug));
      expect(metadata).toMatchObject({ model, num_examples: 2, rollouts_per_example: 2, errors: 0 });
      expect((await rowsIn(path.join(out, slug, 'results.jsonl'))).length).toBe(4);
    }
    // --resume of the comparison: the finished run is kept as it is, a model whose run is gone
    // starts again with the settings of the others.
    const kept = await readFile(path.join(out, 'policyloop-tiny-chat', 'results.jsonl'), 'utf8');
    await rm(path.join(out, 'evals-agent-step1'), { recursive: true });
    const resumed = await runCli([
      'eval',
      FIXTURE,
      '--data-dir',
      dataDir,
      '--model',
      'policyloop/tiny-chat',
      '--model',
      'evals/agent:step1',
      '--resume',
      out,
    ]);
    expect(resumed.code).toBe(0);
    expect(await readFile(path.join(out, 'policyloop-tiny-chat', 'results.jsonl'), 'utf8')).toBe(kept);
    expect(await metadataIn(path.join(out, 'evals-agent-step1'))).toMatchObject({
      model: 'evals/agent:step1',
      num_examples: 2,
      rollouts_per_example: 2,
      sampling: { max_tokens: 4 },
    });

    // A model the service does not have: exit 2, naming it.
    const unknown = await runCli(['eval', FIXTURE, '--data-dir', dataDir, '--model', 'evals/nobody', '-n', '1']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--model evals\/nobody: Model "evals\/nobody" not found/);
  });
});
