/**
 * Crash: `policyloop serve` in its own process is killed with SIGKILL five times, each time while
 * many log POSTs are in flight and a training job is RUNNING (another waits behind it), then
 * started again on the same data directory. Every acknowledged write (a log batch or a job that
 * got a 200) must be there after each restart, no job may stay PENDING or RUNNING, and each
 * interrupted job must end with exactly one terminal event.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { TrainingClient } from 'policyloop/client';
import { DEV_API_KEY, INTERRUPTED_MESSAGE } from 'policyloop/server';
import { temporaryDirectory, waitFor } from '../server/support/harness.js';
import { killHard, startServeProcess } from './support/serve-process.js';

const KILLS = 5;
const LOGGERS = 16;
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** SFT rows enough for a job that trains for many seconds (batch size 1). */
function sftDataUrl(cycle: number): string {
  const rows = Array.from({ length: 400 }, (_, index) =>
    JSON.stringify({
      messages: [
        { role: 'user', content: `cycle ${cycle} question ${index}` },
        { role: 'assistant', content: `answer ${index}` },
      ],
    }),
  ).join('\n');
  return `data:application/jsonl,${encodeURIComponent(rows)}`;
}

describe('crash', () => {
  it('keeps every acknowledged write and ends every job through five kill -9 restarts', async () => {
    const dataDir = temporaryDirectory('policyloop-crash-');
    let { child, url } = await startServeProcess(dataDir, (started) => children.push(started));
    let client = new TrainingClient({ baseURL: `${url}/v1`, apiKey: DEV_API_KEY });
    const model = await client.models.create({
      project: 'crash',
      name: 'survivor',
      base_model: 'policyloop/tiny-chat',
    });

    const acknowledgedLogs = new Set<string>();
    const unacknowledgedLogs = new Set<string>();
    const acknowledgedJobs: string[] = [];
    const interruptedJobs: string[] = [];
    const figures: string[] = [];
    let sequence = 0;

    for (let cycle = 0; cycle < KILLS; cycle += 1) {
      const cycleStart = performance.now();
      // Loggers POST one group each, over and over, until the process dies under them.
      let stopped = false;
      const cycleAcks = { before: acknowledgedLogs.size };
      const loggers = Array.from({ length: LOGGERS }, async () => {
        while (!stopped) {
          const id = `c${cycle}-${sequence++}`;
          try {
            const response = await fetch(`${url}/v1/preview/models/${model.id}/log`, {
              method: 'POST',
              headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
              body: JSON.stringify({
                split: 'train',
                trajectory_groups: [{ trajectories: [{ reward: 1 }], metadata: { id } }],
              }),
            });
            await response.arrayBuffer();
            if (response.status === 200) acknowledgedLogs.add(id);
            else unacknowledgedLogs.add(id);
          } catch {
            unacknowledgedLogs.add(id);
          }
        }
      });
      const running = await client.jobs.createSFT({
        model_id: model.id,
        training_data_url: sftDataUrl(cycle),
        config: { batch_size: 1 },
      });
      const queued = await client.jobs.createSFT({
        model_id: model.id,
        training_data_url: sftDataUrl(cycle),
        config: { batch_size: 1 },
      });
      acknowledgedJobs.push(running.id, queued.id);
      await waitFor(
        () => client.jobs.retrieve(running.id),
        (job) => job.status === 'RUNNING',
      );
      // Logging is under way too: a good number of batches acknowledged, more in flight.
      await waitFor(
        async () => acknowledgedLogs.size - cycleAcks.before,
        (count) => count >= 50,
      );
      const killedAt = performance.now();
      await killHard(child);
      stopped = true;
      await Promise.all(loggers);
      interruptedJobs.push(running.id, queued.id);

      ({ child, url } = await startServeProcess(dataDir, (started) => children.push(started)));
      const restartMs = performance.now() - killedAt;
      client = new TrainingClient({ baseURL: `${url}/v1`, apiKey: DEV_API_KEY });

      // Every acknowledged batch is there, none twice.
      const stored = new Map<string, number>();
      for await (const item of client.local.trajectoryGroups.list(model.id, { limit: 100 })) {
        const id = (item.group.metadata as { id: string }).id;
        stored.set(id, (stored.get(id) ?? 0) + 1);
      }
      const missing = [...acknowledgedLogs].filter((id) => !stored.has(id));
      const twice = [...stored].filter(([, count]) => count > 1);
      const inFlightStored = [...unacknowledgedLogs].filter((id) => stored.has(id)).length;
      expect({ missing, twice }).toEqual({ missing: [], twice: [] });

      // Every acknowledged job is terminal; the ones the kill interrupted failed with one terminal event.
      for (const jobId of acknowledgedJobs) {
        const job = await client.jobs.retrieve(jobId);
        expect(['COMPLETED', 'FAILED'], `${jobId} is ${job.status}`).toContain(job.status);
        const terminal: string[] = [];
        let last: { type: string; data: unknown } | undefined;
        for await (const event of client.jobs.events(jobId)) {
          if (event.type === 'training_ended' || event.type === 'training_failed') terminal.push(event.type);
          last = event;
        }
        expect(terminal, jobId).toHaveLength(1);
        if (interruptedJobs.includes(jobId)) {
          expect(job).toMatchObject({ status: 'FAILED', error_message: INTERRUPTED_MESSAGE });
          expect(last).toMatchObject({ type: 'training_failed', data: { error_message: INTERRUPTED_MESSAGE } });
        }
      }
      figures.push(
        `kill ${cycle + 1}: ${acknowledgedLogs.size - cycleAcks.before} batches acknowledged, ` +
          `${unacknowledgedLogs.size} unacknowledged so far (${inFlightStored} of them stored), ${stored.size} stored in all; ` +
          `killed after ${(killedAt - cycleStart).toFixed(0)} ms, ready again ${restartMs.toFixed(0)} ms later`,
      );
    }
    console.log(
      `crash: ${KILLS} kill -9 restarts, ${LOGGERS} concurrent loggers; ${acknowledgedLogs.size} acknowledged batches, ` +
        `0 missing, 0 stored twice; ${acknowledgedJobs.length} acknowledged jobs, all terminal, ` +
        `${interruptedJobs.length} interrupted with exactly one training_failed\n  ${figures.join('\n  ')}`,
    );

    // The service works normally after the last restart: a write is acknowledged and a clean stop exits 0.
    await client.models.log(model.id, { split: 'val', trajectory_groups: [{ trajectories: [{ reward: 0 }] }] });
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exit).toBe(0);
  });
});
