/**
 * Hostile request bodies against `policyloop serve` in its own process (capped heap), one test per
 * defect of issue 15: one long array of wrong values (a million elements, and a body near the
 * 64 MiB limit), wrong values nested in arrays on the log, training-jobs and chat-completions
 * routes, and a chat message of a million characters. Each answer must be a 4xx of bounded size,
 * and the process must still run and answer health within a second afterwards.
 */
import { describe, expect, it } from 'vitest';
import { type Answer, call, createModel, expectHealthy, ones, startService } from './support/service.js';

/** Details a 422 lists at most (docs/reliability.md), before its `too_many_errors` entry. */
const MAX_REPORTED_ISSUES = 100;

/** Largest 422 we accept: 100 details and the note, each well under 500 bytes. */
const MAX_ANSWER_BYTES = 64 * 1024;

interface Detail {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** A bounded 422: at most 100 details plus one `too_many_errors` entry, under 64 KiB. */
function expectBounded422(answer: Answer, label: string): Detail[] {
  expect(answer.status, `${label}: ${answer.text.slice(0, 300)}`).toBe(422);
  expect(answer.bytes).toBeLessThan(MAX_ANSWER_BYTES);
  const detail = (JSON.parse(answer.text) as { detail: Detail[] }).detail;
  expect(detail.length).toBeLessThanOrEqual(MAX_REPORTED_ISSUES + 1);
  return detail;
}

describe('hostile input', () => {
  it('answers one long array of wrong values (a million, and a body near the 64 MiB limit) with a bounded 422', async () => {
    const service = await startService();
    const modelId = await createModel(service);
    const bodies: [string, string, string][] = [
      [
        'log, 1M wrong groups',
        `/v1/preview/models/${modelId}/log`,
        `{"split":"train","trajectory_groups":${ones(1_000_000)}}`,
      ],
      [
        'chat, 1M wrong messages',
        '/v1/chat/completions',
        `{"model":"policyloop/tiny-chat","messages":${ones(1_000_000)}}`,
      ],
      [
        'training job, 1M wrong groups',
        '/v1/preview/training-jobs',
        `{"model_id":"${modelId}","trajectory_groups":${ones(1_000_000)}}`,
      ],
      // 31M elements, 62 MB: the whole array is parsed, then validation stops at the bound.
      [
        'log, a 62 MB body',
        `/v1/preview/models/${modelId}/log`,
        `{"split":"train","trajectory_groups":${ones(31_000_000)}}`,
      ],
      // The same inside one message: the log route's fast path checked such a message with zod alone.
      [
        'log, a message of 31M wrong content parts',
        `/v1/preview/models/${modelId}/log`,
        `{"split":"train","trajectory_groups":[{"trajectories":[{"messages_and_choices":[{"role":"user","content":${ones(31_000_000)}}]}]}]}`,
      ],
    ];
    for (const [label, route, body] of bodies) {
      const answer = await call(service, 'POST', route, body);
      const detail = expectBounded422(answer, label);
      expect(detail.length).toBeGreaterThan(1);
      expect(detail[0]?.type).toBe('dict_type');
      expect(detail.at(-1)).toMatchObject({ type: 'too_many_errors', loc: ['body'] });
      await expectHealthy(service);
    }
  }, 300_000);

  it('answers wrong values nested in arrays (125k and 1M) with a bounded 422 on the log, training-jobs and chat routes', async () => {
    const service = await startService();
    const modelId = await createModel(service);
    for (const count of [125_000, 1_000_000]) {
      const trajectory = `{"messages_and_choices":${ones(count)}}`;
      const groups = `[{"trajectories":[${trajectory}]}]`;
      const bodies: [string, string, string][] = [
        ['log', `/v1/preview/models/${modelId}/log`, `{"split":"train","trajectory_groups":${groups}}`],
        ['training job', '/v1/preview/training-jobs', `{"model_id":"${modelId}","trajectory_groups":${groups}}`],
        [
          'chat',
          '/v1/chat/completions',
          `{"model":"policyloop/tiny-chat","messages":[{"role":"user","content":${ones(count)}}]}`,
        ],
      ];
      for (const [label, route, body] of bodies) {
        const answer = await call(service, 'POST', route, body);
        const detail = expectBounded422(answer, `${label}, ${count} nested`);
        expect(detail.at(-1)?.type).toBe('too_many_errors');
        // The first detail points into the nested array.
        expect(detail[0]?.loc).toContain(0);
        expect(detail[0]?.loc.length).toBeGreaterThan(3);
        await expectHealthy(service);
      }
    }
  }, 300_000);

  it('answers a chat message of 125k and 1M characters with the context-length 422', async () => {
    const service = await startService();
    for (const length of [125_000, 1_000_000]) {
      for (const role of ['user', 'assistant']) {
        const body = JSON.stringify({
          model: 'policyloop/tiny-chat',
          messages: [
            { role, content: 'a'.repeat(length) },
            { role: 'user', content: 'hi' },
          ],
          max_tokens: 4,
        });
        const answer = await call(service, 'POST', '/v1/chat/completions', body);
        const detail = expectBounded422(answer, `${role} message of ${length} characters`);
        expect(detail[0]?.msg).toMatch(
          /^The prompt is \d+ tokens long, but policyloop\/tiny-chat has a context of \d+ tokens/,
        );
        await expectHealthy(service);
      }
    }
  }, 300_000);

  it('fails an SFT job whose data line holds 10M wrong content parts at its first issue, and keeps serving', async () => {
    const service = await startService();
    const modelId = await createModel(service);
    const line = `{"messages":[{"role":"user","content":${ones(10_000_000)}},{"role":"assistant","content":"ok"}]}`;
    const url = `data:application/jsonl;base64,${Buffer.from(line).toString('base64')}`;
    const created = await call(
      service,
      'POST',
      '/v1/preview/sft-training-jobs',
      JSON.stringify({ model_id: modelId, training_data_url: url }),
    );
    expect(created.status, created.text.slice(0, 300)).toBe(200);
    const jobId = (JSON.parse(created.text) as { id: string }).id;
    let job: { status: string; error_message?: string | null } = { status: 'PENDING' };
    for (let poll = 0; poll < 600 && (job.status === 'PENDING' || job.status === 'RUNNING'); poll += 1) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const answer = await call(service, 'GET', `/v1/preview/training-jobs/${jobId}`);
      expect(answer.status, `${answer.text.slice(0, 300)} ${service.stderr()}`).toBe(200);
      job = JSON.parse(answer.text) as typeof job;
    }
    expect(job.status).toBe('FAILED');
    expect(job.error_message).toMatch(
      /^Training data line 1 is not a \{"messages": \[\.\.\.\], "tools"\?: \[\.\.\.\]\} row at messages\.0/,
    );
    expect(job.error_message?.length).toBeLessThan(1_000);
    await expectHealthy(service);
  }, 300_000);
});
