/**
 * `evaluate` and `rescore` through the public API, on environments built by hand against the
 * contract and a model served by `ScriptedBackend` (the real local service over a scripted engine,
 * in-process): the rows and numbers, the files written after every group, error rows (a throwing
 * rollout, rubric function or group judge), an abort, resume of a run cut short (complete groups
 * kept and never rerun, partial ones and a torn line dropped), the refusals, and rescore.
 */
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  APIUserAbortError,
  evaluate,
  finalAssistantText,
  InvalidArgumentError,
  PromptedModel,
  rescore,
} from 'policyloop';
import type { EvaluationRow } from 'policyloop/training';
import { ScriptedBackend } from 'policyloop/testing';
import { askOnce, handEnvironment, type QuestionTask } from './support/hand-environment.js';

const TASKS: QuestionTask[] = [0, 1, 2, 3].map((i) => ({ prompt: `q${i}`, answer: `a${i}` }));
const BASE = 'policyloop/tiny-chat';
const VERSION = (
  JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

let backend: ScriptedBackend;
let model: PromptedModel;
let dir: string;

/** The scripted model answers `a<i>` to `q<i>` on even repeats of a prompt, `wrong` on odd ones. */
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'policyloop-eval-'));
  backend = await ScriptedBackend.start({
    sample: ({ body, repeat }) => {
      const prompt = String(body.messages.at(-1)?.content ?? '');
      return repeat % 2 === 0 ? prompt.replace('q', 'a') : 'wrong';
    },
  });
  const connection = await backend.connect();
  model = new PromptedModel({
    project: 'eval',
    name: 'scripted',
    model: BASE,
    baseURL: connection.baseURL,
    apiKey: connection.apiKey,
    fetch: connection.fetch,
    dataDir: dir,
  });
});

afterEach(async () => {
  await backend.close();
  await rm(dir, { recursive: true, force: true });
});

const correct = (trajectory: Parameters<typeof finalAssistantText>[0], task: QuestionTask): number =>
  finalAssistantText(trajectory).trim() === task.answer ? 1 : 0;
const length = (trajectory: Parameters<typeof finalAssistantText>[0]): number => finalAssistantText(trajectory).length;

async function readLines(file: string): Promise<EvaluationRow[]> {
  const text = await readFile(file, 'utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as EvaluationRow);
}

const keys = (rows: readonly EvaluationRow[]): string[] =>
  rows.map((row) => `${row.example_id}:${row.rollout_index}`).sort();

describe('evaluate', () => {
  it('runs n tasks x r rollouts, prints the numbers it writes, and passes sampling to the model', async () => {
    const lifecycle = { starts: 0, closes: 0 };
    const environment = handEnvironment({
      tasks: TASKS,
      reward: { correct, length: { fn: length, weight: 0 } },
      lifecycle,
      args: { level: 2 },
    });
    const out = path.join(dir, 'run');
    const progress: number[] = [];
    const result = await evaluate(environment, {
      model,
      examples: 3,
      rolloutsPerExample: 2,
      concurrency: 3,
      sampling: { temperature: 0.25, max_tokens: 7 },
      out,
      onProgress: (event) => progress.push(event.done),
    });
    expect(result.rows.map((row) => [row.example_id, row.rollout_index])).toEqual([
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
      [2, 0],
      [2, 1],
    ]);
    expect(result.avgReward).toBe(0.5);
    expect(result.stdReward).toBe(0.5);
    expect(result.avgMetrics['correct']).toBe(0.5);
    expect(result.avgMetrics['length']).toBe((2 + 5) / 2);
    expect(result.passAtK).toEqual({ '1': 0.5, '2': 1 });
    expect(result.passAllK).toEqual({ '1': 0.5, '2': 0 });
    expect(result.errors).toBe(0);
    expect(progress.at(-1)).toBe(6);
    expect(lifecycle).toEqual({ starts: 1, closes: 1 });
    // The first three tasks only, with the sampling parameters.
    expect(new Set(backend.samples.map((sample) => sample.body.messages.at(-1)?.content))).toEqual(
      new Set(['q0', 'q1', 'q2']),
    );
    expect(backend.samples.every((s) => s.body.temperature === 0.25 && s.body.max_tokens === 7)).toBe(true);

    const lines = await readLines(path.join(out, 'results.jsonl'));
    expect(keys(lines)).toEqual(keys(result.rows));
    const line = lines.find((row) => row.example_id === 1 && row.reward === 1) as EvaluationRow;
    expect(line).toMatchObject({
      task: { prompt: 'q1', answer: 'a1' },
      messages: [
        { role: 'user', content: 'q1' },
        { role: 'assistant', content: 'a1' },
      ],
      metrics: { correct: 1, length: 2 },
      error: null,
      model: BASE,
    });
    expect(line.seconds).toBeGreaterThanOrEqual(0);
    const metadata = JSON.parse(await readFile(path.join(out, 'metadata.json'), 'utf8'));
    expect(metadata).toMatchObject({
      env_id: 'hand',
      env_args: { level: 2 },
      model: BASE,
      num_examples: 3,
      rollouts_per_example: 2,
      sampling: { temperature: 0.25, max_tokens: 7 },
      threshold: 0.5,
      avg_reward: 0.5,
      std_reward: 0.5,
      avg_metrics: { correct: 0.5, length: 3.5 },
      pass_at_k: { '1': 0.5, '2': 1 },
      pass_all_k: { '1': 0.5, '2': 0 },
      errors: 0,
      version: VERSION,
    });
    expect(metadata.base_url).toBe(model.inferenceBaseURL);
    expect(Number.isNaN(Date.parse(metadata.date))).toBe(false);
    expect(result.metadata.pass_at_k).toEqual(metadata.pass_at_k);
  });

  it('makes error rows of a throwing rollout, rubric function and group judge, and goes on', async () => {
    const environment = handEnvironment<QuestionTask>({
      tasks: TASKS,
      rollout: async (task, context) => {
        if (task.prompt === 'q1' && context.index === 0) throw new Error('the sandbox died');
        await askOnce(task, context);
      },
      reward: {
        correct,
        boom: (_trajectory: unknown, task: QuestionTask) => {
          if (task.prompt === 'q2') throw new Error('the grader crashed');
          return 1;
        },
      },
      scoreGroup: (_group, { scenario }) => {
        if (scenario.prompt === 'q3') throw new Error('the judge is down');
      },
    });
    const out = path.join(dir, 'errors');
    const result = await evaluate(environment, { model, rolloutsPerExample: 2, out });
    expect(result.errors).toBe(1 + 2 + 2);
    const byKey = new Map(result.rows.map((row) => [`${row.example_id}:${row.rollout_index}`, row]));
    expect(byKey.get('1:0')).toMatchObject({ messages: [], reward: null, error: 'the sandbox died' });
    const graded = byKey.get('2:0') as EvaluationRow;
    expect(graded.reward).toBeNull();
    expect(graded.error).toMatch(/`boom` threw: the grader crashed/);
    expect(graded.messages[0]).toEqual({ role: 'user', content: 'q2' });
    expect(byKey.get('3:1')?.error).toBe('scoreGroup: the judge is down');
    expect(byKey.get('3:1')?.messages.length).toBe(2);
    // Only example 0 and the rollout of example 1 that finished are scored.
    expect(result.rows.filter((row) => row.error === null).length).toBe(3);
    // Errors are not correct: example 1 has 1 correct of 2 at most, 2 and 3 none.
    expect(result.passAtK['1']).toBeLessThanOrEqual((1 + 0.5) / 4);
    const metadata = JSON.parse(await readFile(path.join(out, 'metadata.json'), 'utf8'));
    expect(metadata.errors).toBe(5);
    expect((await readLines(path.join(out, 'results.jsonl'))).length).toBe(8);
  });

  it('on abort, rejects with APIUserAbortError after writing the finished groups; resume finishes the run', async () => {
    const controller = new AbortController();
    const calls: string[] = [];
    const environment = handEnvironment<QuestionTask>({
      tasks: TASKS,
      rollout: async (task, context) => {
        calls.push(`${task.prompt}:${context.index}`);
        if (task.prompt === 'q2' && !controller.signal.aborted) {
          // Stalls until the abort, as a slow model would.
          await new Promise((_resolve, reject) =>
            context.signal.addEventListener('abort', () => reject(context.signal.reason), { once: true }),
          );
        }
        await askOnce(task, context);
      },
      reward: { correct },
    });
    const out = path.join(dir, 'aborted');
    const run = evaluate(environment, {
      model,
      rolloutsPerExample: 2,
      concurrency: 1,
      out,
      signal: controller.signal,
      onProgress: (progress) => {
        if (progress.groupsDone === 2) controller.abort();
      },
    });
    await expect(run).rejects.toBeInstanceOf(APIUserAbortError);
    const written = await readLines(path.join(out, 'results.jsonl'));
    expect(keys(written)).toEqual(['0:0', '0:1', '1:0', '1:1']);
    calls.length = 0;
    const resumed = await evaluate(environment, { model, resume: out });
    expect(calls.sort()).toEqual(['q2:0', 'q2:1', 'q3:0', 'q3:1']);
    expect(resumed.rows.length).toBe(8);
    expect(keys(await readLines(path.join(out, 'results.jsonl')))).toEqual(keys(resumed.rows));
    expect(resumed.metadata.num_examples).toBe(4);
  });

  it('resume keeps complete groups, drops a partial group and a torn line, and never reruns what it kept', async () => {
    const calls: string[] = [];
    const environment = handEnvironment<QuestionTask>({
      tasks: TASKS,
      rollout: async (task, context) => {
        calls.push(`${task.prompt}:${context.index}`);
        await askOnce(task, context);
      },
      reward: { correct },
    });
    const out = path.join(dir, 'cut');
    const first = await evaluate(environment, { model, rolloutsPerExample: 2, out });
    // As a run killed mid-write leaves it: groups 0 and 1 whole, one row of group 2, a torn line.
    const file = path.join(out, 'results.jsonl');
    const lines = (await readFile(file, 'utf8')).split('\n').filter((line) => line !== '');
    const rowOf = (line: string) => JSON.parse(line) as EvaluationRow;
    const keep = lines.filter((line) => rowOf(line).example_id <= 1);
    const partial = lines.find((line) => rowOf(line).example_id === 2) as string;
    const torn = (lines.find((line) => rowOf(line).example_id === 3) as string).slice(0, 40);
    await writeFile(file, `${[...keep, partial].join('\n')}\n${torn}`);
    calls.length = 0;
    const resumed = await evaluate(environment, { model, resume: out });
    expect(calls.sort()).toEqual(['q2:0', 'q2:1', 'q3:0', 'q3:1']);
    const final = await readLines(file);
    expect(keys(final)).toEqual(keys(first.rows));
    expect(new Set(keys(final)).size).toBe(8);
    // The kept rows are the ones written first, byte for byte.
    expect(final.filter((row) => row.example_id <= 1)).toEqual(keep.map(rowOf));
    expect(resumed.avgReward).toBe(0.5);

    // A finished run resumes to the same numbers without a rollout.
    calls.length = 0;
    const again = await evaluate(environment, { model, resume: out });
    expect(calls).toEqual([]);
    expect(again.passAtK).toEqual(resumed.passAtK);
  });

  it('refuses to resume with other settings (naming them), and an out folder that holds a run', async () => {
    const environment = handEnvironment({ tasks: TASKS, reward: { correct } });
    const out = path.join(dir, 'settled');
    await evaluate(environment, { model, examples: 2, rolloutsPerExample: 2, out });
    await expect(evaluate(environment, { model, resume: out, rolloutsPerExample: 4 })).rejects.toThrow(
      /rolloutsPerExample 4: the run has rolloutsPerExample 2/,
    );
    await expect(evaluate(environment, { model, resume: out, examples: 3 })).rejects.toThrow(
      /examples 3: the run has examples 2/,
    );
    const other = new PromptedModel({
      project: 'eval',
      name: 'other',
      model: 'gpt-x',
      baseURL: 'http://127.0.0.1:9/v1',
    });
    await expect(evaluate(environment, { model: other, resume: out })).rejects.toThrow(/the model "gpt-x"/);
    await expect(
      evaluate(handEnvironment({ tasks: TASKS, args: { level: 9 } }), { model, resume: out }),
    ).rejects.toThrow(/environment args/);
    await expect(evaluate(environment, { model, out })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(evaluate(environment, { model, out, resume: out })).rejects.toThrow(/not both/);
    await expect(evaluate(environment, { model, resume: path.join(dir, 'none') })).rejects.toThrow(
      /holds no evaluation/,
    );
  });
});

describe('rescore', () => {
  it('scores the saved messages again with another rubric into rescore-N, without the model, originals untouched', async () => {
    const environment = handEnvironment<QuestionTask>({
      tasks: TASKS,
      rollout: async (task, context) => {
        if (task.prompt === 'q0' && context.index === 1) throw new Error('no sandbox');
        await askOnce(task, context);
      },
      reward: {
        correct,
        strict: (_trajectory: unknown, task: QuestionTask) => {
          if (task.prompt === 'q1') throw new Error('strict grader bug');
          return 0;
        },
      },
    });
    const out = path.join(dir, 'saved');
    const original = await evaluate(environment, { model, rolloutsPerExample: 2, out });
    expect(original.errors).toBe(3);
    const before = await readFile(path.join(out, 'results.jsonl'), 'utf8');
    const metadataBefore = await readFile(path.join(out, 'metadata.json'), 'utf8');
    await backend.close(); // the model endpoint is gone

    const lenient = handEnvironment<QuestionTask>({
      name: 'lenient',
      tasks: TASKS,
      reward: { said: (trajectory) => (finalAssistantText(trajectory).startsWith('a') ? 1 : 0.25) },
    });
    const first = await rescore(out, { environment: lenient });
    expect(first.outDir).toBe(path.resolve(out, 'rescore-1'));
    // The rollout error stays one; the grader's error rows are scored again.
    expect(first.errors).toBe(1);
    expect(first.rows.find((row) => row.example_id === 0 && row.rollout_index === 1)).toMatchObject({
      messages: [],
      error: 'no sandbox',
    });
    expect(first.rows.filter((row) => row.error === null).every((row) => row.metrics['said'] !== undefined)).toBe(true);
    expect(first.avgReward).toBeCloseTo((4 * 1 + 3 * 0.25) / 7, 12);
    // Every task has one row of 1 (correct at 0.5) among two: pass@1 = 1/2, pass@2 = 1.
    expect(first.passAtK).toEqual({ '1': 0.5, '2': 1 });
    const metadata = JSON.parse(await readFile(path.join(first.outDir, 'metadata.json'), 'utf8'));
    expect(metadata).toMatchObject({
      env_id: 'lenient',
      model: BASE,
      num_examples: 4,
      rollouts_per_example: 2,
      errors: 1,
    });
    expect(keys(await readLines(path.join(first.outDir, 'results.jsonl')))).toEqual(keys(original.rows));
    expect(await readFile(path.join(out, 'results.jsonl'), 'utf8')).toBe(before);
    expect(await readFile(path.join(out, 'metadata.json'), 'utf8')).toBe(metadataBefore);

    const second = await rescore(out, { environment: lenient, threshold: 0.2 });
    expect(second.outDir).toBe(path.resolve(out, 'rescore-2'));
    expect(second.passAtK['1']).toBeCloseTo(7 / 8, 12);
  });

  it('reads a torn results file and refuses a folder with no evaluation', async () => {
    const environment = handEnvironment({ tasks: TASKS.slice(0, 2), reward: { correct } });
    const out = path.join(dir, 'torn');
    await evaluate(environment, { model, out });
    await appendFile(path.join(out, 'results.jsonl'), '{"example_id": 5, "rol');
    const result = await rescore(out, { environment });
    expect(result.rows.length).toBe(2);
    await expect(rescore(path.join(dir, 'nothing'), { environment })).rejects.toThrow(/holds no evaluation/);
  });
});
