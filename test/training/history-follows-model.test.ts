/**
 * History follows the model: the client's rows reach the local service, `model.history()` reads
 * them back from it whichever data directory wrote them, and falls back to `history.jsonl` for a
 * service without the local routes.
 */
import { appendFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Backend, BackendConnection } from '../../src/training/backend.js';
import { HostedBackend } from '../../src/backends/hosted-backend.js';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { TrainableModel } from '../../src/training/trainable-model.js';
import type { HistoryErrorEvent, HistoryMismatchEvent } from '../../src/training/model-events.js';
import { killChildren, startServeCli } from '../cli/support/run-cli.js';

const BASE_MODEL = 'policyloop/tiny-chat';
const SFT_ROW = {
  messages: [
    { role: 'user' as const, content: 'q' },
    { role: 'assistant' as const, content: 'a' },
  ],
};
const directories: string[] = [];

async function temporaryDirectory(): Promise<string> {
  const directory = await mkdtemp(path.join(tmpdir(), 'policyloop-history-'));
  directories.push(directory);
  return directory;
}

/** A val row of reward `reward` at the model's current step, history only. */
async function logVal(model: TrainableModel, reward: number): Promise<void> {
  await model.log({ groups: [{ trajectories: [{ reward }, { reward }] }], split: 'val', send: false });
}

afterEach(() => killChildren());
afterAll(async () => {
  for (const directory of directories) await rm(directory, { recursive: true, force: true });
});

describe('history follows the model', () => {
  it('returns every row through `policyloop serve` from another data dir, and prunes by them', async () => {
    // A script trains with the in-process service on data dir A.
    const dataDirA = await temporaryDirectory();
    const first = await LocalBackend.start({ dataDir: dataDirA });
    const model = await new TrainableModel({ project: 'reverse', name: 'agent', baseModel: BASE_MODEL }).register(
      first,
    );
    const rewards = [0.1, 0.9, 0.3];
    await logVal(model, rewards[0] as number);
    for (const reward of rewards.slice(1)) {
      await model.trainSFT([SFT_ROW]);
      await logVal(model, reward);
    }
    await model.close();
    await first.close();

    // Later the same model is reached through `policyloop serve --data-dir A`, from data dir B
    // (whose SFT files that service may read only as a training data root).
    const dataDirB = await temporaryDirectory();
    const served = await startServeCli(dataDirA, ['--training-data-root', dataDirB]);
    try {
      const second = new LocalBackend({ url: served.url, dataDir: dataDirB });
      const again = await new TrainableModel({ project: 'reverse', name: 'agent', baseModel: BASE_MODEL }).register(
        second,
      );
      await again.trainSFT([SFT_ROW]);
      await logVal(again, 0.5);
      // B's own file has only B's rows ...
      const fileRows = (await readFile(again.files.history, 'utf8')).trim().split('\n');
      expect(fileRows).toHaveLength(2);

      // ... but the history is the model's: every step, whoever wrote it.
      const mismatches: HistoryMismatchEvent[] = [];
      again.on('history:mismatch', (event) => mismatches.push(event));
      const history = await again.history();
      expect(history.map((row) => row.training_step)).toEqual([0, 1, 2, 3]);
      expect(history.map((row) => row['val/reward'])).toEqual([0.1, 0.9, 0.3, 0.5]);
      expect(history.slice(0, 3).every((row) => typeof row['sft/loss'] === 'number')).toBe(true);
      // The file lacks A's steps: the warning names them, nothing only B has.
      expect(mismatches).toEqual([
        { onlyInService: [0, 1, 2], onlyInFile: [], differing: [], path: again.files.history },
      ]);

      // The best step by val/reward comes from A's rows.
      const pruned = await again.pruneCheckpoints({ keepBestBy: 'val/reward' });
      expect(pruned).toMatchObject({ kept: [1, 3], deleted: [2], bestStep: 1 });
      await again.close();
      await second.close();
    } finally {
      await served.stop();
    }
  });

  it('warns when history.jsonl has a row the service does not, and returns the service rows', async () => {
    const backend = await LocalBackend.start({ dataDir: await temporaryDirectory() });
    try {
      const model = await new TrainableModel({ project: 'p', name: 'm', baseModel: BASE_MODEL }).register(backend);
      await logVal(model, 0.25);
      const agreeing: HistoryMismatchEvent[] = [];
      model.on('history:mismatch', (event) => agreeing.push(event));
      expect(await model.history()).toMatchObject([{ training_step: 0, 'val/reward': 0.25 }]);
      expect(agreeing).toEqual([]);
      // A row written to the file only (e.g. by an older client), with another value at step 0.
      await appendFile(
        model.files.history,
        `${JSON.stringify({ 'val/reward': 0.75, training_step: 0, recorded_at: new Date().toISOString() })}\n` +
          `${JSON.stringify({ 'val/reward': 0.5, training_step: 7, recorded_at: new Date().toISOString() })}\n`,
      );
      const history = await model.history();
      expect(history).toMatchObject([{ training_step: 0, 'val/reward': 0.25 }]);
      expect(history).toHaveLength(1);
      expect(agreeing).toEqual([{ onlyInService: [], onlyInFile: [7], differing: [0], path: model.files.history }]);
      await model.close();
    } finally {
      await backend.close();
    }
  });

  it('a failing metrics route never fails training: history:error, then the row arrives later', async () => {
    let failing = true;
    let refused = 0;
    const flaky: typeof globalThis.fetch = async (input, init) => {
      if (failing && init?.method === 'POST' && String(input).endsWith('/metrics')) {
        refused += 1;
        throw new TypeError('fetch failed: connection reset');
      }
      return fetch(input, init);
    };
    const backend = await LocalBackend.start({ dataDir: await temporaryDirectory(), fetch: flaky, maxRetries: 0 });
    try {
      const model = await new TrainableModel({ project: 'p', name: 'flaky', baseModel: BASE_MODEL }).register(backend);
      const errors: HistoryErrorEvent[] = [];
      model.on('history:error', (event) => errors.push(event));
      const result = await model.trainSFT([SFT_ROW]);
      expect(result.step).toBe(1);
      expect(errors).toMatchObject([{ step: 0, split: 'sft', dropped: false, pending: 1 }]);
      expect(refused).toBe(1);
      // The row is in history.jsonl meanwhile.
      expect(await readFile(model.files.history, 'utf8')).toContain('sft/loss');
      failing = false;
      const mismatches: HistoryMismatchEvent[] = [];
      model.on('history:mismatch', (event) => mismatches.push(event));
      const history = await model.history();
      expect(history).toHaveLength(1);
      expect(history[0]?.['sft/loss']).toBe(result.metrics['sft/loss']);
      expect(mismatches).toEqual([]);
      await model.close();
    } finally {
      await backend.close();
    }
  });

  it('keeps history.jsonl only for a service without local routes, and asks a backend that does not say', async () => {
    const service = await LocalBackend.start({ dataDir: await temporaryDirectory() });
    try {
      const connection = await service.connect();
      // HostedBackend says its service has no local routes: nothing is sent to them.
      const hosted = new HostedBackend({
        baseURL: connection.baseURL,
        apiKey: connection.apiKey,
        dataDir: await temporaryDirectory(),
      });
      const onHosted = await new TrainableModel({ project: 'p', name: 'hosted', baseModel: BASE_MODEL }).register(
        hosted,
      );
      await logVal(onHosted, 0.4);
      expect(await onHosted.history()).toMatchObject([{ training_step: 0, 'val/reward': 0.4 }]);
      expect((await connection.client.local.metrics.list(onHosted.id)).data).toEqual([]);

      // A backend whose connection does not say: the model asks the service once.
      const dataDir = await temporaryDirectory();
      const { localRoutes: _omitted, ...unsaid } = connection;
      const custom: Backend = {
        kind: 'local',
        dataDir,
        connect: async (): Promise<BackendConnection> => unsaid,
        defaultLearningRate: async () => null,
        localFileUrl: () => null,
        close: async () => {},
      };
      const onCustom = await new TrainableModel({ project: 'p', name: 'custom', baseModel: BASE_MODEL }).register(
        custom,
      );
      await logVal(onCustom, 0.6);
      const [row] = (await connection.client.local.metrics.list(onCustom.id)).data;
      expect(row).toMatchObject({ step: 0, split: 'val', metrics: { reward: 0.6 } });
      await onHosted.close();
      await onCustom.close();
    } finally {
      await service.close();
    }
  });

  it('gives a log the batcher sent in several requests the metrics of all its groups', async () => {
    const backend = await LocalBackend.start({ dataDir: await temporaryDirectory() });
    const model = await new TrainableModel({ project: 'batches', name: 'agent', baseModel: BASE_MODEL }).register(
      backend,
    );
    try {
      model.configureLogging({ maxBatchGroups: 2 }); // 5 groups go in 3 requests
      const rewards = [
        [1, 0],
        [1, 1],
        [0, 0],
        [1, 0],
        [0.5, 0.5],
      ];
      await model.log({
        groups: rewards.map((pair) => ({ trajectories: pair.map((reward) => ({ reward })) })),
        split: 'val',
      });
      await model.flushLogs();
      const [row] = await model.history();
      // The mean over all 10 trajectories and all 5 groups, as the client computed it: not the last request's.
      expect(row?.['val/reward']).toBeCloseTo(0.5, 12);
      expect(row?.['val/frac_reward_zero_std']).toBeCloseTo(3 / 5, 12);
      expect(row?.['val/data/step_num_groups_submitted']).toBe(5);
      expect(row?.['val/data/step_num_trajectories']).toBe(10);
    } finally {
      await model.close();
      await backend.close();
    }
  });
});
