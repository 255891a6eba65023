/**
 * `RLTrainer` on an environment against the real local service and its engine (the tiny model
 * samples and trains): 2 steps whose rows hold each rubric function's mean, consistent with the
 * reward (the reward is the weighted sum of the rubric, so its mean is the weighted sum of the
 * rubric's means), and the default loop's turn count.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { defineEnvironment, exactMatch, finalAssistantText, LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
import type { StepEndEvent } from 'policyloop/training';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let dataDir: string;
let backend: LocalBackend;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-env-trainer-'));
  backend = await LocalBackend.start({ dataDir });
});
afterAll(async () => {
  await backend?.close();
  await rm(dataDir, { recursive: true, force: true });
});

/** The fraction of capital letters of a text (0 for none): a reward a random tiny model varies on. */
const capitals = (text: string) => (text.length === 0 ? 0 : (text.match(/[A-Z]/g)?.length ?? 0) / text.length);

describe('RLTrainer on an environment, on the local service', () => {
  it('trains 2 steps with each rubric function mean in the rows, the reward their weighted sum', async () => {
    const environment = defineEnvironment({
      name: 'shout',
      dataset: ['cat', 'dog', 'sun', 'map'].map((word) => ({ prompt: word, answer: word.toUpperCase() })),
      evalDataset: [{ prompt: 'owl', answer: 'OWL' }],
      sampling: { max_tokens: 8 },
      reward: {
        capitals: (trajectory) => capitals(finalAssistantText(trajectory)),
        length: { fn: (trajectory) => finalAssistantText(trajectory).length / 8, weight: 0.5 },
        exact: { fn: exactMatch((task) => task.answer), weight: 0 },
      },
    });
    const model = await new TrainableModel({
      project: 'env',
      name: 'shout',
      baseModel: 'policyloop/tiny-chat',
    }).register(backend);
    const trainer = new RLTrainer({ model, environment, groupSize: 4, groupsPerStep: 2, maxSteps: 2, progress: false });
    const ends: StepEndEvent[] = [];
    trainer.on('step:end', (event) => ends.push(event));
    const summary = await trainer.run({ signal: AbortSignal.timeout(240_000) });
    expect(summary).toMatchObject({ step: 2, stopReason: 'max_steps' });

    const rows = (await model.history()).filter((row) => typeof row['train/loss'] === 'number');
    expect(rows.map((row) => row.training_step)).toEqual([0, 1]);
    for (const row of rows) {
      const mean = (name: string) => row[`train/${name}`] as number;
      for (const name of ['capitals', 'length', 'exact', 'num_turns', 'tool_calls'])
        expect(typeof mean(name)).toBe('number');
      expect(mean('num_turns')).toBe(1);
      expect(mean('tool_calls')).toBe(0);
      expect(mean('length')).toBeGreaterThan(0);
      expect(mean('reward')).toBeCloseTo(mean('capitals') + 0.5 * mean('length'), 10);
    }
    // The same row in step:end as in the history.
    expect(ends.map((event) => event.metrics['train/capitals'])).toEqual(rows.map((row) => row['train/capitals']));
    // Validation on the environment's held-out task at step 0: its rubric too.
    const validation = (await model.history()).find((row) => typeof row['val/reward'] === 'number');
    expect(validation?.training_step).toBe(0);
    expect(typeof validation?.['val/capitals']).toBe('number');

    await model.close();
  }, 300_000);
});
