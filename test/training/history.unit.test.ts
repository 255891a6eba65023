/** The history helpers that move rows between `history.jsonl`'s shape and the service's. */
import { describe, expect, it } from 'vitest';
import { selectMetrics } from '../../src/cli/commands/history.js';
import { compareHistories, historyRowsFromService, toStepMetricsBodies } from '../../src/training/history.js';

describe('toStepMetricsBodies', () => {
  it('splits prefixed metrics into one unprefixed body per split, keeping nested names', () => {
    expect(
      toStepMetricsBodies({ 'train/loss': 0.4, 'train/data/step_num_trajectories': 8, 'val/reward': 0.8 }, 3),
    ).toEqual([
      { step: 3, split: 'train', metrics: { loss: 0.4, 'data/step_num_trajectories': 8 } },
      { step: 3, split: 'val', metrics: { reward: 0.8 } },
    ]);
  });

  it('leaves out what the route would refuse: no prefix, non-numbers, repeated prefixes, long names', () => {
    expect(
      toStepMetricsBodies(
        { plain: 1, 'val/flag': true, 'val/nan': Number.NaN, 'val/val/x': 1, [`val/${'n'.repeat(201)}`]: 1 },
        0,
      ),
    ).toEqual([]);
  });
});

describe("a step row's own families (time/, idle/, rollouts/, groups/)", () => {
  const rl = { 'train/loss': 0.4, 'time/step': 2.5, 'rollouts/failed': 1 };
  const sft = { 'sft/loss': 0.3, 'time/step': 1.5 };

  it("go with the split of the step's job, under their full names, and come back as written", () => {
    const bodies = [...toStepMetricsBodies(rl, 3), ...toStepMetricsBodies(sft, 4)];
    expect(bodies).toEqual([
      { step: 3, split: 'train', metrics: { loss: 0.4, 'time/step': 2.5, 'rollouts/failed': 1 } },
      { step: 4, split: 'sft', metrics: { loss: 0.3, 'time/step': 1.5 } },
    ]);
    const rows = historyRowsFromService(bodies.map((body) => ({ ...body, updated_at: '2026-01-01T00:00:00Z' })));
    expect(rows.map(({ recorded_at: _at, ...row }) => row)).toEqual([
      { training_step: 3, ...rl },
      { training_step: 4, ...sft },
    ]);
  });

  it('are selected with that split by `policyloop history --split`', () => {
    const rows = [
      { training_step: 3, recorded_at: '', ...rl },
      { training_step: 4, recorded_at: '', ...sft },
    ];
    const keys = (split: string) => selectMetrics(rows, { split }).map(({ recorded_at: _at, ...row }) => row);
    expect(keys('train')).toEqual([{ training_step: 3, ...rl }]);
    expect(keys('sft')).toEqual([{ training_step: 4, ...sft }]);
  });
});

describe('historyRowsFromService', () => {
  it('merges the splits of a step into one row, oldest step first, with the newest update time', () => {
    expect(
      historyRowsFromService([
        { step: 1, split: 'val', metrics: { reward: 0.5 }, updated_at: '2026-01-01T00:00:03Z' },
        { step: 0, split: 'train', metrics: { reward: 0.1, loss: 2 }, updated_at: '2026-01-01T00:00:01Z' },
        { step: 0, split: 'val', metrics: { reward: 0.2 }, updated_at: '2026-01-01T00:00:02Z' },
      ]),
    ).toEqual([
      {
        training_step: 0,
        recorded_at: '2026-01-01T00:00:02Z',
        'train/reward': 0.1,
        'train/loss': 2,
        'val/reward': 0.2,
      },
      { training_step: 1, recorded_at: '2026-01-01T00:00:03Z', 'val/reward': 0.5 },
    ]);
  });
});

describe('compareHistories', () => {
  const row = (step: number, metrics: Record<string, number>) => ({
    training_step: step,
    recorded_at: 'x',
    ...metrics,
  });

  it('is null when they agree, a later file row of a step replacing an earlier value as the service merges', () => {
    expect(
      compareHistories(
        [row(0, { 'val/reward': 0.5, 'train/loss': 1 })],
        [row(0, { 'val/reward': 0.1 }), row(0, { 'train/loss': 1 }), row(0, { 'val/reward': 0.5 })],
      ),
    ).toBeNull();
  });

  it('names the steps only in one of them and the steps whose values differ', () => {
    expect(
      compareHistories(
        [row(0, { 'val/reward': 0.5 }), row(1, { 'val/reward': 0.6 }), row(2, { 'val/reward': 0.7 })],
        [row(1, { 'val/reward': 0.9 }), row(2, { 'val/reward': 0.7, 'train/loss': 3 }), row(4, { 'val/reward': 1 })],
      ),
    ).toEqual({ onlyInService: [0], onlyInFile: [2, 4], differing: [1] });
  });
});
