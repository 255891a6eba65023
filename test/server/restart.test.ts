/**
 * Durability and the restart rule: a service process is killed with SIGKILL while a job runs and
 * another waits; a new service on the same data directory still has every acknowledged write, and
 * fails both jobs with their terminal event instead of leaving them hanging.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DATABASE_FILE, DEV_API_KEY, INTERRUPTED_MESSAGE } from 'policyloop/server';
import { openDatabase } from '../../src/server/sqlite.js';
import { closedAfterEach, startApp, temporaryDirectory, waitFor } from './support/harness.js';
import { followEvents } from './support/jobs.js';
import { startChild } from './support/child-service.js';
import { createStandInEngine } from './support/stand-in-engine.js';

const services = closedAfterEach();

async function call(url: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  expect(response.status, `${method} ${path}`).toBe(200);
  return await response.json();
}

describe('restart', () => {
  it('keeps acknowledged writes through kill -9 and fails the jobs the dead process left behind', async () => {
    const dataDir = temporaryDirectory();
    const { child, url } = await startChild(dataDir);
    const model = await call(url, 'POST', '/v1/preview/models', {
      project: 'restart',
      name: 'survivor',
      base_model: 'policyloop/tiny-chat',
    });
    const groups = [{ trajectories: [{ reward: 1 }, { reward: 0 }] }, { trajectories: [{ reward: 1 }] }];
    await call(url, 'POST', `/v1/preview/models/${model.id}/log`, { split: 'train', trajectory_groups: groups });
    const running = await call(url, 'POST', '/v1/preview/training-jobs', {
      model_id: model.id,
      trajectory_groups: groups,
    });
    const pending = await call(url, 'POST', '/v1/preview/training-jobs', {
      model_id: model.id,
      trajectory_groups: groups,
    });
    await waitFor(
      () => call(url, 'GET', `/v1/preview/training-jobs/${running.id}`),
      (job) => job.status === 'RUNNING',
    );
    expect((await call(url, 'GET', `/v1/preview/training-jobs/${pending.id}`)).status).toBe('PENDING');

    // While it lives, no second service may take its data directory (it would fail its jobs).
    await expect(startApp({ dataDir, engine: createStandInEngine() })).rejects.toThrow(
      `in use by process ${child.pid}`,
    );

    const halfWritten = join(dataDir, 'weights', model.id, 'step-1');
    await waitFor(
      async () => existsSync(join(halfWritten, 'partial.bin')),
      (exists) => exists,
    );

    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;

    const server = await services.startApp({ dataDir, engine: createStandInEngine() });
    const again = await server.call('POST', '/v1/preview/models', {
      body: { project: 'restart', name: 'survivor', base_model: 'policyloop/tiny-chat', return_existing: true },
    });
    expect(again.body.id).toBe(model.id);
    for (const jobId of [running.id, pending.id]) {
      const job = await server.call('GET', `/v1/preview/training-jobs/${jobId}`);
      expect(job.body).toMatchObject({ status: 'FAILED', error_message: INTERRUPTED_MESSAGE });
      const { events } = await followEvents(server, jobId);
      expect(
        events
          .filter((event) => event.type === 'training_failed' || event.type === 'training_ended')
          .map((event) => event.type),
      ).toEqual(['training_failed']);
      expect(events[events.length - 1]?.data).toEqual({ error_message: INTERRUPTED_MESSAGE });
    }
    expect((await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`)).body.data).toEqual([]);
    // The dead job's half-written checkpoint was removed.
    expect(existsSync(halfWritten)).toBe(false);

    const database = openDatabase(join(dataDir, DATABASE_FILE), { readonly: true });
    try {
      // WAL is a property of the file: a reader sees the mode the service set.
      expect(database.pragmaValue('journal_mode')).toBe('wal');
      expect(
        database.prepare('SELECT COUNT(*) AS count FROM trajectory_groups WHERE model_id = ?').get(model.id),
      ).toEqual({ count: 2 });
      const metrics = database
        .prepare('SELECT split, step, metrics FROM step_metrics WHERE model_id = ?')
        .all(model.id) as { split: string; step: number; metrics: string }[];
      expect(metrics).toHaveLength(1);
      expect(JSON.parse(metrics[0]?.metrics ?? '{}')).toMatchObject({
        reward: 2 / 3,
        'data/step_num_groups_trainable': 1,
      });
    } finally {
      database.close();
    }

    // The queue works again after the restart: a new job trains to step 1.
    const next = await server.call('POST', '/v1/preview/training-jobs', {
      body: { model_id: model.id, trajectory_groups: groups },
    });
    const { events } = await followEvents(server, next.body.id);
    expect(events[events.length - 1]?.type).toBe('training_ended');
  });
});

describe('store schema', () => {
  it('refuses a database written by a newer policyloop instead of changing it', async () => {
    const dataDir = temporaryDirectory();
    const first = await startApp({ dataDir, engine: createStandInEngine() });
    await first.close(false);
    const database = openDatabase(join(dataDir, DATABASE_FILE));
    const current = Number(database.pragmaValue('user_version'));
    expect(current).toBeGreaterThan(0);
    database.exec(`PRAGMA user_version = ${current + 1}`);
    database.close();
    await expect(startApp({ dataDir, engine: createStandInEngine() })).rejects.toThrow(
      /newer than this policyloop knows/,
    );
    // The refused start left the directory usable: put the version back and it opens.
    const restored = openDatabase(join(dataDir, DATABASE_FILE));
    restored.exec(`PRAGMA user_version = ${current}`);
    restored.close();
    const reopened = await services.startApp({ dataDir, engine: createStandInEngine() });
    expect((await reopened.call('GET', '/v1/system-check', { auth: false })).status).toBe(200);
  });
});
