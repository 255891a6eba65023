/**
 * Following a job's events with fake timers and a scripted events endpoint: the poll back-off,
 * `after=` cursors, progress, the terminal events, the overall timeout and abort.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { APIUserAbortError, InvalidArgumentError, TrainingClient } from 'policyloop/client';
import { followTrainingJob } from '../../src/training/follow-job.js';
import { TrainingJobFailedError, TrainingTimeoutError } from '../../src/training/errors.js';
import type { JobProgress } from '../../src/training/follow-job.js';

const JOB_ID = '00000000-0000-4000-8000-00000000000a';
const MODEL_ID = '00000000-0000-4000-8000-00000000000b';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

interface ScriptedEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/**
 * An events endpoint whose events become visible as `publish` is called; records `after` cursors.
 * With `longPoll` it honours `wait_ms` as the local service does: an empty answer waits for the
 * next event or that long; without, it answers at once, as a service that ignores `wait_ms`.
 */
function scriptedJob(options: { longPoll?: boolean } = {}) {
  const visible: ScriptedEvent[] = [];
  const cursors: Array<string | null> = [];
  const waiting: Array<() => void> = [];
  let status = 'RUNNING';
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = new URL(String(input));
    const json = (body: unknown) =>
      new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
    if (url.pathname.endsWith('/events')) {
      const after = url.searchParams.get('after');
      cursors.push(after);
      const startOf = () => (after === null ? 0 : visible.findIndex((event) => event.id === after) + 1);
      const waitMs = Number(url.searchParams.get('wait_ms') ?? 0);
      if (options.longPoll === true && waitMs > 0 && startOf() >= visible.length) {
        await new Promise<void>((resolve, reject) => {
          waiting.push(resolve);
          setTimeout(resolve, waitMs);
          init?.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true });
        });
      }
      const start = startOf();
      const data = visible.slice(start, start + 2); // small pages, so has_more is followed
      return json({ object: 'list', data, first_id: '', last_id: '', has_more: start + 2 < visible.length });
    }
    return json({
      id: JOB_ID,
      model_id: MODEL_ID,
      status,
      progress: null,
      error_message: status === 'FAILED' ? 'out of memory' : null,
      training_start: null,
      training_end: null,
      created_at: '2026-01-01T00:00:00Z',
      updated_at: '2026-01-01T00:00:00Z',
    });
  };
  let counter = 0;
  const publish = (type: string, data: Record<string, unknown> = {}) => {
    counter += 1;
    visible.push({ id: `00000000-0000-4000-8000-${String(counter).padStart(12, '0')}`, type, data });
    for (const resolve of waiting.splice(0)) resolve();
  };
  const client = new TrainingClient({
    apiKey: 'test',
    baseURL: 'http://service.test/v1',
    fetch: fetch as typeof globalThis.fetch,
  });
  return { client, publish, cursors, setStatus: (value: string) => (status = value) };
}

describe('followTrainingJob', () => {
  it('polls with the last event id, reports progress, and averages gradient metrics', async () => {
    const job = scriptedJob();
    const progress: JobProgress[] = [];
    const followed = followTrainingJob(job.client, JOB_ID, { onProgress: (p) => progress.push(p) });
    let settled = false;
    void followed.then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(job.cursors).toEqual([null]);
    job.publish('training_started', { num_sequences: 2 });
    job.publish('gradient_step', { loss: 1, reward: 0.5 });
    job.publish('gradient_step', { loss: 3, reward: 0.7 });
    await vi.advanceTimersByTimeAsync(1_000); // the longest wait between polls
    expect(progress.map((p) => [p.event.type, p.gradientSteps, p.fraction])).toEqual([
      ['training_started', 0, 0],
      ['gradient_step', 1, 0.5],
      ['gradient_step', 2, 1],
    ]);
    // Two events per page: the second page is fetched from the first one's last event, at once.
    const cursorIndex = job.cursors.indexOf(progress[1]?.event.id ?? '');
    expect(cursorIndex).toBeGreaterThan(0);
    expect(job.cursors[cursorIndex - 1]).toBeNull();
    expect(job.cursors.slice(cursorIndex + 1).every((cursor) => cursor === progress[2]?.event.id)).toBe(true);
    expect(settled).toBe(false);
    job.publish('training_ended');
    await vi.advanceTimersByTimeAsync(1_000);
    const result = await followed;
    expect(result.metrics).toEqual({ loss: 2, reward: 0.6 });
    expect(result.events.map((event) => event.type)).toEqual([
      'training_started',
      'gradient_step',
      'gradient_step',
      'training_ended',
    ]);
  });

  it('long-polls: a 10 s job costs a poll per event, and the wait ends at its terminal event', async () => {
    const job = scriptedJob({ longPoll: true });
    let endedAt: number | null = null;
    const followed = followTrainingJob(job.client, JOB_ID).then(() => (endedAt = Date.now()));
    const start = Date.now();
    await vi.advanceTimersByTimeAsync(100);
    job.publish('training_started', { num_sequences: 1 });
    await vi.advanceTimersByTimeAsync(9_337); // a quiet stretch longer than one long poll
    job.publish('gradient_step', { loss: 1 });
    job.publish('training_ended');
    const terminalAt = Date.now();
    for (let waited = 0; endedAt === null && waited < 1_000; waited += 10) await vi.advanceTimersByTimeAsync(10);
    await followed;
    expect(endedAt).not.toBeNull();
    expect((endedAt ?? Number.POSITIVE_INFINITY) - terminalAt).toBeLessThanOrEqual(100);
    expect(terminalAt - start).toBeGreaterThanOrEqual(9_437);
    expect(job.cursors.length).toBeLessThanOrEqual(5);
  });

  it('backs off against a service that does not long-poll: at most 20 polls over a quiet 10 s job', async () => {
    const job = scriptedJob();
    job.publish('training_started', { num_sequences: 1 });
    const followed = followTrainingJob(job.client, JOB_ID);
    await vi.advanceTimersByTimeAsync(10_000);
    job.publish('gradient_step', { loss: 1 });
    job.publish('training_ended');
    await vi.advanceTimersByTimeAsync(1_000); // at most one poll interval
    await followed;
    expect(job.cursors.length).toBeLessThanOrEqual(20);
  });

  it('waits at most pollInterval between polls of a quiet job', async () => {
    const job = scriptedJob();
    const followed = followTrainingJob(job.client, JOB_ID, { pollInterval: 200, timeout: 2_000 }).catch(
      (caught: unknown) => caught,
    );
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await followed).toBeInstanceOf(TrainingTimeoutError);
    // 50, 100, 200, 200, ... ms apart: 0, 50, 150, 350, 550, ..., 1950.
    expect(job.cursors).toHaveLength(12);
  });

  it('passes over an event type a newer service added and still ends at the terminal event', async () => {
    const job = scriptedJob();
    job.publish('training_started', { num_sequences: 1 });
    job.publish('checkpoint_uploaded', { bytes: 1234 });
    job.publish('gradient_step', { loss: 0.5 });
    job.publish('training_ended');
    const progress: string[] = [];
    const followed = followTrainingJob(job.client, JOB_ID, { onProgress: (p) => progress.push(p.event.type) });
    await vi.advanceTimersByTimeAsync(0);
    const result = await followed;
    expect(result.events.map((event) => event.type)).toEqual([
      'training_started',
      'checkpoint_uploaded',
      'gradient_step',
      'training_ended',
    ]);
    expect(progress).toContain('checkpoint_uploaded');
    expect(result.metrics).toEqual({ loss: 0.5 }); // the unknown event's numbers are not training metrics
  });

  it('a training_failed event rejects with the job and the service message', async () => {
    const job = scriptedJob();
    job.publish('training_started', { num_sequences: 1 });
    job.publish('training_failed', { error_message: 'out of memory' });
    job.setStatus('FAILED');
    const error = await followTrainingJob(job.client, JOB_ID).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TrainingJobFailedError);
    const failed = error as TrainingJobFailedError;
    expect(failed.serviceMessage).toBe('out of memory');
    expect(failed.job).toMatchObject({ id: JOB_ID, status: 'FAILED' });
    expect(failed.event?.type).toBe('training_failed');
    expect(failed.message).toContain('out of memory');
  });

  it('keeps its poll cadence when the service answers an empty page with has_more', async () => {
    let polls = 0;
    const fetch = async (): Promise<Response> => {
      polls += 1;
      // A spinning loop never lets fake time pass: stop it here so the test fails instead of hanging.
      if (polls > 50) throw new Error('polled 50 times without waiting');
      const body = { object: 'list', data: [], first_id: '', last_id: '', has_more: true };
      return new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
    };
    const client = new TrainingClient({
      apiKey: 'test',
      baseURL: 'http://service.test/v1',
      fetch: fetch as typeof globalThis.fetch,
    });
    const followed = followTrainingJob(client, JOB_ID, { timeout: 3_500 }).catch((caught: unknown) => caught);
    await vi.advanceTimersByTimeAsync(3_500);
    expect(await followed).toBeInstanceOf(TrainingTimeoutError);
    // 0, 50, 150, 350, 750, 1550, 2550: backing off, not spinning.
    expect(polls).toBe(7);
  });

  it('gives up after the timeout with TrainingTimeoutError naming the job', async () => {
    const job = scriptedJob();
    const followed = followTrainingJob(job.client, JOB_ID, { timeout: 5_000 }).catch((caught: unknown) => caught);
    await vi.advanceTimersByTimeAsync(5_000);
    const error = await followed;
    expect(error).toBeInstanceOf(TrainingTimeoutError);
    expect((error as TrainingTimeoutError).jobId).toBe(JOB_ID);
    // 0, 50, 150, 350, 750, 1550, 2550, 3550, 4550.
    expect(job.cursors).toHaveLength(9);
  });

  it('an abort during a poll wait stops at once with APIUserAbortError (cause: the reason), not a timeout', async () => {
    const job = scriptedJob();
    const controller = new AbortController();
    const followed = followTrainingJob(job.client, JOB_ID, { signal: controller.signal, timeout: 60_000 }).catch(
      (caught: unknown) => caught,
    );
    await vi.advanceTimersByTimeAsync(1_500);
    const reason = new Error('user stop');
    controller.abort(reason);
    const error = await followed;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    const polls = job.cursors.length;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(job.cursors).toHaveLength(polls);
  });

  /** A client whose event requests hang until aborted; `requests` counts them. */
  function hangingClient() {
    const state = { requests: 0 };
    const fetch = (_input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      state.requests += 1;
      return new Promise((_resolve, reject) => {
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true });
      });
    };
    const client = new TrainingClient({
      apiKey: 'test',
      baseURL: 'http://service.test/v1',
      fetch: fetch as typeof globalThis.fetch,
      maxRetries: 0,
    });
    return { client, state };
  }

  it('an abort during an event request rejects with APIUserAbortError whose cause is the reason', async () => {
    const { client, state } = hangingClient();
    const controller = new AbortController();
    const followed = followTrainingJob(client, JOB_ID, { signal: controller.signal }).catch(
      (caught: unknown) => caught,
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(state.requests).toBe(1);
    const reason = new Error('user stop');
    controller.abort(reason);
    const error = await followed;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
  });

  it('a timeout during an event request rejects with TrainingTimeoutError, not the abort error', async () => {
    const { client } = hangingClient();
    const followed = followTrainingJob(client, JOB_ID, { timeout: 2_000 }).catch((caught: unknown) => caught);
    await vi.advanceTimersByTimeAsync(2_000);
    const error = await followed;
    expect(error).toBeInstanceOf(TrainingTimeoutError);
    expect(error).not.toBeInstanceOf(APIUserAbortError);
  });

  it('refuses bad options before any request', async () => {
    const { client, state } = hangingClient();
    for (const [options, name] of [
      [{ timeout: 0 }, 'timeout'],
      [{ pollInterval: -5 }, 'pollInterval'],
      [{ onProgress: 'log' }, 'onProgress'],
      [{ signal: 'stop' }, 'signal'],
    ] as const) {
      const error = await followTrainingJob(client, JOB_ID, options as never).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect((error as InvalidArgumentError).argument).toBe(name);
      expect((error as InvalidArgumentError).message).toContain(`Expected \`${name}\` to be `);
    }
    await expect(followTrainingJob(client, JOB_ID, { pollIntervall: 500 } as never)).rejects.toThrow(
      'Unknown option `pollIntervall`; did you mean `pollInterval`?',
    );
    expect(state.requests).toBe(0);
  });
});
