/**
 * `Idempotency-Key` on the POSTs that write, over HTTP against the real service: a retry with the
 * same key gets the first answer and writes nothing, another request with the key is a 422, a
 * key in flight is a 409, failed requests leave the key unused, and keys survive a restart until
 * they expire.
 */
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TrainingClient } from 'policyloop/client';
import { createApp, DATABASE_FILE, DEV_API_KEY, INTERRUPTED_MESSAGE } from 'policyloop/server';
import { openDatabase } from '../../src/server/sqlite.js';
import { closedAfterEach, type CallResult, temporaryDirectory, waitFor, type TestService } from './support/harness.js';
import { registerModel, sftJsonl } from './support/jobs.js';
import { startChild } from './support/child-service.js';
import { createStandInEngine } from './support/stand-in-engine.js';

/** Services on the stand-in engine, each closed after its test. */
const services = closedAfterEach(() => ({ engine: createStandInEngine() }));

/** A POST to a child service with the development key. */
async function childPost(
  url: string,
  path: string,
  body: unknown,
  key?: string,
): Promise<{ status: number; text: string }> {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${DEV_API_KEY}`,
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body: JSON.stringify(body),
  });
  return { status: response.status, text: await response.text() };
}

/** A service called in process. */
const start = services.startApp;

/** A service on a loopback port, for what needs one (a request body held half-sent on a connection). */
const startListening = services.startServer;

const group = (rewards: number[]) => ({ trajectories: rewards.map((reward) => ({ reward })) });
const jobBody = (modelId: string) => ({ model_id: modelId, trajectory_groups: [group([0, 1]), group([1, 0])] });

/** Row counts of a table, per model when `modelId` is given, read from the service's database. */
function countRows(dataDir: string, table: string, modelId?: string): number {
  const database = openDatabase(join(dataDir, DATABASE_FILE));
  try {
    const sql = `SELECT COUNT(*) AS count FROM ${table}${modelId === undefined ? '' : ' WHERE model_id = ?'}`;
    const row = database.prepare(sql).get(...(modelId === undefined ? [] : [modelId])) as { count: number };
    return row.count;
  } finally {
    database.close();
  }
}

function storedKeys(dataDir: string): string[] {
  const database = openDatabase(join(dataDir, DATABASE_FILE));
  try {
    return (database.prepare('SELECT key FROM idempotency_keys ORDER BY key').all() as { key: string }[]).map(
      (row) => row.key,
    );
  } finally {
    database.close();
  }
}

function post(server: TestService, path: string, body: unknown, key?: string, auth?: string): Promise<CallResult> {
  return server.call('POST', path, {
    body,
    ...(key === undefined ? {} : { headers: { 'idempotency-key': key } }),
    ...(auth === undefined ? {} : { auth }),
  });
}

function expectReplayOf(replay: CallResult, first: CallResult): void {
  expect(first.status).toBe(200);
  expect(first.headers.get('idempotent-replayed')).toBeNull();
  expect(replay.status).toBe(first.status);
  expect(replay.text).toBe(first.text);
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
}

function expectKeyError(response: CallResult, type: string, message: RegExp): void {
  expect(response.status).toBe(422);
  expect(response.body.detail).toEqual([{ loc: ['header', 'idempotency-key'], msg: expect.any(String), type }]);
  expect(response.body.detail[0].msg).toMatch(message);
}

describe('a retry with the same key and body', () => {
  it('gets the first answer of a log and stores the groups once', async () => {
    const server = await start();
    const model = await registerModel(server, 'log-once');
    const path = `/v1/preview/models/${model.id}/log`;
    const body = { split: 'train', trajectory_groups: [group([0, 1]), group([1, 1])] };
    const first = await post(server, path, body, 'log-batch-1');
    const replay = await post(server, path, body, 'log-batch-1');
    expectReplayOf(replay, first);
    expect(first.body).toMatchObject({ model_id: model.id, split: 'train', step: 0 });
    expect(countRows(server.dataDir, 'trajectory_groups', model.id)).toBe(2);
    expect(countRows(server.dataDir, 'step_metrics', model.id)).toBe(1);
  });

  it('gets the first answer of a training job and creates one job, whatever the key order and spacing', async () => {
    const server = await start();
    const model = await registerModel(server, 'job-once');
    const first = await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'job-1');
    // The same JSON value sent with its keys in another order and other whitespace.
    const reordered = JSON.stringify(
      { trajectory_groups: jobBody(model.id).trajectory_groups, model_id: model.id },
      null,
      2,
    );
    const replay = await server.call('POST', '/v1/preview/training-jobs', {
      raw: reordered,
      headers: { 'idempotency-key': 'job-1', 'content-type': 'application/json' },
    });
    expectReplayOf(replay, first);
    expect(first.body.status).toBe('PENDING');
    expect(countRows(server.dataDir, 'jobs', model.id)).toBe(1);
    // The job itself runs once, as usual.
    const job = await waitFor(
      () => server.call('GET', `/v1/preview/training-jobs/${first.body.id}`),
      (response) => response.body.status === 'COMPLETED',
    );
    expect(job.body.id).toBe(first.body.id);
  });

  it('gets the first answer of an SFT job and creates one job', async () => {
    const server = await start();
    const model = await registerModel(server, 'sft-once');
    const jsonl = sftJsonl([{ question: 'hi', answer: 'hello' }]);
    const body = {
      model_id: model.id,
      training_data_url: `data:application/jsonl;base64,${Buffer.from(jsonl).toString('base64')}`,
    };
    const first = await post(server, '/v1/preview/sft-training-jobs', body, 'sft-1');
    const replay = await post(server, '/v1/preview/sft-training-jobs', body, 'sft-1');
    expectReplayOf(replay, first);
    expect(countRows(server.dataDir, 'jobs', model.id)).toBe(1);
  });

  it('gets the first answer of a model create instead of the 409 a second create would get', async () => {
    const server = await start();
    const body = { project: 'keys', name: 'created-once', base_model: 'policyloop/tiny-chat' };
    const first = await post(server, '/v1/preview/models', body, 'model-1');
    const replay = await post(server, '/v1/preview/models', body, 'model-1');
    expectReplayOf(replay, first);
    expect(countRows(server.dataDir, 'models')).toBe(1);
    // Without the key the same request is a new one, and the name is taken.
    expect((await post(server, '/v1/preview/models', body)).status).toBe(409);
  });
});

describe('our client with an idempotencyKey', () => {
  it('creates one job when the connection breaks after the service handled the POST and the client retries', async () => {
    const server = await start();
    const model = await registerModel(server, 'client-retry');
    let attempts = 0;
    // The first attempt reaches the service, then its answer is lost (a reset after handling).
    const lossyFetch: typeof fetch = async (input, init) => {
      attempts += 1;
      const response = await server.fetch(input, init);
      if (attempts === 1) {
        await response.arrayBuffer();
        throw new TypeError('fetch failed: connection reset');
      }
      return response;
    };
    const client = new TrainingClient({
      apiKey: server.apiKey,
      baseURL: 'http://127.0.0.1/v1',
      fetch: lossyFetch,
    });
    const job = await client.jobs.createRL(jobBody(model.id), { idempotencyKey: 'client-job-1' });
    expect(attempts).toBe(2);
    expect(countRows(server.dataDir, 'jobs', model.id)).toBe(1);
    const stored = await server.call('GET', `/v1/preview/training-jobs/${job.id}`);
    expect(stored.status).toBe(200);
  });
});

describe('keys that do not match', () => {
  it('answers another body, path or method with the same key 422 in the FastAPI shape, storing nothing', async () => {
    const server = await start();
    const model = await registerModel(server, 'mismatch');
    const first = await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'shared-key');
    expect(first.status).toBe(200);
    const otherBody = { ...jobBody(model.id), trajectory_groups: [group([1, 0])] };
    expectKeyError(
      await post(server, '/v1/preview/training-jobs', otherBody, 'shared-key'),
      'idempotency_key_reused',
      /^Expected the same request as the first one sent with this Idempotency-Key \(POST \/v1\/preview\/training-jobs/,
    );
    expectKeyError(
      await post(
        server,
        `/v1/preview/models/${model.id}/log`,
        { split: 'train', trajectory_groups: [group([0, 1])] },
        'shared-key',
      ),
      'idempotency_key_reused',
      /use a new key for a new request/,
    );
    expect(countRows(server.dataDir, 'jobs', model.id)).toBe(1);
    expect(countRows(server.dataDir, 'trajectory_groups', model.id)).toBe(0);
  });

  it('writes twice for two keys, or without a key (unchanged)', async () => {
    const server = await start();
    const model = await registerModel(server, 'two-keys');
    const path = `/v1/preview/models/${model.id}/log`;
    const body = { split: 'train', trajectory_groups: [group([0, 1])] };
    const [a, b] = [await post(server, path, body, 'key-a'), await post(server, path, body, 'key-b')];
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    const [c, d] = [await post(server, path, body), await post(server, path, body)];
    expect([c.status, d.status]).toEqual([200, 200]);
    expect(d.headers.get('idempotent-replayed')).toBeNull();
    expect(countRows(server.dataDir, 'trajectory_groups', model.id)).toBe(4);
    const jobs = [
      await post(server, '/v1/preview/training-jobs', jobBody(model.id)),
      await post(server, '/v1/preview/training-jobs', jobBody(model.id)),
    ];
    expect(new Set(jobs.map((job) => job.body.id)).size).toBe(2);
    expect(storedKeys(server.dataDir)).toEqual(['key-a', 'key-b']);
  });

  it('keeps the keys of different API keys apart', async () => {
    const server = await start({ apiKeys: ['alice-key', 'bob-key'] });
    const body = { project: 'keys', name: 'shared', base_model: 'policyloop/tiny-chat', return_existing: true };
    const model = (await post(server, '/v1/preview/models', body, undefined, 'alice-key')).body;
    const alice = await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'same-key', 'alice-key');
    const bob = await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'same-key', 'bob-key');
    expect([alice.status, bob.status]).toEqual([200, 200]);
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    expect(bob.body.id).not.toBe(alice.body.id);
    expectReplayOf(await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'same-key', 'bob-key'), bob);
    expect(countRows(server.dataDir, 'jobs', model.id)).toBe(2);
  });

  it('422s a key that is empty, longer than 255 characters or not printable ASCII, and accepts 255', async () => {
    const server = await start();
    const model = await registerModel(server, 'bad-keys');
    const path = `/v1/preview/models/${model.id}/log`;
    const body = { split: 'train', trajectory_groups: [group([0, 1])] };
    expectKeyError(await post(server, path, body, ''), 'string_too_short', /got an empty value$/);
    expectKeyError(await post(server, path, body, 'k'.repeat(256)), 'string_too_long', /got 256 characters$/);
    expectKeyError(await post(server, path, body, 'tab\there'), 'string_pattern_mismatch', /printable ASCII/);
    expectKeyError(await post(server, path, body, 'caf\u00e9'), 'string_pattern_mismatch', /printable ASCII/);
    expect(countRows(server.dataDir, 'trajectory_groups', model.id)).toBe(0);
    const longest = 'k'.repeat(255);
    const first = await post(server, path, body, longest);
    expectReplayOf(await post(server, path, body, longest), first);
    // The key is checked after the API key: a bad key without credentials is still a 401.
    const anonymous = await server.call('POST', path, { body, auth: false, headers: { 'idempotency-key': '' } });
    expect(anonymous.status).toBe(401);
  });
});

describe('failed first requests', () => {
  it('are not stored: a retry with the same key can succeed', async () => {
    const server = await start();
    const model = await registerModel(server, 'failed-first');
    // A 422 (invalid body), then the corrected body with the same key.
    const invalid = await post(server, '/v1/preview/training-jobs', { model_id: model.id }, 'retry-me');
    expect(invalid.status).toBe(422);
    const corrected = await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'retry-me');
    expect(corrected.status).toBe(200);
    expect(corrected.headers.get('idempotent-replayed')).toBeNull();

    // A 409 (name taken), then the same request once the name is free again.
    const body = { project: 'keys', name: 'taken', base_model: 'policyloop/tiny-chat' };
    const taken = await post(server, '/v1/preview/models', body);
    const conflict = await post(server, '/v1/preview/models', body, 'create-taken');
    expect(conflict.status).toBe(409);
    expect((await server.call('DELETE', `/v1/preview/models/${taken.body.id}`)).status).toBe(200);
    const created = await post(server, '/v1/preview/models', body, 'create-taken');
    expect(created.status).toBe(200);
    expect(created.body.id).not.toBe(taken.body.id);
    expectReplayOf(await post(server, '/v1/preview/models', body, 'create-taken'), created);
  });
});

describe('atomicity', () => {
  it('stores a write and its key in one transaction: when the key cannot be stored, neither is', async () => {
    const server = await start();
    const model = await registerModel(server, 'atomic');
    const path = `/v1/preview/models/${model.id}/log`;
    const body = { split: 'train', trajectory_groups: [group([0, 1]), group([1, 0])] };
    // Stands in for a crash between the two: storing any key fails.
    const database = openDatabase(join(server.dataDir, DATABASE_FILE));
    try {
      database.exec(
        "CREATE TRIGGER refuse_keys BEFORE INSERT ON idempotency_keys BEGIN SELECT RAISE(ABORT, 'disk gone'); END",
      );
      expect((await post(server, path, body, 'atomic-log')).status).toBe(500);
      expect((await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'atomic-job')).status).toBe(500);
      expect(countRows(server.dataDir, 'trajectory_groups', model.id)).toBe(0);
      expect(countRows(server.dataDir, 'step_metrics', model.id)).toBe(0);
      expect(countRows(server.dataDir, 'jobs', model.id)).toBe(0);
      database.exec('DROP TRIGGER refuse_keys');
    } finally {
      database.close();
    }
    // The failed attempts left the keys unused: the retries write once.
    const log = await post(server, path, body, 'atomic-log');
    expect(log.status).toBe(200);
    expectReplayOf(await post(server, path, body, 'atomic-log'), log);
    expect(countRows(server.dataDir, 'trajectory_groups', model.id)).toBe(2);
    const job = await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'atomic-job');
    expect(job.status).toBe(200);
    expect(countRows(server.dataDir, 'jobs', model.id)).toBe(1);
  });
});

describe('a key in flight', () => {
  it('answers a second request with the key 409 (Retry-After) until the first is answered', async () => {
    const server = await startListening();
    const model = await registerModel(server, 'in-flight');
    const path = `/v1/preview/models/${model.id}/log`;
    const body = { split: 'train', trajectory_groups: [group([0, 1]), group([1, 0])] };
    const text = JSON.stringify(body);
    // The first request sends its headers and half its body, then waits.
    const held = httpRequest(`${server.handle.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${server.handle.apiKey}`,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(text)),
        'idempotency-key': 'slow-upload',
      },
    });
    const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
      held.on('error', reject);
      held.on('response', (response) => {
        let received = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          received += chunk;
        });
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text: received }));
      });
    });
    // Should an assertion below fail, the service's close cuts this request: not a second failure.
    answered.catch(() => undefined);
    const half = Math.floor(text.length / 2);
    await new Promise<void>((resolve, reject) =>
      held.write(text.slice(0, half), (error) => (error ? reject(error) : resolve())),
    );
    // A round trip started after the first request's headers were on the wire: the service has
    // taken them by the time it answers.
    expect((await server.call('GET', '/v1/health')).status).toBe(200);

    const overtaking = await post(server, path, body, 'slow-upload');
    expect(overtaking.status).toBe(409);
    expect(overtaking.body.detail).toMatch(/still being handled; retry once it has been answered/);
    expect(overtaking.headers.get('retry-after')).toBe('1');
    // Another key is not held up.
    expect((await post(server, path, body, 'other-key')).status).toBe(200);

    held.end(text.slice(half));
    const first = await answered;
    expect(first.status).toBe(200);
    const retry = await post(server, path, body, 'slow-upload');
    expect(retry.status).toBe(200);
    expect(retry.text).toBe(first.text);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(countRows(server.dataDir, 'trajectory_groups', model.id)).toBe(4);
  });
});

describe('keeping keys', () => {
  it('replays a key after a restart of the service on the same data directory', async () => {
    const dataDir = temporaryDirectory();
    const before = await start({ dataDir });
    const model = await registerModel(before, 'restart');
    const first = await post(before, '/v1/preview/training-jobs', jobBody(model.id), 'across-restarts');
    await before.close(false);

    const after = await start({ dataDir });
    const replay = await post(after, '/v1/preview/training-jobs', jobBody(model.id), 'across-restarts');
    expectReplayOf(replay, first);
    expect(countRows(dataDir, 'jobs', model.id)).toBe(1);
  });

  it('replays keys acknowledged before a kill -9 of the service process, with one write each', async () => {
    const dataDir = temporaryDirectory();
    const { child, url } = await startChild(dataDir);
    const registered = await childPost(url, '/v1/preview/models', {
      project: 'keys',
      name: 'killed',
      base_model: 'policyloop/tiny-chat',
    });
    const model = JSON.parse(registered.text) as { id: string };
    const logPath = `/v1/preview/models/${model.id}/log`;
    const logBody = { split: 'train', trajectory_groups: [group([0, 1]), group([1, 0])] };
    const log = await childPost(url, logPath, logBody, 'before-kill-log');
    const job = await childPost(url, '/v1/preview/training-jobs', jobBody(model.id), 'before-kill-job');
    expect([registered.status, log.status, job.status]).toEqual([200, 200, 200]);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;

    const server = await start({ dataDir });
    const logReplay = await post(server, logPath, logBody, 'before-kill-log');
    expect(logReplay.text).toBe(log.text);
    expect(logReplay.headers.get('idempotent-replayed')).toBe('true');
    const jobReplay = await post(server, '/v1/preview/training-jobs', jobBody(model.id), 'before-kill-job');
    expect(jobReplay.text).toBe(job.text);
    // The answer is the one first given; the job itself was failed by the restart, as documented.
    expect(jobReplay.body.status).toBe('PENDING');
    const current = await server.call('GET', `/v1/preview/training-jobs/${jobReplay.body.id}`);
    expect(current.body).toMatchObject({ status: 'FAILED', error_message: INTERRUPTED_MESSAGE });
    expect(countRows(dataDir, 'trajectory_groups', model.id)).toBe(2);
    expect(countRows(dataDir, 'jobs', model.id)).toBe(1);
  });

  it('forgets keys older than idempotencyKeyRetentionMs, and deletes them on start and on later writes', async () => {
    const retention = 300;
    const dataDir = temporaryDirectory();
    const server = await start({ dataDir, idempotencyKeyRetentionMs: retention });
    const model = await registerModel(server, 'expiry');
    const path = `/v1/preview/models/${model.id}/log`;
    const body = { split: 'train', trajectory_groups: [group([0, 1])] };
    const first = await post(server, path, body, 'short-lived');
    const storedAt = Date.now();
    expect(first.status).toBe(200);
    await waitFor(
      async () => Date.now(),
      (now) => now > storedAt + retention,
    );
    // Expired: the same key and body are a new request, written again.
    const again = await post(server, path, body, 'short-lived');
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(countRows(dataDir, 'trajectory_groups', model.id)).toBe(2);

    // A later write deletes the keys that expired meanwhile.
    const againAt = Date.now();
    await waitFor(
      async () => Date.now(),
      (now) => now > againAt + retention,
    );
    expect((await post(server, path, body, 'fresh')).status).toBe(200);
    expect(storedKeys(dataDir)).toEqual(['fresh']);

    // A start deletes the keys that expired while no service ran.
    await server.close(false);
    const freshAt = Date.now();
    await waitFor(
      async () => Date.now(),
      (now) => now > freshAt + retention,
    );
    await start({ dataDir, idempotencyKeyRetentionMs: retention });
    expect(storedKeys(dataDir)).toEqual([]);
  });

  it('refuses a retention that is not a positive integer before opening anything', async () => {
    await expect(createApp({ dataDir: temporaryDirectory(), idempotencyKeyRetentionMs: 0 })).rejects.toThrow(
      'Expected `idempotencyKeyRetentionMs` to be an integer >= 1, got 0',
    );
    await expect(createApp({ dataDir: temporaryDirectory(), idempotencyKeyRetentionMs: 1.5 })).rejects.toThrow(
      'Expected `idempotencyKeyRetentionMs` to be an integer >= 1, got 1.5',
    );
  });
});
