import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIUserAbortError,
  ConflictError,
  InternalServerError,
  NotFoundError,
  RateLimitError,
} from 'policyloop';
import { TrainingClient } from 'policyloop/client';
import { delay } from '../../src/internal/delay.js';
import { fakeFetch, hangingFetch, json, type Reply } from './fake-fetch.js';
import { JOB_ID, MODEL_ID, modelResponse } from './fixtures.js';

const unavailable = () => json({ detail: 'busy' }, 503);

function setup(options: { maxRetries?: number; timeout?: number; retryDelay?: number }, ...replies: Reply[]) {
  const fake = fakeFetch(...replies);
  const client = new TrainingClient({ apiKey: 'sk-test', baseURL: 'http://svc/v1', fetch: fake.fetch, ...options });
  return { client, ...fake };
}

/** Settles `promise` into a value or the error, so that pending rejections are never unhandled. */
function settle<T>(promise: PromiseLike<T>): Promise<T | unknown> {
  return Promise.resolve(promise).then(
    (value) => value,
    (error: unknown) => error,
  );
}

beforeEach(() => {
  vi.useFakeTimers();
  // No jitter: backoff is exactly 500 ms, 1 s, 2 s...
  vi.spyOn(Math, 'random').mockReturnValue(0);
});

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('which requests are retried', () => {
  it('a GET is retried on 503 with exponential backoff, then succeeds', async () => {
    const { client, calls } = setup({ maxRetries: 3 }, unavailable(), unavailable(), json({ id: JOB_ID }));
    const outcome = settle(client.jobs.retrieve(JOB_ID));
    await vi.advanceTimersByTimeAsync(0);
    expect(calls()).toBe(1);
    await vi.advanceTimersByTimeAsync(499);
    expect(calls()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls()).toBe(2);
    await vi.advanceTimersByTimeAsync(999);
    expect(calls()).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls()).toBe(3);
    await expect(outcome).resolves.toEqual({ id: JOB_ID });
  });

  it('the backoff is capped at 8 s', async () => {
    const { client, calls } = setup({ maxRetries: 6 }, unavailable());
    const outcome = settle(client.health());
    // 0.5 + 1 + 2 + 4 + 8 s, then the sixth wait is 8 s again rather than 16 s.
    await vi.advanceTimersByTimeAsync(15_500);
    expect(calls()).toBe(6);
    await vi.advanceTimersByTimeAsync(7_999);
    expect(calls()).toBe(6);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls()).toBe(7);
    expect(await outcome).toBeInstanceOf(InternalServerError);
  });

  it('jitter shortens the wait by at most a quarter', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.999);
    const { client, calls } = setup({ maxRetries: 1 }, unavailable(), json({}));
    const outcome = settle(client.health());
    await vi.advanceTimersByTimeAsync(374);
    expect(calls()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls()).toBe(2);
    await outcome;
  });

  it('exhausted retries throw the last error, whose message says how many attempts were made', async () => {
    const { client, calls } = setup({}, unavailable(), unavailable(), json({ detail: 'still busy' }, 502));
    const outcome = settle(client.baseModels.list());
    await vi.runAllTimersAsync();
    const error = await outcome;
    expect(calls()).toBe(3); // the default maxRetries is 2
    expect(error).toBeInstanceOf(InternalServerError);
    expect((error as InternalServerError).status).toBe(502);
    expect((error as Error).message).toBe('502 still busy (gave up after 3 attempts)');
  });

  it('429, 409 and 408 are retried, 404 is not', async () => {
    for (const status of [429, 409, 408]) {
      const { client, calls } = setup({ maxRetries: 1 }, json({ detail: 'again' }, status), json({ id: JOB_ID }));
      const outcome = settle(client.jobs.retrieve(JOB_ID));
      await vi.runAllTimersAsync();
      await expect(outcome).resolves.toEqual({ id: JOB_ID });
      expect(calls()).toBe(2);
    }
    const { client, calls } = setup({ maxRetries: 3 }, json({ detail: 'no such job' }, 404));
    const outcome = settle(client.jobs.retrieve(JOB_ID));
    await vi.runAllTimersAsync();
    expect(await outcome).toBeInstanceOf(NotFoundError);
    expect(((await outcome) as Error).message).toBe('404 no such job');
    expect(calls()).toBe(1);
  });

  it('a DELETE is retried on 409', async () => {
    const { client, calls } = setup(
      { maxRetries: 2 },
      json({ detail: 'locked' }, 409),
      json({ deleted_count: 1, not_found_steps: [] }),
    );
    const outcome = settle(client.checkpoints.delete(MODEL_ID, { steps: [1] }));
    await vi.runAllTimersAsync();
    await expect(outcome).resolves.toEqual({ deleted_count: 1, not_found_steps: [] });
    expect(calls()).toBe(2);
  });

  it('a connection error is retried for a GET', async () => {
    const { client, calls } = setup({ maxRetries: 2 }, new TypeError('fetch failed'), json({ ok: true }));
    const outcome = settle(client.health());
    await vi.runAllTimersAsync();
    await expect(outcome).resolves.toEqual({ ok: true });
    expect(calls()).toBe(2);
  });

  it('a POST is not retried, not on 503 nor on a connection error', async () => {
    const body = { project: 'demo', name: 'agent-001', base_model: 'b' };
    const first = setup({ maxRetries: 5 }, unavailable(), json(modelResponse));
    const outcome = settle(first.client.models.create(body));
    await vi.runAllTimersAsync();
    const error = await outcome;
    expect(error).toBeInstanceOf(InternalServerError);
    expect((error as Error).message).toBe('503 busy');
    expect(first.calls()).toBe(1);

    const second = setup({ maxRetries: 5 }, new TypeError('fetch failed'), json(modelResponse));
    const again = settle(second.client.models.create(body));
    await vi.runAllTimersAsync();
    const connection = await again;
    expect(connection).toBeInstanceOf(APIConnectionError);
    expect((connection as APIConnectionError).cause).toBeInstanceOf(TypeError);
    expect(second.calls()).toBe(1);
  });

  it('a POST with an idempotency key is retried, sending the same key each time', async () => {
    const { client, requests, calls } = setup(
      { maxRetries: 2 },
      unavailable(),
      json({ detail: 'slow down' }, 429),
      json({ id: JOB_ID }),
    );
    const outcome = settle(
      client.jobs.createRL({ model_id: MODEL_ID, trajectory_groups: [] }, { idempotencyKey: 'job-42' }),
    );
    await vi.runAllTimersAsync();
    await expect(outcome).resolves.toEqual({ id: JOB_ID });
    expect(calls()).toBe(3);
    expect(requests.map((request) => request.headers.get('idempotency-key'))).toEqual(['job-42', 'job-42', 'job-42']);
    expect(new Set(requests.map((request) => request.body)).size).toBe(1);
  });

  it('maxRetries per call overrides the client', async () => {
    const { client, calls } = setup({ maxRetries: 5 }, unavailable());
    const outcome = settle(client.health({ maxRetries: 0 }));
    await vi.runAllTimersAsync();
    expect(await outcome).toBeInstanceOf(InternalServerError);
    expect(calls()).toBe(1);
  });
});

describe('server hints', () => {
  it('Retry-After in seconds is honoured instead of the backoff', async () => {
    const { client, calls } = setup({ maxRetries: 1 }, json({ detail: 'slow' }, 429, { 'retry-after': '3' }), json({}));
    const outcome = settle(client.health());
    await vi.advanceTimersByTimeAsync(2_999);
    expect(calls()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls()).toBe(2);
    await outcome;
  });

  it('Retry-After as an HTTP date is honoured', async () => {
    vi.setSystemTime(new Date('2026-01-01T00:00:00Z'));
    const { client, calls } = setup(
      { maxRetries: 1 },
      json({ detail: 'slow' }, 503, { 'retry-after': 'Thu, 01 Jan 2026 00:00:05 GMT' }),
      json({}),
    );
    const outcome = settle(client.health());
    await vi.advanceTimersByTimeAsync(4_999);
    expect(calls()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls()).toBe(2);
    await outcome;
  });

  it('retry-after-ms wins over Retry-After', async () => {
    const { client, calls } = setup(
      { maxRetries: 1 },
      json({ detail: 'slow' }, 429, { 'retry-after-ms': '1200', 'retry-after': '30' }),
      json({}),
    );
    const outcome = settle(client.health());
    await vi.advanceTimersByTimeAsync(1_199);
    expect(calls()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls()).toBe(2);
    await outcome;
  });

  it('a hint longer than a minute falls back to the backoff', async () => {
    const { client, calls } = setup(
      { maxRetries: 1 },
      json({ detail: 'slow' }, 429, { 'retry-after': '3600' }),
      json({}),
    );
    const outcome = settle(client.health());
    await vi.advanceTimersByTimeAsync(500);
    expect(calls()).toBe(2);
    await outcome;
  });
});

describe('retryDelay', () => {
  it('sets the first backoff step (less up to 25 % jitter), on the client and per call', async () => {
    const { client, calls } = setup({ maxRetries: 1, retryDelay: 4_000 }, json({ detail: 'down' }, 503));
    expect(client.retryDelay).toBe(4_000);
    const outcome = settle(client.health());
    await vi.advanceTimersByTimeAsync(2_999);
    expect(calls()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_001);
    expect(calls()).toBe(2);
    await outcome;
    const perCall = settle(client.health({ retryDelay: 0 }));
    await vi.advanceTimersByTimeAsync(0);
    expect(calls()).toBe(4);
    await perCall;
  });
});

describe('abort and timeout', () => {
  it('an abort during the backoff rejects at once and sends nothing more', async () => {
    const { client, calls } = setup({ maxRetries: 3 }, json({ detail: 'slow' }, 429, { 'retry-after': '30' }));
    const controller = new AbortController();
    const outcome = settle(client.health({ signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(calls()).toBe(1);
    const reason = new Error('no more waiting');
    controller.abort(reason);
    // No timer has to fire for the call to end.
    const error = await outcome;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    expect((error as APIUserAbortError).retryable).toBe(false);
    await vi.runAllTimersAsync();
    expect(calls()).toBe(1);
  });

  it('an already aborted signal sends nothing', async () => {
    const { client, calls } = setup({}, json({}));
    await expect(client.health({ signal: AbortSignal.abort() })).rejects.toBeInstanceOf(APIUserAbortError);
    expect(calls()).toBe(0);
  });

  it('an attempt that outlives its timeout fails with APIConnectionTimeoutError and is retried', async () => {
    const fake = hangingFetch();
    const client = new TrainingClient({
      apiKey: 'k',
      baseURL: 'http://svc',
      fetch: fake.fetch,
      timeout: 1_000,
      maxRetries: 1,
    });
    const outcome = settle(client.jobs.retrieve(JOB_ID));
    await vi.advanceTimersByTimeAsync(999);
    expect(fake.calls()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    // The timed-out attempt's signal was aborted; the retry waits its backoff first.
    expect(fake.requests[0]?.signal?.aborted).toBe(true);
    await vi.advanceTimersByTimeAsync(500);
    expect(fake.calls()).toBe(2);
    await vi.advanceTimersByTimeAsync(1_000);
    const error = await outcome;
    expect(error).toBeInstanceOf(APIConnectionTimeoutError);
    expect(error).toBeInstanceOf(APIConnectionError);
    expect((error as Error).message).toContain('1000 ms');
    expect((error as APIConnectionTimeoutError).retryable).toBe(true);
  });

  it('a per-call timeout overrides the client', async () => {
    const fake = hangingFetch();
    const client = new TrainingClient({ apiKey: 'k', baseURL: 'http://svc', fetch: fake.fetch, maxRetries: 0 });
    const outcome = settle(client.health({ timeout: 50 }));
    await vi.advanceTimersByTimeAsync(50);
    expect(await outcome).toBeInstanceOf(APIConnectionTimeoutError);
  });

  it('a user abort during a request is APIUserAbortError, not a timeout, and is not retried', async () => {
    const fake = hangingFetch();
    const client = new TrainingClient({
      apiKey: 'k',
      baseURL: 'http://svc',
      fetch: fake.fetch,
      timeout: 1_000,
      maxRetries: 3,
    });
    const controller = new AbortController();
    const outcome = settle(client.health({ signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(10);
    const reason = new Error('user is done');
    controller.abort(reason);
    const error = await outcome;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    expect(error).not.toBeInstanceOf(APIConnectionTimeoutError);
    await vi.runAllTimersAsync();
    expect(fake.calls()).toBe(1);
  });

  it('a fetch that ignores its signal still cannot hang the call', async () => {
    const neverFetch = vi.fn(() => new Promise<Response>(() => undefined));
    const client = new TrainingClient({
      apiKey: 'k',
      baseURL: 'http://svc',
      fetch: neverFetch as unknown as typeof fetch,
      timeout: 2_000,
      maxRetries: 0,
    });
    const outcome = settle(client.models.delete(MODEL_ID));
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await outcome).toBeInstanceOf(APIConnectionTimeoutError);
  });

  it('a body that never finishes is cut by the timeout too', async () => {
    const stalled = () =>
      new Response(
        new ReadableStream({ start: (controller) => controller.enqueue(new TextEncoder().encode('{"id"')) }),
        {
          status: 200,
        },
      );
    const { client } = setup({ timeout: 1_000, maxRetries: 0 }, stalled);
    const outcome = settle(client.jobs.retrieve(JOB_ID));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await outcome).toBeInstanceOf(APIConnectionTimeoutError);
  });
});

describe('delay', () => {
  it('resolves after the time, or rejects at once with the reason on abort', async () => {
    const done = vi.fn();
    void delay(100).then(done);
    await vi.advanceTimersByTimeAsync(99);
    expect(done).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toHaveBeenCalled();

    const controller = new AbortController();
    const waiting = settle(delay(10_000, controller.signal));
    const reason = new Error('stop');
    controller.abort(reason);
    expect(await waiting).toBe(reason);
    await expect(delay(1, AbortSignal.abort('early'))).rejects.toBe('early');
  });

  it('waits longer than one timer holds (2^31 - 1 ms) instead of firing at once', async () => {
    const done = vi.fn();
    void delay(3_000_000_000).then(done);
    await vi.advanceTimersByTimeAsync(2_147_483_648);
    expect(done).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(3_000_000_000 - 2_147_483_648 - 1);
    expect(done).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(done).toHaveBeenCalled();

    const controller = new AbortController();
    const forever = settle(delay(Number.POSITIVE_INFINITY, controller.signal));
    await vi.advanceTimersByTimeAsync(5_000_000_000);
    controller.abort('stop');
    expect(await forever).toBe('stop');
  });
});

describe('rate limit errors after retries', () => {
  it('keep their class so callers can still tell them apart', async () => {
    const { client } = setup({ maxRetries: 1 }, json({ detail: 'slow down' }, 429));
    const outcome = settle(client.health());
    await vi.runAllTimersAsync();
    expect(await outcome).toBeInstanceOf(RateLimitError);
  });

  it('a conflict after retries is a ConflictError', async () => {
    const { client } = setup({ maxRetries: 1 }, json({ detail: 'locked' }, 409));
    const outcome = settle(client.models.delete(MODEL_ID));
    await vi.runAllTimersAsync();
    expect(await outcome).toBeInstanceOf(ConflictError);
  });
});
