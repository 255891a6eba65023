/**
 * SFT training data URLs grant the training API, nothing of the host: `file://` reads only the
 * data directory's SFT files and configured roots; `http(s)://` is off unless enabled, and even
 * then never reaches loopback, private or link-local addresses unless allowed, redirects included.
 * Messages say what was refused and why, never what answered, and never repeat credentials.
 */
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { closedAfterEach, temporaryDirectory, type TestApp } from '../server/support/harness.js';
import { registerModel, sftJsonl, waitForJobEnd } from '../server/support/jobs.js';
import { createStandInEngine } from '../server/support/stand-in-engine.js';

const start = closedAfterEach(() => ({ engine: createStandInEngine() })).startApp;
const httpServers: Server[] = [];
afterEach(async () => {
  for (const http of httpServers.splice(0)) {
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
  }
});

const ROWS = sftJsonl([{ question: 'secret question', answer: 'secret answer' }]);

/** An HTTP server on 127.0.0.1 that counts what it is asked. */
async function listen(
  handler: (request: IncomingMessage, response: ServerResponse) => void,
): Promise<{ url: string; requests: IncomingMessage[] }> {
  const requests: IncomingMessage[] = [];
  const http = createServer((request, response) => {
    requests.push(request);
    handler(request, response);
  });
  httpServers.push(http);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, requests };
}

async function submit(server: TestApp, modelId: string, url: string) {
  return await server.call('POST', '/v1/preview/sft-training-jobs', {
    body: { model_id: modelId, training_data_url: url, config: { batch_size: 1 } },
  });
}

/** Submits, expects the job to be accepted, and returns it once it ended. */
async function runJob(server: TestApp, modelId: string, url: string): Promise<any> {
  const created = await submit(server, modelId, url);
  expect(created.status, created.text).toBe(200);
  return await waitForJobEnd(server, created.body.id);
}

async function expectHealthy(server: TestApp): Promise<void> {
  const health = await server.call('GET', '/v1/health', { auth: false });
  expect(health.status).toBe(200);
}

function expectRefused(answer: { status: number; text: string; body: any }, reason: RegExp): void {
  expect(answer.status, answer.text).toBe(422);
  expect(answer.text.length).toBeLessThan(4000);
  expect(answer.body.detail[0]).toMatchObject({ loc: ['body', 'training_data_url'], type: 'url_refused' });
  expect(answer.body.detail[0].msg).toMatch(reason);
}

describe('file:// training data', () => {
  it('is refused outside the data directory SFT files and the roots, and read inside them', async () => {
    const root = temporaryDirectory();
    const server = await start({ trainingDataRoots: [root] });
    const model = await registerModel(server, 'files');
    for (const path of ['/etc/passwd', join(server.dataDir, 'policyloop.sqlite'), join(root, '..', 'x.jsonl')]) {
      expectRefused(await submit(server, model.id, pathToFileURL(path).href), /training data roots/);
    }
    // No job was made for a refused URL.
    expect((await server.call('GET', `/v1/local/models/${model.id}/jobs`)).body.data).toEqual([]);

    // A link inside a root that leads outside is refused when the job reads it.
    const outside = join(temporaryDirectory(), 'private.jsonl');
    writeFileSync(outside, ROWS);
    symlinkSync(outside, join(root, 'link.jsonl'));
    const linked = await runJob(server, model.id, pathToFileURL(join(root, 'link.jsonl')).href);
    expect(linked.status).toBe('FAILED');
    expect(linked.error_message).toMatch(/^Refused training data file .*link\.jsonl: .*a link that leads elsewhere/);
    expect(linked.error_message).not.toContain('secret');

    // A root's files, and the data directory's own SFT files (where the local backend writes), are read.
    writeFileSync(join(root, 'rows.jsonl'), ROWS);
    expect((await runJob(server, model.id, pathToFileURL(join(root, 'rows.jsonl')).href)).status).toBe('COMPLETED');
    const own = join(server.dataDir, 'demo', 'models', 'agent', 'sft-data');
    mkdirSync(own, { recursive: true });
    writeFileSync(join(own, 'rows.jsonl'), ROWS);
    expect((await runJob(server, model.id, pathToFileURL(join(own, 'rows.jsonl')).href)).status).toBe('COMPLETED');
    await expectHealthy(server);
  });
});

describe('http(s):// training data', () => {
  it('is refused unless downloads are enabled, without a request being sent', async () => {
    const target = await listen((_request, response) => response.end(ROWS));
    const server = await start();
    const model = await registerModel(server, 'off');
    for (const url of [`${target.url}/rows.jsonl`, 'https://example.com/rows.jsonl']) {
      expectRefused(await submit(server, model.id, url), /downloads are off in this service/);
    }
    expect(target.requests).toHaveLength(0);
    await expectHealthy(server);
  });

  it('when enabled, refuses loopback, link-local and private addresses, resolved names included', async () => {
    const target = await listen((_request, response) => response.end(ROWS));
    const port = new URL(target.url).port;
    const server = await start({ allowTrainingDataDownloads: true });
    const model = await registerModel(server, 'private');
    for (const url of [
      `${target.url}/rows.jsonl`,
      `http://[::1]:${port}/rows.jsonl`,
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.1/rows.jsonl',
      'http://192.168.1.1/rows.jsonl',
      'http://[::ffff:127.0.0.1]/rows.jsonl',
      'http://[fe80::1]/rows.jsonl',
    ]) {
      expectRefused(await submit(server, model.id, url), /loopback, private, link-local or reserved address/);
    }
    // A name is resolved, and refused for the address it resolves to, before anything is sent.
    const named = await runJob(server, model.id, `http://localhost:${port}/rows.jsonl`);
    expect(named.status).toBe('FAILED');
    expect(named.error_message).toMatch(
      /^Refused training data URL http:\/\/localhost:\d+\/rows\.jsonl: localhost resolves to (127\.0\.0\.1|::1) is a loopback/,
    );
    expect(target.requests).toHaveLength(0);
    await expectHealthy(server);
  });

  it('with an allowed address downloads from it, and checks every redirect the same way', async () => {
    const rows = await listen((_request, response) => response.end(ROWS));
    const server = await start({ allowTrainingDataDownloads: true, trainingDataAllowedAddresses: ['127.0.0.1/32'] });
    const model = await registerModel(server, 'allowed');
    expect((await runJob(server, model.id, `${rows.url}/rows.jsonl`)).status).toBe('COMPLETED');
    expect(rows.requests).toHaveLength(1);
    // A name is resolved and connected to when all of its addresses are allowed.
    const byName = await start({
      allowTrainingDataDownloads: true,
      trainingDataAllowedAddresses: ['127.0.0.0/8', '::1'],
    });
    const byNameModel = await registerModel(byName, 'by-name');
    const named = await runJob(byName, byNameModel.id, `http://localhost:${new URL(rows.url).port}/rows.jsonl`);
    expect(named.status, named.error_message).toBe('COMPLETED');
    expect(rows.requests).toHaveLength(2);

    // A redirect to another allowed URL is followed.
    const hop = await listen((_request, response) => {
      response.writeHead(302, { location: `${rows.url}/rows.jsonl` }).end();
    });
    expect((await runJob(server, model.id, `${hop.url}/start`)).status).toBe('COMPLETED');
    expect(rows.requests).toHaveLength(3);

    // Redirects to cloud metadata, to a loopback address not allowed, and to a file are refused unsent.
    for (const [location, reason] of [
      ['http://169.254.169.254/latest/meta-data/iam/', /169\.254\.169\.254 is a loopback, private, link-local/],
      [`http://[::1]:${new URL(rows.url).port}/rows.jsonl`, /::1 is a loopback/],
      ['file:///etc/passwd', /only http:\/\/ and https:\/\/ redirects are followed/],
    ] as const) {
      const redirecting = await listen((_request, response) => response.writeHead(302, { location }).end());
      const job = await runJob(server, model.id, `${redirecting.url}/start`);
      expect(job.status).toBe('FAILED');
      expect(job.error_message).toMatch(/^Refused training data redirect from http:\/\/127\.0\.0\.1:\d+\/start to /);
      expect(job.error_message).toMatch(reason);
      expect(job.error_message.length).toBeLessThan(1000);
    }
    expect(rows.requests).toHaveLength(3);

    // An endless chain of redirects is cut after 5.
    const loop = await listen((_request, response) => response.writeHead(301, { location: '/again' }).end());
    const looped = await runJob(server, model.id, `${loop.url}/start`);
    expect(looped.error_message).toMatch(/redirects more than 5 times/);
    expect(loop.requests).toHaveLength(6);
    await expectHealthy(server);
  });

  it('never says what answered: an error status and a closed port read the same', async () => {
    const server = await start({ allowTrainingDataDownloads: true, trainingDataAllowedAddresses: ['127.0.0.1'] });
    const model = await registerModel(server, 'probe');
    const missing = await listen((_request, response) => {
      response.statusCode = 404;
      response.end('not here');
    });
    const closed = await listen(() => undefined);
    const closedUrl = closed.url;
    await new Promise((resolve) => httpServers.pop()?.close(resolve));
    const messages = [];
    for (const base of [missing.url, closedUrl]) {
      const job = await runJob(server, model.id, `${base}/rows.jsonl`);
      expect(job.status).toBe('FAILED');
      messages.push(job.error_message.replace(base, 'BASE'));
      expect(job.error_message).not.toMatch(/404|ECONNREFUSED|refused the connection|not here/);
    }
    expect(messages[0]).toBe(messages[1]);
    await expectHealthy(server);
  });
});

describe('credentials in training data URLs', () => {
  it('are sent as Basic auth but never repeated in 422s, job errors or the service log', async () => {
    const notes: string[] = [];
    const logger = {
      info: (message: string) => notes.push(message),
      warn: (message: string) => notes.push(message),
      error: (message: string) => notes.push(message),
    };
    const failing = await listen((_request, response) => {
      response.statusCode = 500;
      response.end();
    });
    const secrets = ['pa55word', 'tok3n-value', 'sig-value'];
    const withCredentials = (base: string): string =>
      `${base.replace('http://', 'http://alice:pa55word@')}/rows.jsonl?access_token=tok3n-value&X-Amz-Signature=sig-value&part=1`;

    const off = await start({ logger });
    const model = await registerModel(off, 'credentials');
    const refused = await submit(off, model.id, withCredentials(failing.url));
    expect(refused.status).toBe(422);
    for (const secret of secrets) expect(refused.text).not.toContain(secret);
    expect(refused.body.detail[0].msg).toContain('REDACTED@127.0.0.1');
    await off.close();

    const on = await start({ logger, allowTrainingDataDownloads: true, trainingDataAllowedAddresses: ['127.0.0.1'] });
    const onModel = await registerModel(on, 'credentials');
    const job = await runJob(on, onModel.id, withCredentials(failing.url));
    expect(job.status).toBe('FAILED');
    expect(job.error_message).toMatch(
      /^Cannot download training data from http:\/\/REDACTED@127\.0\.0\.1:\d+\/rows\.jsonl\?access_token=REDACTED&X-Amz-Signature=REDACTED&part=1: /,
    );
    const events = await on.call('GET', `/v1/preview/training-jobs/${job.id}/events`);
    // The user name and password went to the server they were meant for.
    expect(failing.requests[0]?.headers.authorization).toBe(
      `Basic ${Buffer.from('alice:pa55word').toString('base64')}`,
    );
    for (const secret of secrets) {
      expect(job.error_message).not.toContain(secret);
      expect(events.text).not.toContain(secret);
      for (const note of notes) expect(note).not.toContain(secret);
    }
    expect(notes.some((note) => note.includes('REDACTED'))).toBe(true);
    await expectHealthy(on);
  });
});
