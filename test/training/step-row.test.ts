/**
 * A step's metrics take one path: an RLTrainer run in which rollouts throw (one retried, one
 * failing for good) records `rollouts/retried`, `rollouts/failed`, `time/step` and the rest of
 * the step's row once, and the same row is what `step:end` carried, what `history.jsonl` and
 * `model.history()` hold, what the local service's step metrics have and what `policyloop history
 * --json` prints. Against the real local service on loopback.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { readHistory } from '../../src/training/history.js';
import { RLTrainer } from '../../src/training/rl-trainer.js';
import { TrainableModel } from '../../src/training/trainable-model.js';
import type { HistoryRow, StepEndEvent } from 'policyloop/training';
import { killChildren, runCli } from '../cli/support/run-cli.js';

const WORDS = ['cat', 'dog', 'sun', 'owl'];
let dataDir: string;
let backend: LocalBackend;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-step-row-'));
  backend = await LocalBackend.start({ dataDir });
});

afterEach(killChildren);

afterAll(async () => {
  await backend?.close();
  await rm(dataDir, { recursive: true, force: true });
});

/** The row's metrics without its bookkeeping keys. */
function metricsOf(row: HistoryRow | undefined): Record<string, unknown> {
  const { training_step: _step, recorded_at: _at, ...metrics } = row ?? ({} as HistoryRow);
  return metrics;
}

describe('one row per step, everywhere', () => {
  it('a run whose rollouts throw shows rollouts/retried, rollouts/failed and time/step in every place', async () => {
    const model = await new TrainableModel({
      project: 'rows',
      name: 'throwing',
      baseModel: 'policyloop/tiny-chat',
    }).register(backend);
    const client = model.openai();
    const trainer = new RLTrainer<string>({
      model,
      scenarios: WORDS,
      groupSize: 3,
      groupsPerStep: 2,
      maxSteps: 2,
      maxStepsOffPolicy: 0,
      progress: false,
      rollout: async (word, context) => {
        const { index, attempt } = context;
        // Step 0: the first rollout of `cat` throws once and passes when retried. Step 1: the first
        // rollout of `sun` throws every time, so it is kept in its group's exceptions.
        if ((word === 'cat' && index === 0 && attempt === 0) || (word === 'sun' && index === 0)) {
          throw Object.assign(new Error(`the agent's tool failed on ${word}`), { retryable: true });
        }
        await client.chat.completions.create({
          model: model.inferenceName(),
          messages: [{ role: 'user', content: word }],
          max_tokens: 4,
          temperature: 1,
        });
      },
      // Rewards that differ within every group, so that each step trains.
      reward: () => Math.random(),
    });
    const ends: StepEndEvent[] = [];
    trainer.on('step:end', (event) => ends.push(event));
    const summary = await trainer.run();
    expect(summary).toMatchObject({ step: 2, totals: { steps: 2, failedRollouts: 1 } });

    // The row step:end carried, for each step.
    expect(ends.map((event) => event.step)).toEqual([0, 1]);
    const [first, second] = ends as [StepEndEvent, StepEndEvent];
    expect(first.metrics).toMatchObject({ 'rollouts/retried': 1, 'rollouts/failed': 0, 'groups/dropped_failed': 0 });
    expect(second.metrics).toMatchObject({ 'rollouts/retried': 1, 'rollouts/failed': 1 });
    for (const { metrics } of ends) {
      for (const name of ['time/step', 'time/train', 'time/sample', 'idle/service']) {
        expect(metrics[name], name).toBeGreaterThanOrEqual(0);
      }
      expect(metrics['time/step']).toBeGreaterThanOrEqual(metrics['time/train'] as number);
      expect(typeof metrics['train/reward']).toBe('number');
      expect(typeof metrics['train/loss']).toBe('number');
    }

    // history.jsonl holds exactly that row per step.
    const fileRows = (await readHistory(model.files.history)).filter((row) => 'time/step' in row);
    expect(fileRows.map((row) => row.training_step)).toEqual([0, 1]);
    expect(fileRows.map(metricsOf)).toEqual(ends.map((event) => event.metrics));

    // model.history() reads the service's step metrics back: the same names and values.
    const history = await model.history();
    for (const event of ends) {
      const row = history.find((candidate) => candidate.training_step === event.step);
      expect(metricsOf(row)).toMatchObject(event.metrics);
    }

    // The service keeps the loop's families with the step's train split, under their full names.
    const connection = await backend.connect();
    const items = (await connection.client.local.metrics.list(model.id, { split: 'train' })).data;
    const atStep1 = items.find((item) => item.step === 1);
    expect(atStep1?.metrics).toMatchObject({
      'rollouts/failed': 1,
      'rollouts/retried': 1,
      loss: second.metrics['train/loss'],
    });
    expect(atStep1?.metrics['time/step']).toBe(second.metrics['time/step']);

    // `policyloop history --json`: one JSON line per step, with the same row.
    const cli = await runCli(['history', 'rows/throwing', '--json'], {
      POLICYLOOP_BASE_URL: connection.baseURL,
      POLICYLOOP_API_KEY: connection.apiKey,
    });
    expect(cli.code, cli.stderr).toBe(0);
    const printed = cli.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as HistoryRow);
    for (const event of ends) {
      const row = printed.find((candidate) => candidate.training_step === event.step);
      expect(metricsOf(row)).toMatchObject(event.metrics);
    }
    await model.close();
  });
});
