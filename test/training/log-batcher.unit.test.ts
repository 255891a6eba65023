/**
 * The log batcher with fake timers and a scripted fetch: batching by count, bytes and time,
 * retries, spooling, replay, backpressure and close. Every test checks that each group is
 * acknowledged exactly once or sits in the spool: nothing lost, nothing twice.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { APIUserAbortError, TrainingClient } from 'policyloop/client';
import { LogBatcher } from '../../src/training/log-batcher.js';
import { LogDeliveryError, LogFlushTimeoutError } from '../../src/training/errors.js';
import type { BatchSpooledEvent, LogBatcherOptions } from '../../src/training/log-batcher.js';
import type { SpoolRecord } from '../../src/training/spool.js';
import { group, scriptedLogFetch } from './support/scripted-fetch.js';

const MODEL_ID = '00000000-0000-4000-8000-000000000001';
let directory: string;

beforeEach(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'policyloop-batcher-'));
  // setImmediate stays real: `settle` uses it to let file I/O (the spool) finish between ticks.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
});

afterEach(async () => {
  vi.useRealTimers();
  await rm(directory, { recursive: true, force: true });
});

function batcherWith(fetch: typeof globalThis.fetch, options: Partial<LogBatcherOptions> = {}): LogBatcher {
  const client = new TrainingClient({ apiKey: 'test', baseURL: 'http://service.test/v1', fetch, maxRetries: 0 });
  return new LogBatcher({ client, modelId: MODEL_ID, spoolPath: path.join(directory, 'spool.jsonl'), ...options });
}

async function spoolRecords(): Promise<SpoolRecord[]> {
  try {
    const text = await readFile(path.join(directory, 'spool.jsonl'), 'utf8');
    return text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as SpoolRecord);
  } catch {
    return [];
  }
}

function idsOf(records: readonly SpoolRecord[]): string[] {
  return records.flatMap((record) =>
    record.trajectory_groups.map((entry) => String((entry.metadata as { id: string }).id)),
  );
}

/** Advances fake time in small ticks, letting real I/O run between them, until `promise` settles. */
async function settle<T>(promise: Promise<T>, maxMs = 120_000): Promise<T> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  for (let elapsed = 0; elapsed < maxMs && !done; elapsed += 50) {
    await vi.advanceTimersByTimeAsync(50);
    await new Promise((resolve) => setImmediate(resolve));
  }
  return promise;
}

const ids = (prefix: string, count: number) => Array.from({ length: count }, (_, index) => `${prefix}${index}`);

describe('LogBatcher batching', () => {
  it('sends full batches at once and the remainder only after maxDelay', async () => {
    const service = scriptedLogFetch();
    const batcher = batcherWith(service.fetch, { maxBatchGroups: 2, maxDelay: 1_000 });
    await batcher.add({ split: 'val', groups: ids('g', 5).map((id) => group(id)) });
    await vi.advanceTimersByTimeAsync(999);
    expect(service.calls.map((call) => call.groupIds)).toEqual([
      ['g0', 'g1'],
      ['g2', 'g3'],
    ]);
    await vi.advanceTimersByTimeAsync(1);
    expect(service.calls.map((call) => call.groupIds)).toEqual([['g0', 'g1'], ['g2', 'g3'], ['g4']]);
    expect(service.acknowledged).toEqual(ids('g', 5));
    expect(batcher.stats()).toMatchObject({ sentBatches: 3, sentGroups: 5, spooledGroups: 0, bufferedGroups: 0 });
  });

  it('keeps each request under maxBatchBytes and to one split', async () => {
    const service = scriptedLogFetch();
    const oneGroupBytes = Buffer.byteLength(JSON.stringify(group('a0')));
    const batcher = batcherWith(service.fetch, { maxBatchBytes: oneGroupBytes * 2 + 1, maxDelay: 50 });
    await batcher.add({ split: 'train', groups: ids('a', 3).map((id) => group(id)) });
    await batcher.add({ split: 'val', groups: ids('b', 2).map((id) => group(id)) });
    await settle(batcher.flush());
    expect(service.calls.map((call) => [call.split, call.groupIds])).toEqual([
      ['train', ['a0', 'a1']],
      ['train', ['a2']],
      ['val', ['b0', 'b1']],
    ]);
  });
});

describe('LogBatcher failures', () => {
  it('retries retryable failures with backoff and delivers each group once', async () => {
    const service = scriptedLogFetch((call) => (call < 2 ? 503 : 200));
    const batcher = batcherWith(service.fetch, { maxRetries: 3 });
    const attempts: number[] = [];
    batcher.on('batch:retry', (event) => attempts.push(event.attempts));
    await batcher.add({ split: 'val', groups: [group('x0'), group('x1')] });
    const flushed = batcher.flush();
    await vi.advanceTimersByTimeAsync(350);
    // The first backoff is at least 375 ms (0.5 s minus jitter): still only one attempt.
    expect(service.calls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(10_000);
    const stats = await flushed;
    expect(service.calls.map((call) => call.status)).toEqual([503, 503, 200]);
    // `attempts` counts as `batch:sent` and `batch:spooled` do (1 = the first try).
    expect(attempts).toEqual([1, 2]);
    expect(service.acknowledged).toEqual(['x0', 'x1']);
    expect(stats).toMatchObject({ sentGroups: 2, spooledGroups: 0 });
    expect(await spoolRecords()).toEqual([]);
  });

  it('spools a batch after its retries, reports it, and a later run replays it', async () => {
    const failing = scriptedLogFetch(() => 'connection-error');
    const batcher = batcherWith(failing.fetch, { maxRetries: 2, maxBatchGroups: 3 });
    const spooled: BatchSpooledEvent[] = [];
    batcher.on('batch:spooled', (event) => spooled.push(event));
    await batcher.add({ split: 'train', groups: ids('s', 4).map((id) => group(id)) });
    const stats = await settle(batcher.close());
    expect(failing.calls).toHaveLength(6); // two batches x (1 + 2 retries)
    expect(failing.acknowledged).toEqual([]);
    expect(stats).toMatchObject({ sentGroups: 0, spooledBatches: 2, spooledGroups: 4 });
    expect(spooled.map((event) => [event.groupCount, event.attempts])).toEqual([
      [3, 3],
      [1, 3],
    ]);
    const records = await spoolRecords();
    expect(idsOf(records)).toEqual(ids('s', 4));
    expect(records[0]).toMatchObject({ model_id: MODEL_ID, split: 'train', attempts: 3 });
    expect(records[0]?.error).toMatch(/connection/i);

    // The next run: the service is back.
    const working = scriptedLogFetch();
    const next = batcherWith(working.fetch);
    expect(await settle(next.replaySpool())).toEqual({
      replayedBatches: 2,
      replayedGroups: 4,
      respooledBatches: 0,
      unreadableLines: 0,
    });
    expect(working.acknowledged).toEqual(ids('s', 4));
    expect(working.calls.map((call) => call.split)).toEqual(['train', 'train']);
    expect(await spoolRecords()).toEqual([]);
    expect((await settle(next.replaySpool())).replayedBatches).toBe(0);
    expect(working.acknowledged).toHaveLength(4);
  });

  it('sends one Idempotency-Key per batch, the same on every retry and again on spool replay', async () => {
    /** Records the key of each request before the scripted service answers it. */
    const keyed = (service: ReturnType<typeof scriptedLogFetch>) => {
      const keys: (string | null)[] = [];
      const fetch = ((input: RequestInfo | URL, init?: RequestInit) => {
        keys.push(new Headers(init?.headers).get('idempotency-key'));
        return service.fetch(input, init);
      }) as typeof globalThis.fetch;
      return { keys, fetch };
    };
    // Batch a: fails twice, then arrives. Batch b: fails every attempt and is spooled.
    const flaky = scriptedLogFetch((call) => (call < 2 ? 'connection-error' : call === 2 ? 200 : 503));
    const first = keyed(flaky);
    const batcher = batcherWith(first.fetch, { maxRetries: 2, maxBatchGroups: 1 });
    await batcher.add({ split: 'train', groups: [group('a'), group('b')] });
    await settle(batcher.close());
    const [a, , , b] = first.keys;
    expect(first.keys).toEqual([a, a, a, b, b, b]);
    expect(a).toMatch(/^[0-9a-f-]{36}$/);
    expect(b).not.toBe(a);
    expect(flaky.acknowledged).toEqual(['a']);
    expect((await spoolRecords()).map((record) => record.idempotency_key)).toEqual([b]);

    // The next run replays batch b with the key it was first sent with.
    const working = scriptedLogFetch();
    const second = keyed(working);
    await settle(batcherWith(second.fetch).replaySpool());
    expect(second.keys).toEqual([b]);
    expect(working.acknowledged).toEqual(['b']);
  });

  it('spools a rejected batch (422) without retrying it', async () => {
    const service = scriptedLogFetch(() => 422);
    const batcher = batcherWith(service.fetch, { maxRetries: 5 });
    await batcher.add({ split: 'val', groups: [group('r0')] });
    expect((await settle(batcher.flush())).spooledGroups).toBe(1);
    expect(service.calls).toHaveLength(1);
    expect(idsOf(await spoolRecords())).toEqual(['r0']);
  });

  it('replay puts batches that fail again back into the spool', async () => {
    const failing = scriptedLogFetch(() => 500);
    const first = batcherWith(failing.fetch, { maxRetries: 0 });
    await first.add({ split: 'val', groups: [group('p0')] });
    await settle(first.close());
    const stillFailing = batcherWith(scriptedLogFetch(() => 500).fetch, { maxRetries: 0 });
    expect(await settle(stillFailing.replaySpool())).toMatchObject({ replayedBatches: 0, respooledBatches: 1 });
    expect(idsOf(await spoolRecords())).toEqual(['p0']);
  });

  it('sets a torn spool line aside instead of dropping it or failing the replay', async () => {
    const spoolPath = path.join(directory, 'spool.jsonl');
    const record: SpoolRecord = {
      model_id: MODEL_ID,
      split: 'val',
      trajectory_groups: [group('t0')],
      error: 'x',
      attempts: 1,
      spooled_at: new Date().toISOString(),
    };
    await writeFile(spoolPath, `${JSON.stringify(record)}\n{"model_id": "torn`);
    const service = scriptedLogFetch();
    expect(await settle(batcherWith(service.fetch).replaySpool())).toMatchObject({
      replayedGroups: 1,
      unreadableLines: 1,
    });
    expect(service.acknowledged).toEqual(['t0']);
    expect(await readFile(`${spoolPath}.unreadable`, 'utf8')).toBe('{"model_id": "torn\n');
  });

  it('rejects flush with the groups when they can be neither sent nor spooled', async () => {
    const notADirectory = path.join(directory, 'file');
    await writeFile(notADirectory, '');
    const client = new TrainingClient({
      apiKey: 'test',
      baseURL: 'http://service.test/v1',
      fetch: scriptedLogFetch(() => 422).fetch,
    });
    const batcher = new LogBatcher({ client, modelId: MODEL_ID, spoolPath: path.join(notADirectory, 'spool.jsonl') });
    await batcher.add({ split: 'val', groups: [group('lost?')] });
    const error = await settle(batcher.flush().catch((error: unknown) => error));
    expect(error).toBeInstanceOf(LogDeliveryError);
    expect((error as LogDeliveryError).trajectoryGroups).toEqual([group('lost?')]);
  });
});

describe('LogBatcher listeners', () => {
  it('a throwing listener neither spools a sent batch (no duplicate on replay) nor loses the rest; flush reports it', async () => {
    const service = scriptedLogFetch((call) => (call === 1 ? 503 : 200));
    const batcher = batcherWith(service.fetch, { maxBatchGroups: 1, maxRetries: 2 });
    batcher.on('batch:sent', () => {
      throw new Error('listener bug');
    });
    batcher.on('batch:retry', () => {
      throw new Error('retry listener bug');
    });
    await batcher.add({ split: 'val', groups: [group('s0'), group('s1'), group('s2')] });
    const error = await settle(batcher.flush().catch((caught: unknown) => caught));
    expect(String(error)).toContain('listener bug');
    expect(service.acknowledged).toEqual(['s0', 's1', 's2']);
    expect(await spoolRecords()).toEqual([]);
    expect(batcher.stats()).toMatchObject({ sentGroups: 3, spooledGroups: 0, bufferedGroups: 0, bufferedBytes: 0 });
  });
});

describe('LogBatcher memory and shutdown', () => {
  it('makes add wait while the buffer is full, until a batch is acknowledged', async () => {
    const service = scriptedLogFetch((call) => (call === 0 ? 'hold' : 200));
    const oneGroupBytes = Buffer.byteLength(JSON.stringify(group('m0')));
    const batcher = batcherWith(service.fetch, { maxBufferedBytes: oneGroupBytes * 2, maxDelay: 10_000 });
    await batcher.add({ split: 'val', groups: [group('m0'), group('m1')] });
    let added = false;
    const third = batcher.add({ split: 'val', groups: [group('m2')] }).then(() => {
      added = true;
    });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(added).toBe(false);
    expect(batcher.stats().bufferedGroups).toBe(2);
    service.release();
    await vi.advanceTimersByTimeAsync(0);
    await third;
    expect(added).toBe(true);
    await settle(batcher.flush());
    expect(service.acknowledged).toEqual(['m0', 'm1', 'm2']);
  });

  it('takes (params, options) as model.log does: add({ split, groups }, { signal }); other forms and keys are refused', async () => {
    const service = scriptedLogFetch((call) => (call === 0 ? 'hold' : 200));
    const oneGroupBytes = Buffer.byteLength(JSON.stringify(group('p0')));
    const batcher = batcherWith(service.fetch, { maxBufferedBytes: oneGroupBytes * 2, maxDelay: 10_000 });
    await batcher.add({ split: 'train', groups: [group('p0')] });
    await batcher.add({ split: 'train', groups: [group('p1')] });
    // The buffer is full: the signal in the options stops the wait for room.
    const controller = new AbortController();
    const waiting = batcher
      .add({ split: 'val', groups: [group('p2')] }, { signal: controller.signal })
      .catch((caught: unknown) => caught);
    controller.abort(new Error('no room'));
    const error = await waiting;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toEqual(new Error('no room'));
    service.release();
    await settle(batcher.flush());
    expect(service.calls.map((call) => [call.split, call.groupIds])).toEqual([['train', ['p0', 'p1']]]);
    await expect(batcher.add({ split: 'a', groups: 'p3' as never })).rejects.toThrow(/`groups`/);
    await expect(batcher.add('val' as never, [group('p4')] as never)).rejects.toThrow(
      'Expected `params` to be an options object, got "val"',
    );
    await expect(batcher.add({ split: 'val', group: [group('p4')] } as never)).rejects.toThrow(
      'Unknown option `group`; did you mean `groups`?',
    );
    await expect(batcher.replaySpool({ sigal: controller.signal } as never)).rejects.toThrow(
      'Unknown option `options.sigal`; did you mean `options.signal`?',
    );
  });

  it('close with an aborted signal spools everything pending at once, then rejects with APIUserAbortError', async () => {
    const service = scriptedLogFetch(() => 'hold');
    const batcher = batcherWith(service.fetch, { maxBatchGroups: 2, maxRetries: 5 });
    await batcher.add({ split: 'val', groups: ids('c', 5).map((id) => group(id)) });
    await vi.advanceTimersByTimeAsync(0);
    const controller = new AbortController();
    const closed = batcher.close({ signal: controller.signal }).catch((caught: unknown) => caught);
    const reason = new Error('shutting down');
    controller.abort(reason);
    const error = await settle(closed);
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    expect(service.acknowledged).toEqual([]);
    expect(batcher.stats()).toMatchObject({ sentGroups: 0, spooledGroups: 5, bufferedGroups: 0 });
    expect(idsOf(await spoolRecords()).sort()).toEqual(ids('c', 5));
    await expect(batcher.add({ split: 'val', groups: [group('late')] })).rejects.toThrow(/closed/);
  });

  it('a flush whose signal aborts rejects with APIUserAbortError but keeps delivering', async () => {
    const service = scriptedLogFetch((call) => (call === 0 ? 'hold' : 200));
    const batcher = batcherWith(service.fetch);
    await batcher.add({ split: 'val', groups: [group('f0')] });
    const controller = new AbortController();
    const flushed = batcher.flush({ signal: controller.signal }).catch((caught: unknown) => caught);
    const reason = new Error('impatient');
    controller.abort(reason);
    const error = await flushed;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    service.release();
    await settle(batcher.close());
    expect(service.acknowledged).toEqual(['f0']);
  });

  it('a flush that outlives its timeout rejects with LogFlushTimeoutError, not the abort error, and keeps delivering', async () => {
    const service = scriptedLogFetch((call) => (call === 0 ? 'hold' : 200));
    const batcher = batcherWith(service.fetch);
    await batcher.add({ split: 'val', groups: [group('t0')] });
    const flushed = batcher.flush({ timeout: 5_000 }).catch((caught: unknown) => caught);
    await vi.advanceTimersByTimeAsync(5_000);
    const error = await flushed;
    expect(error).toBeInstanceOf(LogFlushTimeoutError);
    expect(error).not.toBeInstanceOf(APIUserAbortError);
    expect((error as LogFlushTimeoutError).timeoutMs).toBe(5_000);
    service.release();
    await settle(batcher.close());
    expect(service.acknowledged).toEqual(['t0']);
  });

  it('a close that outlives its timeout spools what is pending and rejects with LogFlushTimeoutError', async () => {
    const service = scriptedLogFetch(() => 'hold');
    const batcher = batcherWith(service.fetch, { maxBatchGroups: 2 });
    await batcher.add({ split: 'val', groups: ids('k', 3).map((id) => group(id)) });
    const error = await settle(batcher.close({ timeout: 2_000 }).catch((caught: unknown) => caught));
    expect(error).toBeInstanceOf(LogFlushTimeoutError);
    expect(service.acknowledged).toEqual([]);
    expect(idsOf(await spoolRecords()).sort()).toEqual(ids('k', 3));
  });

  it('an abort during the backoff between retries of a batch spools it and rejects the close with APIUserAbortError', async () => {
    const service = scriptedLogFetch(() => 503);
    const batcher = batcherWith(service.fetch, { maxRetries: 5, retryDelay: 60_000 });
    const retrying = new Promise<void>((resolve) => batcher.once('batch:retry', () => resolve()));
    await batcher.add({ split: 'val', groups: [group('b0')] });
    const controller = new AbortController();
    const closed = batcher.close({ signal: controller.signal }).catch((caught: unknown) => caught);
    await retrying;
    const reason = new Error('enough');
    controller.abort(reason);
    const error = await settle(closed);
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    expect(service.calls).toHaveLength(1);
    expect(idsOf(await spoolRecords())).toEqual(['b0']);
  });
});
