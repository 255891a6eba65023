/**
 * Faults: a loopback proxy between the client and the real local service fails 20 % of the
 * requests (503 before forwarding, a reset before the service saw the request, a reset after it
 * handled it, a 50-300 ms delay). 1,000 single-group batches through LogBatchers and a round of
 * client calls (reads, model creates and training jobs with an `Idempotency-Key`) must all arrive,
 * exactly once, with nothing spooled.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrainingClient } from 'policyloop/client';
import { LogBatcher } from 'policyloop/training';
import { startServer, temporaryDirectory, type TestServer } from '../server/support/harness.js';
import { createStandInEngine } from '../server/support/stand-in-engine.js';
import { type FaultProxy, startFaultProxy } from './support/fault-proxy.js';

const BATCHES = 1_000;
const BATCHERS = 8;
let server: TestServer;
let proxy: FaultProxy;
let client: TrainingClient;

beforeAll(async () => {
  server = await startServer({ engine: createStandInEngine({ stepDelayMs: 1 }) });
  proxy = await startFaultProxy({ target: server.handle.url, faultRate: 0.2, seed: 20261123 });
  // Short retry delays: the test is about what arrives, not about backoff.
  client = new TrainingClient({
    baseURL: `${proxy.url}/v1`,
    apiKey: server.handle.apiKey,
    maxRetries: 12,
    retryDelay: 5,
    timeout: 30_000,
  });
});
afterAll(async () => {
  await proxy?.close();
  await server?.close();
});

describe('faults between the client and the service', () => {
  it('delivers 1,000 batches and every client write exactly once through 20 % injected faults', async () => {
    const started = performance.now();
    const model = await client.models.create(
      { project: 'faults', name: 'log-target', base_model: 'policyloop/tiny-chat' },
      { idempotencyKey: 'faults-log-target' },
    );
    const spoolDir = temporaryDirectory('policyloop-faults-');
    const batchers = Array.from(
      { length: BATCHERS },
      (_, index) =>
        new LogBatcher({
          client,
          modelId: model.id,
          spoolPath: join(spoolDir, `spool-${index}.jsonl`),
          maxBatchGroups: 1,
          maxDelay: 0,
          maxRetries: 12,
          retryDelay: 5,
          timeout: 30_000,
        }),
    );
    let retries = 0;
    for (const batcher of batchers) batcher.on('batch:retry', () => (retries += 1));

    // The batchers log side by side (each sends one batch at a time), while the client reads and writes.
    const logging = batchers.map(async (batcher, lane) => {
      for (let index = lane; index < BATCHES; index += BATCHERS) {
        await batcher.add({
          split: 'train',
          groups: [{ trajectories: [{ reward: index % 2 }], metadata: { batch: index } }],
        });
      }
      return await batcher.close();
    });
    const creates = Array.from({ length: 40 }, (_, index) =>
      client.models.create(
        { project: 'faults', name: `created-${index}`, base_model: 'policyloop/tiny-chat' },
        { idempotencyKey: `faults-create-${index}` },
      ),
    );
    const jobs = Array.from({ length: 10 }, (_, index) =>
      client.jobs.createRL(
        { model_id: model.id, trajectory_groups: [{ trajectories: [{ reward: 0 }, { reward: 1 }] }] },
        { idempotencyKey: `faults-job-${index}` },
      ),
    );
    let reads = 0;
    const reading = (async () => {
      for (let round = 0; round < 60; round += 1) {
        await client.baseModels.list();
        await client.checkpoints.list(model.id);
        await client.local.models.retrieve(model.id);
        reads += 3;
      }
    })();

    const stats = await Promise.all(logging);
    const createdModels = await Promise.all(creates);
    const createdJobs = await Promise.all(jobs);
    await reading;

    // Counted on the service directly, past the proxy.
    const direct = new TrainingClient({ baseURL: server.handle.baseURL, apiKey: server.handle.apiKey });
    const seen = new Map<number, number>();
    for await (const item of direct.local.trajectoryGroups.list(model.id, { limit: 100 })) {
      const batch = (item.group.metadata as { batch: number }).batch;
      seen.set(batch, (seen.get(batch) ?? 0) + 1);
    }
    const lost = Array.from({ length: BATCHES }, (_, index) => index).filter((index) => !seen.has(index));
    const twice = [...seen].filter(([, count]) => count > 1).map(([batch]) => batch);
    const spooled = stats.reduce((sum, stat) => sum + stat.spooledBatches, 0);
    const sent = stats.reduce((sum, stat) => sum + stat.sentBatches, 0);

    const modelNames: string[] = [];
    for await (const entry of direct.local.models.list({ project: 'faults' })) modelNames.push(entry.name);
    modelNames.sort();
    const listedJobs = [];
    for await (const job of direct.local.jobs.list(model.id)) listedJobs.push(job.id);

    console.log(
      `faults: ${BATCHES} batches through ${BATCHERS} LogBatchers + ${reads} reads, ${createdModels.length} model creates, ` +
        `${createdJobs.length} training jobs in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
        `proxy ${JSON.stringify(proxy.counts)}; batch retries ${retries}; ` +
        `lost ${lost.length}, stored twice ${twice.length}, spooled ${spooled}; ` +
        `models ${modelNames.length} (expected ${createdModels.length + 1}), jobs ${listedJobs.length} (expected ${createdJobs.length})`,
    );
    // The proxy did fail requests in each way (otherwise the test proves nothing).
    for (const kind of ['503', 'reset-before', 'reset-after', 'delay'] as const)
      expect(proxy.counts[kind], kind).toBeGreaterThan(20);
    expect(retries).toBeGreaterThan(0);
    expect({ lost, twice, spooled, sent }).toEqual({ lost: [], twice: [], spooled: 0, sent: BATCHES });
    for (let index = 0; index < BATCHERS; index += 1)
      expect(existsSync(join(spoolDir, `spool-${index}.jsonl`))).toBe(false);
    // Each create and each job exists once, and a retried create answered the same model.
    expect(modelNames).toEqual(['log-target', ...Array.from({ length: 40 }, (_, index) => `created-${index}`)].sort());
    expect(new Set(createdModels.map((entry) => entry.id)).size).toBe(40);
    expect(listedJobs.sort()).toEqual(createdJobs.map((job) => job.id).sort());
  });
});
