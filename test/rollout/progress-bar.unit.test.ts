import { describe, expect, it } from 'vitest';
import { attachProgressBar, gatherTrajectoryGroups } from 'policyloop';
import { GatherEmitter } from 'policyloop/training';
import { formatProgress } from '../../src/rollout/progress-bar.js';

describe('progress bar', () => {
  it('shows done/total, the running reward mean and failures', () => {
    expect(formatProgress({ done: 3, total: 12, failed: 0, rewardMean: 0.5 })).toBe(
      'gather [######------------------]  3/12  reward 0.500',
    );
    expect(formatProgress({ done: 0, total: 4, failed: 0, rewardMean: Number.NaN })).toBe(
      'gather [------------------------] 0/4  reward -',
    );
    expect(formatProgress({ done: 4, total: 4, failed: 1, rewardMean: 1 })).toContain('failed 1');
  });

  it('redraws one line per progress event and ends it when detached', async () => {
    const written: string[] = [];
    const events = new GatherEmitter<number>();
    const detach = attachProgressBar(events, { write: (text: string) => written.push(text) });
    await gatherTrajectoryGroups([1, 2], async (scenario) => ({ reward: scenario }), { events });
    detach();
    expect(written).toHaveLength(3);
    expect(written[0]?.startsWith('\r')).toBe(true);
    expect(written[1]).toContain('2/2  reward 1.500');
    expect(written[2]).toBe('\n');
  });
});
