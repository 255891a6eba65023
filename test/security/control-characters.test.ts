/**
 * Control characters (ESC, BEL, backspace, C1 controls, bidirectional overrides) rewrite what a
 * terminal shows. Names holding them are refused with a 422 naming the field; service data that
 * still holds them (a job's error quoting a path) is escaped wherever the CLI or the service log
 * prints it.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { closedAfterEach, temporaryDirectory } from '../server/support/harness.js';
import { registerModel, waitForJobEnd } from '../server/support/jobs.js';
import { createStandInEngine } from '../server/support/stand-in-engine.js';
import { killChildren, startCli } from '../cli/support/run-cli.js';

afterEach(() => {
  killChildren();
});
const start = closedAfterEach(() => ({ engine: createStandInEngine() })).startServer;

const CONTROLS = ['\u001b[2J', '\u0007', '\u0008', '\u009b31m', '\u202e', '\u007f', '\u0000'];
/** Any raw control character (tab and newline included). */
const RAW_CONTROL = /[\p{Cc}\u202a-\u202e\u2066-\u2069]/u;
/** Whether `text` holds a control character other than a newline. */
const controlBesidesNewline = (text: string): boolean => RAW_CONTROL.test(text.replaceAll('\n', ''));

describe('names with control characters', () => {
  it('are refused with a 422 naming the field; other names are answered as before', async () => {
    const server = await start();
    for (const field of ['entity', 'project', 'name'] as const) {
      for (const control of CONTROLS) {
        const body = {
          entity: 'team',
          project: 'p',
          name: 'n',
          base_model: 'policyloop/tiny-chat',
          [field]: `a${control}b`,
        };
        const answer = await server.call('POST', '/v1/preview/models', { body });
        expect(answer.status, JSON.stringify(body)).toBe(422);
        expect(answer.text.length).toBeLessThan(2000);
        expect(answer.body.detail[0].loc).toEqual(['body', field]);
        expect(answer.body.detail[0].msg).toContain(`Expected a ${field} without control characters`);
        expect(answer.body.detail[0].msg).not.toMatch(RAW_CONTROL);
      }
    }
    expect((await server.call('GET', '/v1/local/models')).body.data).toEqual([]);
    // Letters beyond ASCII, dots and dashes stay valid.
    const fine = await server.call('POST', '/v1/preview/models', {
      body: { project: 'projet-été', name: 'modèle.v1_ü', base_model: 'policyloop/tiny-chat' },
    });
    expect(fine.status).toBe(200);

    const model = await registerModel(server, 'splits');
    const log = await server.call('POST', `/v1/preview/models/${model.id}/log`, {
      body: { split: 'tr\u001bain', trajectory_groups: [{ trajectories: [{ reward: 1 }, { reward: 0 }] }] },
    });
    expect(log.status).toBe(422);
    expect(log.body.detail[0].loc).toEqual(['body', 'split']);
    const metrics = await server.call('POST', `/v1/local/models/${model.id}/metrics`, {
      body: { step: 0, split: 'train', metrics: { 'lo\u0008ss': 1 } },
    });
    expect(metrics.status).toBe(422);
    expect(JSON.stringify(metrics.body.detail[0].loc)).toContain('metrics');
    const query = await server.call(
      'GET',
      `/v1/local/models/${model.id}/metrics?split=${encodeURIComponent('a\u0007')}`,
    );
    expect(query.status).toBe(422);
    expect(query.body.detail[0].loc).toEqual(['query', 'split']);
    expect((await server.call('GET', '/v1/health', { auth: false })).status).toBe(200);
  });
});

describe('service data printed by the CLI and the log', () => {
  it('is escaped: a job error quoting a path with ESC, C1 and a newline', async () => {
    const notes: string[] = [];
    const note = (message: string) => notes.push(message);
    const root = temporaryDirectory();
    const server = await start({ trainingDataRoots: [root], logger: { info: note, warn: note, error: note } });
    const model = await registerModel(server, 'printed');
    // A path that does not exist: the job fails with a message that quotes it.
    const path = join(root, 'x\u001b[31mred\u009b2J\n[policyloop] fake note.jsonl');
    mkdirSync(root, { recursive: true });
    const created = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: pathToFileURL(path).href },
    });
    expect(created.status).toBe(200);
    const job = await waitForJobEnd(server, created.body.id);
    expect(job.status).toBe('FAILED');
    expect(job.error_message).toContain('\u001b[31m'); // the API returns data as it is

    // The service log: escaped, and no note makes a line of its own.
    const failure = notes.find((line) => line.includes(created.body.id) && line.includes('failed'));
    expect(failure).toBeDefined();
    expect(failure).toContain('x\\x1b[31mred\\x9b2J');
    for (const line of notes) {
      expect(controlBesidesNewline(line)).toBe(false);
      for (const continuation of line.split('\n').slice(1)) expect(continuation).toMatch(/^\s/);
    }

    const env = { POLICYLOOP_BASE_URL: server.handle.baseURL, POLICYLOOP_API_KEY: server.handle.apiKey };
    const table = await startCli(['jobs', 'get', job.id], env).done;
    expect(table.code).toBe(0);
    expect(table.stdout).toContain('x\\x1b[31mred\\x9b2J\\x0a[policyloop] fake note.jsonl');
    expect(controlBesidesNewline(table.stdout)).toBe(false);
    const json = await startCli(['jobs', 'get', job.id, '--json'], env).done;
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).error_message).toBe(job.error_message);
    expect(json.stdout.trimEnd()).not.toMatch(RAW_CONTROL);
    expect((await server.call('GET', '/v1/health', { auth: false })).status).toBe(200);
  }, 60_000);
});
