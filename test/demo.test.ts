/**
 * The README's main job, run as a user runs it: `tsx examples/demo.ts` against the embedded
 * local service. Asserts the promise the README makes from the history file the demo writes
 * (not from its console output): held-out val/reward starts low on the base model, and the RL
 * loop, not only the SFT warm start, lifts it high.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalBackend } from 'policyloop';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '..');

describe('npm run demo', () => {
  let dataDir = '';
  afterAll(async () => {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('raises held-out val/reward from the base model to >= 0.8, with RL adding >= 0.2 over SFT', async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-demo-'));
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/demo.ts'], {
      cwd: root,
      env: { ...process.env, POLICYLOOP_DEMO_DIR: dataDir, NO_COLOR: '1' },
      timeout: 600_000,
    });
    const historyPath = path.join(dataDir, 'demo', 'models', 'uppercase', 'history.jsonl');
    expect(stdout).toContain(historyPath);

    const rows = (await readFile(historyPath, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, number>);
    const val = rows.filter((row) => typeof row['val/reward'] === 'number');
    const [base, afterSft] = val;
    expect(base?.training_step).toBe(0);
    expect(base?.['val/reward']).toBeLessThanOrEqual(0.3);
    expect(afterSft?.training_step).toBe(1); // the SFT checkpoint
    // Evaluated at the base model, after SFT, and after every RL step: one row per step, no gaps.
    expect(val.length).toBeGreaterThan(3);
    expect(val.map((row) => row.training_step)).toEqual(val.map((_row, index) => index));
    // One printed line per step (base, sft, then rl), each with its val/reward.
    const stepLines = stdout.split('\n').filter((text) => /^\s*\d+\s+(base|sft|rl)\s/.test(text));
    expect(stepLines.map((text) => Number(text.trim().split(/\s+/)[0]))).toEqual(val.map((row) => row.training_step));
    // It ends by saying where the checkpoints are, and they are there.
    const checkpoints = /^checkpoints: (\S+)/m.exec(stdout)?.[1] ?? '';
    expect(checkpoints.startsWith(dataDir)).toBe(true);
    const last = val.at(-1);
    expect(await readdir(checkpoints)).toContain(`step-${last?.training_step}`);
    expect(last?.['val/reward']).toBeGreaterThanOrEqual(0.8);
    expect((last?.['val/reward'] ?? 0) - (afterSft?.['val/reward'] ?? 0)).toBeGreaterThanOrEqual(0.2);

    // It says where to watch, and the service behind the dashboard kept the curve: the same
    // val/reward per step, read back from the data directory the demo trained in.
    expect(stdout).toMatch(/^watch it train: http:\/\/127\.0\.0\.1:\d+\/#key=\S+$/m);
    const backend = await LocalBackend.start({ dataDir });
    try {
      const { client } = await backend.connect();
      const model = (await client.local.models.list({ project: 'demo', name: 'uppercase' })).data[0];
      expect(model).toBeDefined();
      const curve: { step: number; reward: number | undefined }[] = [];
      for await (const row of client.local.metrics.list(model?.id ?? '', { split: 'val' })) {
        curve.push({ step: row.step, reward: row.metrics['reward'] });
      }
      expect(curve.map((point) => point.step)).toEqual(val.map((row) => row.training_step));
      expect(curve.at(-1)?.reward).toBeCloseTo(last?.['val/reward'] ?? Number.NaN, 6);
    } finally {
      await backend.close();
    }
  }, 600_000);
});
