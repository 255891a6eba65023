/**
 * The local-only routes under `/v1/local/` over real HTTP: the key, the 404 and 422 shapes, cursor
 * pages, how step metrics merge, and logged groups by step and split. Also the dashboard's shell,
 * which loads without a key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  LocalModelPage,
  LocalTrainingJobPage,
  LoggedTrajectoryGroupPage,
  StepMetricsPage,
  StepMetricsResponse,
  TrajectoryGroup,
} from 'policyloop/schema';
import { startApp, type TestApp } from './support/harness.js';
import { followEvents } from './support/jobs.js';
import { createStandInEngine } from './support/stand-in-engine.js';

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';
let server: TestApp;

beforeAll(async () => {
  server = await startApp({ engine: createStandInEngine() });
});

afterAll(async () => {
  await server?.close();
});

let modelCount = 0;
async function registerModel(project = 'local-routes'): Promise<{ id: string; name: string }> {
  modelCount += 1;
  const created = await server.call('POST', '/v1/preview/models', {
    body: { project, name: `m${modelCount}`, base_model: 'policyloop/tiny-chat' },
  });
  expect(created.status).toBe(200);
  return created.body;
}

const group = (rewards: number[], label: string) => ({
  trajectories: rewards.map((reward) => ({
    messages_and_choices: [
      { role: 'user', content: label },
      { finish_reason: 'stop', index: 0, message: { role: 'assistant', content: `${label}!` } },
    ],
    reward,
  })),
});

async function log(modelId: string, split: string, groups: unknown[]): Promise<void> {
  const response = await server.call('POST', `/v1/preview/models/${modelId}/log`, {
    body: { split, trajectory_groups: groups },
  });
  expect(response.status).toBe(200);
}

async function train(modelId: string): Promise<string> {
  const created = await server.call('POST', '/v1/preview/training-jobs', {
    body: { model_id: modelId, trajectory_groups: [group([1, 0], 'train')] },
  });
  expect(created.status).toBe(200);
  const { events } = await followEvents(server, created.body.id, 100);
  expect(events.at(-1)?.type).toBe('training_ended');
  return created.body.id;
}

/** Every item of a list, following `after = last_id` with `limit` per page; also how many pages it took. */
async function collect(path: string, limit: number): Promise<{ items: any[]; pages: number }> {
  const items: any[] = [];
  let pages = 0;
  let after = '';
  for (;;) {
    const separator = path.includes('?') ? '&' : '?';
    const page = await server.call('GET', `${path}${separator}limit=${limit}${after === '' ? '' : `&after=${after}`}`);
    expect(page.status, page.text).toBe(200);
    pages += 1;
    items.push(...page.body.data);
    if (!page.body.has_more) return { items, pages };
    after = encodeURIComponent(page.body.last_id);
  }
}

describe('the key', () => {
  it('guards every local route with the same 401 as the contract routes', async () => {
    const model = await registerModel();
    const routes: [string, string, unknown?][] = [
      ['GET', '/v1/local/models'],
      ['GET', `/v1/local/models/${model.id}`],
      ['GET', `/v1/local/models/${model.id}/metrics`],
      ['POST', `/v1/local/models/${model.id}/metrics`, { step: 0, split: 'train', metrics: { loss: 1 } }],
      ['GET', `/v1/local/models/${model.id}/jobs`],
      ['GET', `/v1/local/models/${model.id}/trajectory-groups`],
    ];
    for (const [method, path, body] of routes) {
      for (const auth of [false, 'wrong-key'] as const) {
        const response = await server.call(method, path, { auth, ...(body === undefined ? {} : { body }) });
        expect(response.status, `${method} ${path} with ${String(auth)}`).toBe(401);
        expect(response.headers.get('www-authenticate')).toBe('Bearer');
        expect(typeof response.body.detail).toBe('string');
      }
    }
    // Nothing was written by the refused POST.
    const metrics = await server.call('GET', `/v1/local/models/${model.id}/metrics`);
    expect(metrics.body.data).toEqual([]);
  });
});

describe('404 and 422', () => {
  it('404s an unknown model in the contract shape on every model route', async () => {
    for (const [method, suffix, body] of [
      ['GET', ''],
      ['GET', '/metrics'],
      ['POST', '/metrics', { step: 0, split: 'train', metrics: { loss: 1 } }],
      ['GET', '/jobs'],
      ['GET', '/trajectory-groups'],
    ] as const) {
      const response = await server.call(method, `/v1/local/models/${UNKNOWN_ID}${suffix}`, body ? { body } : {});
      expect(response.status, `${method} ${suffix}`).toBe(404);
      expect(response.body.detail).toBe(`Model ${UNKNOWN_ID} not found`);
    }
    expect((await server.call('GET', '/v1/local/unknown')).status).toBe(404);
    const wrongMethod = await server.call('DELETE', '/v1/local/models');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')?.split(', ').sort()).toEqual(['GET', 'HEAD']);
  });

  it('422s bad paths, queries and cursors with FastAPI details located where the fault is', async () => {
    const model = await registerModel();
    const cases: [string, (string | number)[], string?][] = [
      ['/v1/local/models/not-a-uuid', ['path', 'model_id'], 'uuid_parsing'],
      ['/v1/local/models?limit=0', ['query', 'limit']],
      ['/v1/local/models?limit=101', ['query', 'limit']],
      ['/v1/local/models?after=nope', ['query', 'after']],
      [`/v1/local/models/${model.id}/metrics?split=a/b`, ['query', 'split']],
      [`/v1/local/models/${model.id}/metrics?after=nope`, ['query', 'after']],
      [`/v1/local/models/${model.id}/metrics?after=3:train`, ['query', 'after']],
      [`/v1/local/models/${model.id}/jobs?after=${UNKNOWN_ID}`, ['query', 'after']],
      [`/v1/local/models/${model.id}/trajectory-groups?step=first`, ['query', 'step']],
      [`/v1/local/models/${model.id}/trajectory-groups?step=-1`, ['query', 'step']],
      [`/v1/local/models/${model.id}/trajectory-groups?after=99999`, ['query', 'after']],
    ];
    for (const [path, loc, type] of cases) {
      const response = await server.call('GET', path);
      expect(response.status, path).toBe(422);
      expect(response.body.detail[0].loc, path).toEqual(loc);
      if (type !== undefined) expect(response.body.detail[0].type).toBe(type);
    }
  });

  it('validates the metrics body strictly: finite numbers, no split prefix, known keys only', async () => {
    const model = await registerModel();
    const path = `/v1/local/models/${model.id}/metrics`;
    const cases: [unknown, (string | number)[], string][] = [
      [{ split: 'train', metrics: { loss: 1 } }, ['body', 'step'], 'missing'],
      [{ step: -1, split: 'train', metrics: { loss: 1 } }, ['body', 'step'], 'greater_than_equal'],
      [{ step: 1.5, split: 'train', metrics: { loss: 1 } }, ['body', 'step'], 'int_type'],
      [{ step: 1, split: '', metrics: { loss: 1 } }, ['body', 'split'], 'too_short'],
      [{ step: 1, split: 'train/x', metrics: { loss: 1 } }, ['body', 'split'], 'string_pattern_mismatch'],
      [{ step: 1, split: 'train', metrics: { loss: '0.5' } }, ['body', 'metrics', 'loss'], 'float_type'],
      [{ step: 1, split: 'train', metrics: { loss: null } }, ['body', 'metrics', 'loss'], 'float_type'],
      [{ step: 1, split: 'train', metrics: { 'train/loss': 0.5 } }, ['body', 'metrics', 'train/loss'], 'value_error'],
      [{ step: 1, split: 'train', metrics: {} }, ['body', 'metrics'], 'value_error'],
      [{ step: 1, split: 'train', metrics: { loss: 1 }, extra: true }, ['body', 'extra'], 'extra_forbidden'],
    ];
    for (const [body, loc, type] of cases) {
      const response = await server.call('POST', path, { body });
      expect(response.status, JSON.stringify(body)).toBe(422);
      expect(response.body.detail[0], JSON.stringify(body)).toMatchObject({ loc, type });
    }
    // Non-finite numbers cannot be written in JSON; a body that tries is not JSON at all.
    const infinite = await server.call('POST', path, { raw: '{"step":1,"split":"train","metrics":{"loss":Infinity}}' });
    expect(infinite.status).toBe(422);
    expect((await server.call('GET', path)).body.data).toEqual([]);
  });
});

describe('models', () => {
  it('lists models newest first across pages, with their latest step, and filters by name parts', async () => {
    const project = `listing-${Date.now()}`;
    const created = [];
    for (let index = 0; index < 5; index += 1) created.push(await registerModel(project));
    const last = created[4] as { id: string };
    await train(last.id);

    const { items, pages } = await collect(`/v1/local/models?project=${project}`, 2);
    expect(pages).toBe(3);
    expect(items.map((model) => model.id)).toEqual(created.map((model) => model.id).reverse());
    expect(LocalModelPage.shape.data.element.parse(items[0])).toMatchObject({
      id: last.id,
      project,
      entity: 'local',
      base_model: 'policyloop/tiny-chat',
      latest_step: 1,
    });
    expect(items[1].latest_step).toBe(0);
    expect(Date.parse(items[0].created_at)).toBeGreaterThanOrEqual(Date.parse(items[4].created_at));

    const byName = await server.call('GET', `/v1/local/models?project=${project}&name=${created[2]?.name}`);
    expect(byName.body.data.map((model: { id: string }) => model.id)).toEqual([created[2]?.id]);
    const one = await server.call('GET', `/v1/local/models/${last.id.toUpperCase()}`);
    expect(one.body).toEqual(items[0]);
    // The whole list (no filter) holds them too, on a first page of the default size.
    const all = await server.call('GET', '/v1/local/models');
    expect(all.body.data.length).toBeLessThanOrEqual(20);
    expect(all.body.data[0].id).toBe(last.id);
  });
});

describe('step metrics', () => {
  it('merges the rows of a step and split in the order they were recorded: later keys win, others stay', async () => {
    const model = await registerModel();
    const path = `/v1/local/models/${model.id}/metrics`;
    await log(model.id, 'train', [group([1, 0], 'a'), group([1, 1], 'b')]);
    const written = await server.call('POST', path, { body: { step: 0, split: 'train', metrics: { loss: 0.5 } } });
    expect(written.status).toBe(200);
    expect(StepMetricsResponse.parse(written.body)).toMatchObject({
      id: '0:train',
      step: 0,
      split: 'train',
      metrics: { reward: 0.75, loss: 0.5, 'data/step_num_groups_submitted': 2 },
    });
    const again = await server.call('POST', path, {
      body: { step: 0, split: 'train', metrics: { loss: 0.25, reward: 0.8 } },
    });
    expect(again.body.metrics).toMatchObject({ loss: 0.25, reward: 0.8, reward_std_dev: 0.25 });
    expect(Date.parse(again.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(written.body.updated_at));

    // A later log of the same step adds its groups to the earlier logs' statistics (rewards 1, 0,
    // 1, 1, 0, 0 over 3 groups), and its row is the latest: its keys win over the written ones.
    await log(model.id, 'train', [group([0, 0], 'c')]);
    const listed = await server.call('GET', path);
    expect(StepMetricsPage.parse(listed.body).data).toEqual([
      expect.objectContaining({
        id: '0:train',
        metrics: expect.objectContaining({
          loss: 0.25,
          reward: 0.5,
          reward_std_dev: 1 / 6,
          frac_reward_zero_std: 2 / 3,
          'data/step_num_groups_submitted': 3,
          'data/step_num_trajectories': 6,
        }),
      }),
    ]);
  });

  it('answers a retry with the same Idempotency-Key from the first write, writing nothing again', async () => {
    const model = await registerModel();
    const path = `/v1/local/models/${model.id}/metrics`;
    const headers = { 'idempotency-key': `metrics-${model.id}` };
    const body = { step: 2, split: 'val', metrics: { reward: 0.1 } };
    const first = await server.call('POST', path, { body, headers });
    expect(first.status).toBe(200);
    await server.call('POST', path, { body: { step: 2, split: 'val', metrics: { reward: 0.9 } } });
    const retry = await server.call('POST', path, { body, headers });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body).toEqual(first.body);
    // The retry did not record 0.1 again after 0.9.
    expect((await server.call('GET', path)).body.data[0].metrics).toEqual({ reward: 0.9 });
  });

  it('pages by step then split, filters by split, and the cursor is the id of a listed row', async () => {
    const model = await registerModel();
    const path = `/v1/local/models/${model.id}/metrics`;
    for (const step of [3, 1, 2]) {
      for (const split of ['val', 'train']) {
        const response = await server.call('POST', path, { body: { step, split, metrics: { reward: step / 10 } } });
        expect(response.status).toBe(200);
      }
    }
    const { items, pages } = await collect(path, 4);
    expect(pages).toBe(2);
    expect(items.map((row) => row.id)).toEqual(['1:train', '1:val', '2:train', '2:val', '3:train', '3:val']);
    const val = await collect(`${path}?split=val`, 2);
    expect(val.items.map((row) => [row.step, row.metrics.reward])).toEqual([
      [1, 0.1],
      [2, 0.2],
      [3, 0.3],
    ]);
    const afterCursor = await server.call('GET', `${path}?after=${encodeURIComponent('2:train')}&limit=1`);
    expect(afterCursor.body).toMatchObject({ first_id: '2:val', last_id: '2:val', has_more: true });
  });
});

describe('jobs', () => {
  it("lists a model's jobs newest first with their kind and state, across pages", async () => {
    const model = await registerModel();
    const first = await train(model.id);
    const second = await train(model.id);
    const other = await registerModel();
    await train(other.id);
    const { items, pages } = await collect(`/v1/local/models/${model.id}/jobs`, 1);
    expect(pages).toBe(2);
    expect(items.map((job) => job.id)).toEqual([second, first]);
    expect(LocalTrainingJobPage.shape.data.element.parse(items[0])).toMatchObject({
      model_id: model.id,
      kind: 'rl',
      status: 'COMPLETED',
      progress: 1,
    });
  });
});

describe('logged trajectory groups', () => {
  it('filters by step and split, pages in logging order, and returns the groups as logged', async () => {
    const model = await registerModel();
    const path = `/v1/local/models/${model.id}/trajectory-groups`;
    await log(model.id, 'train', [group([1, 0], 'train-0-a'), group([0.5], 'train-0-b')]);
    await log(model.id, 'val', [group([1], 'val-0')]);
    await train(model.id);
    await log(model.id, 'train', [group([0], 'train-1-a'), group([1], 'train-1-b'), group([1], 'train-1-c')]);

    const label = (item: any) => item.group.trajectories[0].messages_and_choices[0].content;
    const all = await collect(path, 2);
    expect(all.pages).toBe(3);
    expect(all.items.map(label)).toEqual(['train-0-a', 'train-0-b', 'val-0', 'train-1-a', 'train-1-b', 'train-1-c']);
    expect((await collect(`${path}?step=0&split=train`, 1)).items.map(label)).toEqual(['train-0-a', 'train-0-b']);
    expect((await collect(`${path}?step=1`, 100)).items.map(label)).toEqual(['train-1-a', 'train-1-b', 'train-1-c']);
    expect((await collect(`${path}?split=val`, 100)).items.map(label)).toEqual(['val-0']);
    expect((await collect(`${path}?step=7`, 100)).items).toEqual([]);

    const page = LoggedTrajectoryGroupPage.parse((await server.call('GET', `${path}?step=0&split=train&limit=1`)).body);
    expect(page.data[0]).toMatchObject({
      step: 0,
      split: 'train',
      group: { trajectories: [{ reward: 1 }, { reward: 0 }] },
    });
    expect(page.data[0]?.group.trajectories[0]?.messages_and_choices[1]).toMatchObject({
      message: { content: 'train-0-a!' },
    });
  });
  it('returns each logged group as validation parsed it, however the body spelled it', async () => {
    const model = await registerModel();
    // Whitespace, key order, escapes inside strings, unknown keys and defaults left out: the service
    // stores the groups as sent, and must still answer with what `TrajectoryGroup` makes of them.
    const groups = [
      { extra: 1, trajectories: [{ reward: 1, messages_and_choices: [{ role: 'user', content: 'a "]},{[" b\\' }] }] },
      { trajectories: [{ metrics: { n: 2 }, unknown_key: [1, { deep: ['x'] }] }], metadata: { k: 'v' } },
      { trajectories: [] },
    ];
    const raw = `  {\n "trajectory_groups" :\t[ ${groups.map((item) => JSON.stringify(item, null, 1)).join(' ,\n ')} ] ,"split":"train"}  `;
    const response = await server.call('POST', `/v1/preview/models/${model.id}/log`, {
      raw,
      headers: { 'content-type': 'application/json' },
    });
    expect(response.status).toBe(200);
    // The answer as sent (not parsed by the page schema, which would fill the defaults itself).
    const page = (await server.call('GET', `/v1/local/models/${model.id}/trajectory-groups`)).body;
    expect(page.data.map((item: { group: unknown }) => item.group)).toEqual(
      groups.map((item) => TrajectoryGroup.parse(item)),
    );
    expect(page.data[0].group).not.toHaveProperty('extra');
    expect(page.data[1].group.trajectories[0]).toMatchObject({ reward: 0, logs: [], additional_histories: [] });
  });
});

describe('the dashboard shell', () => {
  it('serves the page and its assets without a key, with a strict content security policy', async () => {
    const page = await server.request('/');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    expect(html).toContain('<script src="/assets/dashboard.js" defer></script>');
    for (const asset of ['dashboard.js', 'dashboard.css', 'uplot.min.js', 'uplot.min.css']) {
      const response = await server.request(`/assets/${asset}`);
      expect(response.status, asset).toBe(200);
      expect((await response.text()).length).toBeGreaterThan(500);
    }
    const missing = await server.call('GET', '/assets/secrets.json', { auth: false });
    expect(missing.status).toBe(404);
    expect(missing.body.detail).toBe('Not Found');
  });
});
