/**
 * Stored data must not make reads fail for good (issue 15): `policyloop serve` in its own process
 * (capped heap) accepts ten log writes of one group each, every body near the 64 MiB limit, at one
 * step. The dashboard's read of that step (ten groups a page) must answer 200 with a page bounded
 * in bytes that ends early and continues by cursor, every page of the step must read, the process
 * must answer health within a second afterwards, and `policyloop report` must write its HTML with
 * the long message clipped.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createApp, DEV_API_KEY } from 'policyloop/server';
import { createStandInEngine } from '../server/support/stand-in-engine.js';
import { call, createModel, expectHealthy, startService } from './support/service.js';

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const MiB = 1024 * 1024;
/** Characters of the one long message of each group: with its wrapping, a body just under 64 MiB. */
const MESSAGE_CHARACTERS = 60 * MiB;
const GROUPS = 10;

interface GroupPage {
  data: { id: string; step: number; group: { trajectories: unknown[] } }[];
  has_more: boolean;
  last_id: string;
}

describe('reads of large stored groups', () => {
  it('pages a step of ten near-limit groups by bytes, and report clips them', async () => {
    const service = await startService();
    const modelId = await createModel(service);
    const body = `{"split":"train","trajectory_groups":[{"trajectories":[{"reward":1,"messages_and_choices":[{"role":"user","content":"${'a'.repeat(MESSAGE_CHARACTERS)}"},{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}]}]}`;
    expect(body.length).toBeGreaterThan(60 * MiB);
    expect(body.length).toBeLessThan(64 * MiB);
    for (let index = 0; index < GROUPS; index += 1) {
      const answer = await call(service, 'POST', `/v1/preview/models/${modelId}/log`, body);
      expect(answer.status, answer.text.slice(0, 300)).toBe(200);
    }

    // What the dashboard asks for: ten groups of the step. Each page holds one group (over the
    // 16 MiB page budget on its own), and the cursor walks the whole step.
    const route = `/v1/local/models/${modelId}/trajectory-groups?split=train&step=0&limit=10`;
    let after = '';
    let read = 0;
    for (let page = 0; page < GROUPS; page += 1) {
      const answer = await call(service, 'GET', `${route}${after === '' ? '' : `&after=${after}`}`);
      expect(answer.status, answer.text.slice(0, 300)).toBe(200);
      expect(answer.bytes).toBeLessThan(64 * MiB + MiB);
      const parsed = JSON.parse(answer.text) as GroupPage;
      expect(parsed.data).toHaveLength(1);
      expect(parsed.data[0]?.group.trajectories).toHaveLength(1);
      read += parsed.data.length;
      expect(parsed.has_more).toBe(read < GROUPS);
      after = parsed.last_id;
      await expectHealthy(service);
    }
    expect(read).toBe(GROUPS);

    const output = path.join(service.dataDir, 'report.html');
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      POLICYLOOP_BASE_URL: service.url,
      POLICYLOOP_API_KEY: DEV_API_KEY,
    };
    await promisify(execFile)(
      process.execPath,
      ['--max-old-space-size=1024', '--import', 'tsx', MAIN, 'report', modelId, '-o', output],
      { env, timeout: 240_000 },
    );
    const html = await readFile(output, 'utf8');
    expect(html).toContain(`(${MESSAGE_CHARACTERS - 20_000} more characters not shown)`);
    expect(html.length).toBeLessThan(2 * MiB);
    await expectHealthy(service);
  }, 600_000);

  it('pages step metrics by bytes too (maxPageBytes)', async () => {
    // In process with a 1 MiB page: the same rule as the groups' pages, without gigabytes of data.
    const app = await createApp({
      dataDir: mkdtempSync(path.join(tmpdir(), 'policyloop-read-bounds-')),
      engine: createStandInEngine(),
      maxPageBytes: MiB,
    });
    try {
      const send = async (method: string, route: string, body?: string) => {
        const response = await app.fetch(
          new Request(`http://127.0.0.1${route}`, {
            method,
            headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
            ...(body === undefined ? {} : { body }),
          }),
        );
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      const model = await send(
        'POST',
        '/v1/preview/models',
        JSON.stringify({ project: 'security', name: 'metrics', base_model: 'policyloop/tiny-chat' }),
      );
      const modelId = model.body['id'] as string;
      // 30,000 names of 16 characters: about 0.7 MB a step, so two steps do not fit one page.
      const metrics = Object.fromEntries(
        Array.from({ length: 30_000 }, (_, index) => [`m${String(index).padStart(15, '0')}`, index]),
      );
      for (let step = 0; step < 3; step += 1) {
        const written = await send(
          'POST',
          `/v1/local/models/${modelId}/metrics`,
          JSON.stringify({ step, split: 'train', metrics }),
        );
        expect(written.status).toBe(200);
      }
      // A small step still shares a page with its neighbour: only size ends a page early.
      const small = await send(
        'POST',
        `/v1/local/models/${modelId}/metrics`,
        JSON.stringify({ step: 3, split: 'train', metrics: { loss: 1 } }),
      );
      expect(small.status).toBe(200);
      const steps: number[][] = [];
      let after = '';
      for (let page = 0; page < 5; page += 1) {
        const answer = await send(
          'GET',
          `/v1/local/models/${modelId}/metrics?limit=100${after === '' ? '' : `&after=${encodeURIComponent(after)}`}`,
        );
        expect(answer.status).toBe(200);
        const data = answer.body['data'] as { step: number; metrics: Record<string, number> }[];
        steps.push(data.map((row) => row.step));
        for (const row of data) expect(Object.keys(row.metrics).length).toBe(row.step === 3 ? 1 : 30_000);
        if (answer.body['has_more'] !== true) break;
        after = answer.body['last_id'] as string;
      }
      expect(steps).toEqual([[0], [1], [2, 3]]);
    } finally {
      await app.close();
    }
  });
});
