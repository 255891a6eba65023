/**
 * The Tinker client's futures, ordering, retries and session, through an injected `fetch`: what
 * a user of a Tinker server sees when it answers `try_again`, times out a long poll, rate-limits,
 * forgets a future, fails a request, stalls, or is not there at all.
 */
import { APIConnectionError, APIUserAbortError, TinkerFutureTimeoutError, TinkerRequestFailedError } from 'policyloop';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TinkerClient } from '../../src/backends/tinker/index.js';
import {
  BASE_URL,
  deferred,
  fakeTinker,
  forwardBackwardOutput,
  future,
  hang,
  json,
  openClient,
  protobuf,
  settle,
} from './fake-tinker.js';
import type { Handler, WireRequest } from './fake-tinker.js';

const OPTIM_RESULT = { metrics: { 'skyrl.ai/grad_norm': 2.5 } };

/** A server that accepts `optim_step` as future "1" and answers its polls with `polls` in order (the last repeats). */
function optimServer(...polls: Handler[]) {
  let index = 0;
  return fakeTinker((request) => {
    if (request.route === 'optim_step') return future(String(request.json()['seq_id']));
    if (request.route !== 'retrieve_future') return json({ detail: `unexpected ${request.route}` }, 404);
    const poll = polls[Math.min(index, polls.length - 1)] as Handler;
    index += 1;
    return poll(request);
  });
}

const answer =
  (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  () =>
    json(body, status, headers);

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('following a future', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    // No jitter: backoff is exactly 500 ms, 1 s, 2 s...
    vi.spyOn(Math, 'random').mockReturnValue(0);
  });

  it('try_again polls again until the result comes', async () => {
    const server = optimServer(answer({ type: 'try_again' }), answer({ type: 'try_again' }), answer(OPTIM_RESULT));
    const client = await openClient(server);
    const outcome = settle(client.optimStep('model_1', { learningRate: 1e-4 }));
    await vi.advanceTimersByTimeAsync(10);
    expect(await outcome).toEqual({ 'skyrl.ai/grad_norm': 2.5 });
    const polls = server.to('retrieve_future');
    expect(polls.map((poll) => poll.json())).toEqual(
      [0, 1, 2].map(() => ({ request_id: '1', allow_metadata_only: false })),
    );
    expect(polls.map((poll) => poll.headers.get('x-tinker-request-iteration'))).toEqual(['0', '1', '2']);
    expect(polls.every((poll) => poll.headers.get('x-tinker-request-type') === 'OptimStep')).toBe(true);
    expect(server.to('optim_step')).toHaveLength(1);
    await client.close();
  });

  it('a 408 (the long poll ran out on the server) polls again at once', async () => {
    const server = optimServer(
      answer({ detail: 'timeout' }, 408),
      answer({ detail: 'timeout' }, 408),
      answer(OPTIM_RESULT),
    );
    const client = await openClient(server);
    const outcome = settle(client.optimStep('model_1', { learningRate: 1e-4 }));
    await vi.advanceTimersByTimeAsync(1);
    expect(await outcome).toEqual({ 'skyrl.ai/grad_norm': 2.5 });
    expect(server.to('retrieve_future')).toHaveLength(3);
    await client.close();
  });

  it('a 5xx polls again after a backoff, and never re-submits', async () => {
    const server = optimServer(answer({ detail: 'busy' }, 503), answer({ detail: 'oops' }, 500), answer(OPTIM_RESULT));
    const client = await openClient(server);
    const outcome = settle(client.optimStep('model_1', { learningRate: 1e-4 }));
    await vi.advanceTimersByTimeAsync(0);
    expect(server.to('retrieve_future')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(499);
    expect(server.to('retrieve_future')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(server.to('retrieve_future')).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await outcome).toEqual({ 'skyrl.ai/grad_norm': 2.5 });
    expect(server.to('retrieve_future')).toHaveLength(3);
    expect(server.to('optim_step')).toHaveLength(1);
    await client.close();
  });

  it('a 429 backs off for as long as Retry-After says', async () => {
    const server = optimServer(answer({ detail: 'slow down' }, 429, { 'retry-after': '3' }), answer(OPTIM_RESULT));
    const client = await openClient(server);
    const outcome = settle(client.optimStep('model_1', { learningRate: 1e-4 }));
    await vi.advanceTimersByTimeAsync(2_999);
    expect(server.to('retrieve_future')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(server.to('retrieve_future')).toHaveLength(2);
    expect(await outcome).toEqual({ 'skyrl.ai/grad_norm': 2.5 });
    await client.close();
  });

  it('a 410 re-submits the original optim_step, byte for byte, with the same idempotency key', async () => {
    let submissions = 0;
    const server = fakeTinker((request) => {
      if (request.route === 'optim_step') {
        submissions += 1;
        return future(`f${submissions}`);
      }
      return request.json()['request_id'] === 'f1' ? json({ detail: 'promise expired' }, 410) : json(OPTIM_RESULT);
    });
    const client = await openClient(server);
    const outcome = settle(client.optimStep('model_1', { learningRate: 1e-4 }));
    await vi.advanceTimersByTimeAsync(1);
    expect(await outcome).toEqual({ 'skyrl.ai/grad_norm': 2.5 });
    const [first, second] = server.to('optim_step');
    expect(second).toBeDefined();
    expect(Buffer.from(second?.body ?? []).equals(Buffer.from(first?.body ?? []))).toBe(true);
    expect(first?.json()['seq_id']).toBe(1);
    expect(second?.headers.get('x-idempotency-key')).toBe(first?.headers.get('x-idempotency-key'));
    expect(server.to('retrieve_future').map((poll) => poll.json()['request_id'])).toEqual(['f1', 'f2']);
    await client.close();
  });

  it('an {"error","category"} result (hosted Tinker) fails with TinkerRequestFailedError carrying both', async () => {
    const server = optimServer(answer({ error: 'learning_rate must be positive', category: 'user' }));
    const client = await openClient(server);
    const error = await client.optimStep('model_1', { learningRate: -1 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TinkerRequestFailedError);
    const failed = error as TinkerRequestFailedError;
    expect(failed.message).toContain('learning_rate must be positive');
    expect(failed.message).toContain('optim_step');
    expect(failed.category).toBe('user');
    expect(failed.operation).toBe('optim_step');
    expect(failed.requestId).toBe('1');
    expect(failed.retryable).toBe(false);
    await client.close();
  });

  it('a server-category failure is retryable', async () => {
    const server = optimServer(answer({ error: 'worker lost', category: 'server' }));
    const client = await openClient(server);
    const error = (await client
      .optimStep('model_1', { learningRate: 1 })
      .catch((caught: unknown) => caught)) as TinkerRequestFailedError;
    expect(error).toBeInstanceOf(TinkerRequestFailedError);
    expect(error.retryable).toBe(true);
    await client.close();
  });

  it('SkyRL\'s 400 {"detail"} fails with TinkerRequestFailedError carrying the detail', async () => {
    const server = optimServer(answer({ detail: "Model 'model_9' not found" }, 400));
    const client = await openClient(server);
    const error = await client.optimStep('model_9', { learningRate: 1 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TinkerRequestFailedError);
    expect((error as TinkerRequestFailedError).message).toContain("Model 'model_9' not found");
    expect((error as TinkerRequestFailedError).category).toBeUndefined();
    await client.close();
  });

  it('the user abort signal ends a poll that waits with APIUserAbortError', async () => {
    const server = optimServer(hang);
    const client = await openClient(server);
    const controller = new AbortController();
    const outcome = settle(client.optimStep('model_1', { learningRate: 1 }, { signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(0);
    expect(server.to('retrieve_future')).toHaveLength(1);
    controller.abort();
    const error = await outcome;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as Error).message).toMatch(/optim_step was aborted/);
    await client.close();
  });

  it('the user abort signal ends a 429 backoff at once', async () => {
    const server = optimServer(answer({ detail: 'slow down' }, 429, { 'retry-after': '30' }));
    const client = await openClient(server);
    const controller = new AbortController();
    const outcome = settle(client.optimStep('model_1', { learningRate: 1 }, { signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(1_000);
    controller.abort();
    expect(await outcome).toBeInstanceOf(APIUserAbortError);
    expect(server.to('retrieve_future')).toHaveLength(1);
    await client.close();
  });
});

describe('a future that never ends', () => {
  // AbortSignal.timeout runs on Node's own timers, which fake timers do not move: these use a short real futureTimeout.
  it('a long poll that gets no answer ends with TinkerFutureTimeoutError at futureTimeout', async () => {
    const server = optimServer(hang);
    const client = await openClient(server, { futureTimeout: 50 });
    const error = await client.optimStep('model_1', { learningRate: 1 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TinkerFutureTimeoutError);
    expect((error as TinkerFutureTimeoutError).message).toMatch(/optim_step gave no result within 50 ms/);
    expect((error as TinkerFutureTimeoutError).requestId).toBe('1');
    expect((error as TinkerFutureTimeoutError).retryable).toBe(true);
    await client.close();
  });

  it('a server answering try_again at once, forever, still ends at futureTimeout (the client yields between polls)', async () => {
    let polls = 0;
    // Should the client spin without yielding, its timeout never fires: give up after many polls instead of hanging.
    const server = optimServer(() => {
      polls += 1;
      return polls > 2_000
        ? json({ error: 'the client polled without yielding', category: 'user' })
        : json({ type: 'try_again' });
    });
    const client = await openClient(server, { futureTimeout: 50 });
    const error = await client.optimStep('model_1', { learningRate: 1 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TinkerFutureTimeoutError);
    await client.close();
  });
  it('a server answering 410 at once, forever, still ends at futureTimeout', async () => {
    let submissions = 0;
    const server = fakeTinker((request) => {
      if (request.route !== 'retrieve_future') {
        submissions += 1;
        return submissions > 2_000
          ? json({ detail: 'the client re-submitted without yielding' }, 400)
          : future(String(submissions));
      }
      return json({ detail: 'promise expired' }, 410);
    });
    const client = await openClient(server, { futureTimeout: 50 });
    const error = await client.optimStep('model_1', { learningRate: 1 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TinkerFutureTimeoutError);
    await client.close();
  });
});

describe('training calls: seq_id order and idempotency keys', () => {
  it('concurrent calls are submitted one after another in seq_id order, each waiting for the previous to be accepted', async () => {
    const firstAccepted = deferred();
    const submitted: string[] = [];
    const server = fakeTinker(async (request) => {
      if (request.route === 'retrieve_future') {
        const id = String(request.json()['request_id']);
        if (id === 'forward_backward') return protobuf(forwardBackwardOutput([[-1, -2]]));
        return json(id === 'optim_step' ? OPTIM_RESULT : { path: 'tinker://model_1/step', type: id });
      }
      submitted.push(request.route);
      if (request.route === 'forward_backward') await firstAccepted.promise;
      return future(request.route);
    });
    const client = await openClient(server);
    const calls = [
      settle(
        client.forwardBackward(
          'model_1',
          [{ inputTokens: [1, 2], targetTokens: [2, 3], weights: [1, 1] }],
          'cross_entropy',
        ),
      ),
      settle(client.optimStep('model_1', { learningRate: 1e-4 })),
      settle(client.saveWeightsForSampler('model_1', 'step')),
    ];
    await new Promise((resolve) => setTimeout(resolve, 20));
    // The optimizer step and the save wait until the forward_backward is accepted.
    expect(submitted).toEqual(['forward_backward']);
    firstAccepted.resolve();
    const [forwardBackward, metrics, path] = await Promise.all(calls);
    expect(submitted).toEqual(['forward_backward', 'optim_step', 'save_weights_for_sampler']);
    expect(forwardBackward).toMatchObject({ outputs: [{ logprobs: [-1, -2] }] });
    expect(metrics).toEqual({ 'skyrl.ai/grad_norm': 2.5 });
    expect(path).toBe('tinker://model_1/step');
    const seqIds = server.requests
      .filter((request) => request.route === 'optim_step' || request.route === 'save_weights_for_sampler')
      .map((request) => request.json()['seq_id']);
    expect(seqIds).toEqual([2, 3]);
    await client.close();
  });

  it('the seq_ids of different models are counted apart', async () => {
    const server = fakeTinker((request) =>
      request.route === 'retrieve_future' ? json(OPTIM_RESULT) : future(String(request.json()['model_id'])),
    );
    const client = await openClient(server);
    await Promise.all([
      client.optimStep('model_a', { learningRate: 1 }),
      client.optimStep('model_b', { learningRate: 1 }),
      client.optimStep('model_a', { learningRate: 1 }),
    ]);
    expect(server.to('optim_step').map((request) => [request.json()['model_id'], request.json()['seq_id']])).toEqual([
      ['model_a', 1],
      ['model_b', 1],
      ['model_a', 2],
    ]);
    await client.close();
  });

  it('a submission retried after a 503 carries the same X-Idempotency-Key; another call gets another key', async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, 'random').mockReturnValue(0);
    let attempts = 0;
    const server = fakeTinker((request) => {
      if (request.route === 'retrieve_future') return json(OPTIM_RESULT);
      attempts += 1;
      return attempts === 1 ? json({ detail: 'unavailable' }, 503) : future(String(attempts));
    });
    const client = await openClient(server);
    const first = settle(client.optimStep('model_1', { learningRate: 1 }));
    await vi.advanceTimersByTimeAsync(500);
    await first;
    await client.optimStep('model_1', { learningRate: 1 });
    const [sent, retried, next] = server.to('optim_step');
    const key = sent?.headers.get('x-idempotency-key');
    expect(key).toMatch(/^[0-9a-f-]{36}$/);
    expect(retried?.headers.get('x-idempotency-key')).toBe(key);
    expect(retried?.json()).toEqual(sent?.json());
    expect(next?.headers.get('x-idempotency-key')).not.toBe(key);
    expect(next?.json()['seq_id']).toBe(2);
    await client.close();
  });

  it('a POST without an idempotency key (create_sampling_session) is not retried after a 503', async () => {
    const server = fakeTinker(() => json({ detail: 'unavailable' }, 503));
    const client = await openClient(server);
    await expect(client.createSamplingSession({ baseModel: 'Qwen/Qwen3-8B' })).rejects.toMatchObject({ status: 503 });
    expect(server.to('create_sampling_session')).toHaveLength(1);
    await client.close();
  });
});

describe('the session', () => {
  it('open() reads the flags and opens a session; the key goes as X-API-Key', async () => {
    const server = fakeTinker(() => json({}), { fwdbwd_max_chunk_len: 7 });
    const client = await openClient(server);
    expect(client.config).toMatchObject({ fwdbwd_max_chunk_len: 7 });
    expect(client.session).toBe('session_1');
    expect(server.requests.map((request) => request.route)).toEqual(['client/config', 'create_session']);
    expect(server.requests.map((request) => request.url)).toEqual([
      `${BASE_URL}/api/v1/client/config`,
      `${BASE_URL}/api/v1/create_session`,
    ]);
    expect(server.requests.every((request) => request.headers.get('x-api-key') === 'tml-test')).toBe(true);
    await client.close();
  });

  it('heartbeats every 10 s after open() until close()', async () => {
    vi.useFakeTimers();
    const server = fakeTinker(() => json({ type: 'session_heartbeat' }));
    const client = await openClient(server);
    const beats = () => server.to('session_heartbeat');
    await vi.advanceTimersByTimeAsync(9_999);
    expect(beats()).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(beats()).toHaveLength(1);
    expect(beats()[0]?.json()).toEqual({ session_id: 'session_1', type: 'session_heartbeat' });
    await vi.advanceTimersByTimeAsync(20_000);
    expect(beats()).toHaveLength(3);
    await client.close();
    // No timer is left behind, and no heartbeat goes.
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(beats()).toHaveLength(3);
    expect(() => client.session).toThrow(/not open/);
  });

  it('a failed heartbeat is kept to explain later failures, and cleared by the next good one', async () => {
    vi.useFakeTimers();
    let beat = 0;
    const server = fakeTinker(() => {
      beat += 1;
      return beat === 1 ? json({ detail: 'session not found' }, 404) : json({ type: 'session_heartbeat' });
    });
    const client = await openClient(server);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(client.lastHeartbeatError).toMatchObject({
      status: 404,
      message: expect.stringContaining('session not found'),
    });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(client.lastHeartbeatError).toBeUndefined();
    await client.close();
  });

  it('close() ends a future under way: it rejects, saying the client was closed', async () => {
    const server = fakeTinker((request: WireRequest) =>
      request.route === 'retrieve_future' ? hang(request) : future('1'),
    );
    const client = await openClient(server);
    const outcome = settle(client.optimStep('model_1', { learningRate: 1 }));
    await new Promise((resolve) => setTimeout(resolve, 10));
    await client.close();
    const error = await outcome;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect(((error as Error).cause as Error).message).toBe('The Tinker client was closed.');
  });
});

describe('no server', () => {
  /** What undici's fetch throws when nothing listens on the port. */
  const refused = () =>
    new TypeError('fetch failed', {
      cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }),
    });

  it('a refused connection fails open() with APIConnectionError naming the URL and the cause', async () => {
    const fetch = vi.fn(async () => {
      throw refused();
    }) as unknown as typeof globalThis.fetch;
    const client = new TinkerClient({ baseURL: 'http://127.0.0.1:9', apiKey: 'tml-test', fetch });
    const error = await client.open().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIConnectionError);
    const message = (error as Error).message;
    expect(message).toContain('http://127.0.0.1:9/api/v1/client/config');
    expect(message).toContain('ECONNREFUSED');
    expect(message).toMatch(/Is the Tinker server running at http:\/\/127\.0\.0\.1:9\?/);
    expect((error as APIConnectionError).retryable).toBe(true);
  });

  it('a base URL given with /api/v1 or a trailing slash reaches the same routes', async () => {
    for (const baseURL of [`${BASE_URL}/`, `${BASE_URL}/api/v1`, `${BASE_URL}/api/v1/`]) {
      const server = fakeTinker(() => json({}));
      const client = await openClient(server, { baseURL });
      expect(server.requests[0]?.url).toBe(`${BASE_URL}/api/v1/client/config`);
      await client.close();
    }
  });
});
