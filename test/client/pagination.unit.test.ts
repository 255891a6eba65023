import { describe, expect, it } from 'vitest';
import { APIUserAbortError, NotFoundError, PolicyloopError } from 'policyloop';
import { Page, PagePromise, TrainingClient } from 'policyloop/client';
import { fakeFetch, json, type RecordedRequest } from './fake-fetch.js';
import { JOB_ID, MODEL_ID, uuid } from './fixtures.js';

/** A fake events endpoint over `total` events, paged by `limit` (default 2), following `after`. */
function eventService(total: number, options: { blankCursors?: boolean } = {}) {
  const events = Array.from({ length: total }, (_, index) => ({
    id: uuid(index + 1),
    type: index === total - 1 ? 'training_ended' : 'gradient_step',
    data: { loss: index },
  }));
  return fakeFetch((request: RecordedRequest) => {
    const after = request.url.searchParams.get('after');
    const limit = Number(request.url.searchParams.get('limit') ?? '2');
    const start = after === null ? 0 : events.findIndex((event) => event.id === after) + 1;
    const data = events.slice(start, start + limit);
    return json({
      object: 'list',
      data,
      first_id: options.blankCursors ? '' : (data[0]?.id ?? ''),
      last_id: options.blankCursors ? '' : (data.at(-1)?.id ?? ''),
      has_more: start + limit < events.length,
    });
  });
}

function client(fetch: typeof globalThis.fetch) {
  return new TrainingClient({ apiKey: 'k', baseURL: 'http://svc/v1', fetch, maxRetries: 0 });
}

describe('cursor pages', () => {
  it('for await follows after=last_id across pages until has_more is false', async () => {
    const service = eventService(7);
    const seen: string[] = [];
    for await (const event of client(service.fetch).jobs.events(JOB_ID)) seen.push(event.id);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7].map(uuid));
    expect(service.calls()).toBe(4);
    expect(service.requests.map((request) => request.url.searchParams.get('after'))).toEqual([
      null,
      uuid(2),
      uuid(4),
      uuid(6),
    ]);
  });

  it('the query (limit) is kept on every page', async () => {
    const service = eventService(9);
    const seen = [];
    for await (const event of client(service.fetch).jobs.events(JOB_ID, { limit: 3 })) seen.push(event);
    expect(seen).toHaveLength(9);
    expect(service.requests.map((request) => request.url.searchParams.get('limit'))).toEqual(['3', '3', '3']);
  });

  it('getNextPage walks page by page and throws after the last', async () => {
    const service = eventService(6);
    let page = await client(service.fetch).jobs.events(JOB_ID);
    expect(page).toBeInstanceOf(Page);
    const pages = [page.data.map((event) => event.id)];
    while (page.hasNextPage()) {
      page = await page.getNextPage();
      pages.push(page.data.map((event) => event.id));
    }
    expect(pages).toEqual([
      [uuid(1), uuid(2)],
      [uuid(3), uuid(4)],
      [uuid(5), uuid(6)],
    ]);
    expect(page.has_more).toBe(false);
    expect(page.last_id).toBe(uuid(6));
    await expect(page.getNextPage()).rejects.toThrow(PolicyloopError);
    expect(service.calls()).toBe(3);
  });

  it('iterPages yields each page once', async () => {
    const service = eventService(5);
    const sizes = [];
    const first = await client(service.fetch).jobs.events(JOB_ID);
    for await (const page of first.iterPages()) sizes.push(page.data.length);
    expect(sizes).toEqual([2, 2, 1]);
  });

  it('resumes from a given after', async () => {
    const service = eventService(5);
    const seen = [];
    for await (const event of client(service.fetch).jobs.events(JOB_ID, { after: uuid(3) })) seen.push(event.id);
    expect(seen).toEqual([uuid(4), uuid(5)]);
  });

  it('falls back to the last item id when the service leaves last_id blank', async () => {
    const service = eventService(5, { blankCursors: true });
    const seen = [];
    for await (const event of client(service.fetch).jobs.events(JOB_ID)) seen.push(event.id);
    expect(seen).toEqual([1, 2, 3, 4, 5].map(uuid));
  });

  it('checkpoint pages iterate too, keeping order', async () => {
    const pages = [
      { data: [{ id: uuid(3), step: 3, metrics: {} }], last_id: uuid(3), has_more: true },
      { data: [{ id: uuid(2), step: 2, metrics: {} }], last_id: uuid(2), has_more: true },
      { data: [{ id: uuid(1), step: 1, metrics: {} }], last_id: uuid(1), has_more: false },
    ];
    const service = fakeFetch(...pages.map((page) => json({ object: 'list', first_id: page.last_id, ...page })));
    const steps = [];
    for await (const checkpoint of client(service.fetch).checkpoints.list(MODEL_ID, { order: 'desc', limit: 1 })) {
      steps.push(checkpoint.step);
    }
    expect(steps).toEqual([3, 2, 1]);
    expect(service.requests.map((request) => request.url.search)).toEqual([
      '?limit=1&order=desc',
      `?after=${uuid(3)}&limit=1&order=desc`,
      `?after=${uuid(2)}&limit=1&order=desc`,
    ]);
  });

  it('an empty list yields nothing and sends one request', async () => {
    const service = fakeFetch(json({ object: 'list', data: [], first_id: '', last_id: '', has_more: false }));
    const seen = [];
    for await (const checkpoint of client(service.fetch).checkpoints.list(MODEL_ID)) seen.push(checkpoint);
    expect(seen).toEqual([]);
    expect(service.calls()).toBe(1);
  });

  it('a failing page rejects the iteration with the API error', async () => {
    const service = fakeFetch(
      json({
        object: 'list',
        data: [{ id: uuid(1), type: 'gradient_step', data: {} }],
        first_id: uuid(1),
        last_id: uuid(1),
        has_more: true,
      }),
      json({ detail: 'job vanished' }, 404),
    );
    const seen: unknown[] = [];
    const run = async () => {
      for await (const event of client(service.fetch).jobs.events(JOB_ID)) seen.push(event);
    };
    await expect(run()).rejects.toBeInstanceOf(NotFoundError);
    expect(seen).toHaveLength(1);
  });

  it('a service that answers has_more with the cursor it was given stops the iteration with a clear error', async () => {
    // A broken service: every page says has_more and names the same last item.
    const stuck = {
      object: 'list',
      data: [{ id: uuid(1), type: 'gradient_step', data: {} }],
      first_id: uuid(1),
      last_id: uuid(1),
      has_more: true,
    };
    // (The third answer is there so that, without the guard, the test fails instead of looping.)
    const service = fakeFetch(json(stuck), json(stuck), json({ detail: 'asked a third time' }, 404));
    const seen: string[] = [];
    const run = async () => {
      for await (const event of client(service.fetch).jobs.events(JOB_ID)) seen.push(event.id);
    };
    await expect(run()).rejects.toThrow(/same cursor it was asked for \(after=00000000-0000-4000-8000-000000000001\)/);
    // The first page, then the page after uuid(1), which repeated the cursor: two requests, not a loop.
    expect(service.calls()).toBe(2);
    expect(seen).toEqual([uuid(1), uuid(1)]);
  });

  it('a first page fetched with after= that hands the same cursor back is caught too', async () => {
    const stuck = {
      object: 'list',
      data: [{ id: uuid(4), step: 4, metrics: {} }],
      first_id: uuid(4),
      last_id: uuid(4),
      has_more: true,
    };
    const service = fakeFetch(json(stuck));
    const first = await client(service.fetch).checkpoints.list(MODEL_ID, { after: uuid(4) });
    await expect(first.getNextPage()).rejects.toThrow(PolicyloopError);
    expect(service.calls()).toBe(1);
  });

  it('the call’s signal covers every page: aborting mid-iteration stops before the next request', async () => {
    const service = eventService(6);
    const controller = new AbortController();
    const seen: string[] = [];
    const run = async () => {
      for await (const event of client(service.fetch).jobs.events(JOB_ID, {}, { signal: controller.signal })) {
        seen.push(event.id);
        if (seen.length === 2) controller.abort();
      }
    };
    await expect(run()).rejects.toBeInstanceOf(APIUserAbortError);
    expect(seen).toEqual([uuid(1), uuid(2)]);
    expect(service.calls()).toBe(1);
  });

  it('a page promise sends nothing until used, and its first request only once', async () => {
    const service = eventService(3);
    const promise = client(service.fetch).jobs.events(JOB_ID);
    expect(promise).toBeInstanceOf(PagePromise);
    await Promise.resolve();
    expect(service.calls()).toBe(0);
    const first = await promise;
    const again = await promise;
    expect(again).toBe(first);
    expect(service.calls()).toBe(1);
  });
});
