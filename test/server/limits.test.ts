/**
 * Nothing hangs and nothing fills the memory: SFT data that never ends (a device, a FIFO, an
 * endless download) or is too big fails its job; a stuck job or completion is stopped by its
 * time limit; closing the service with requests in flight lets them finish or answers them 503.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp, DEV_API_KEY, serve } from 'policyloop/server';
import { InvalidArgumentError } from 'policyloop';
import { JobRunner } from '../../src/server/job-runner.js';
import { Store } from '../../src/server/store/index.js';
import { closedAfterEach, temporaryDirectory, type TestApp } from './support/harness.js';
import { createGate } from './support/gate.js';
import { followEvents, registerModel, sftJsonl, waitForJobEnd } from './support/jobs.js';
import { createStandInEngine } from './support/stand-in-engine.js';

const start = closedAfterEach().startApp;
const httpServers: Server[] = [];
afterEach(async () => {
  for (const http of httpServers.splice(0)) {
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
  }
});

async function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const http = createServer(handler);
  httpServers.push(http);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/rows.jsonl`;
}

/** Submits an SFT job for `url` and returns the job once it ended, with its events. */
async function sftJob(
  server: TestApp,
  modelId: string,
  url: string,
): Promise<{ job: any; events: { type: string; data: Record<string, unknown> }[] }> {
  const created = await server.call('POST', '/v1/preview/sft-training-jobs', {
    body: { model_id: modelId, training_data_url: url },
  });
  expect(created.status, created.text).toBe(200);
  const { events } = await followEvents(server, created.body.id, 20, 30_000);
  return { job: await waitForJobEnd(server, created.body.id), events };
}

describe('SFT training data limits', () => {
  it('fails a job whose file is a device or a FIFO (reading them would never end) without hanging', async () => {
    // Devices and FIFOs are refused even where the service may read.
    const server = await start({ engine: createStandInEngine(), trainingDataRoots: ['/dev', tmpdir()] });
    const model = await registerModel(server, 'devices');
    const fifo = join(temporaryDirectory(), 'rows.fifo');
    execFileSync('mkfifo', [fifo]);
    for (const path of ['/dev/zero', fifo, temporaryDirectory()]) {
      const { job, events } = await sftJob(server, model.id, pathToFileURL(path).href);
      expect(job.status, path).toBe('FAILED');
      expect(job.error_message).toBe(`Cannot read training data file ${path}: not a regular file`);
      expect(events.map((event) => event.type)).toEqual(['training_failed']);
    }
  });

  it('fails a job whose file, data: URL or download is over maxTrainingDataBytes', async () => {
    const server = await start({
      engine: createStandInEngine(),
      maxTrainingDataBytes: 1000,
      trainingDataRoots: [tmpdir()],
      allowTrainingDataDownloads: true,
      trainingDataAllowedAddresses: ['127.0.0.1'],
    });
    const model = await registerModel(server, 'too-big');
    const rows = sftJsonl(
      Array.from({ length: 40 }, (_, index) => ({ question: `question ${index}`, answer: `answer ${index}` })),
    );
    expect(rows.length).toBeGreaterThan(1000);
    const file = join(temporaryDirectory(), 'rows.jsonl');
    writeFileSync(file, rows);
    const fromFile = await sftJob(server, model.id, pathToFileURL(file).href);
    expect(fromFile.job.error_message).toBe(
      `Training data file ${file} is ${rows.length} bytes, over the limit of 1000 bytes`,
    );

    const fromData = await sftJob(
      server,
      model.id,
      `data:application/jsonl;base64,${Buffer.from(rows).toString('base64')}`,
    );
    expect(fromData.job.error_message).toBe('Training data is over the limit of 1000 bytes');

    const declared = await listen((_request, response) => response.end(rows));
    expect((await sftJob(server, model.id, declared)).job.error_message).toMatch(
      /is \d+ bytes, over the limit of 1000 bytes$/,
    );

    // No Content-Length and no end: refused as soon as the limit passes, not after the 60 s download limit.
    const endless = await listen((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/jsonl' });
      const timer = setInterval(() => response.write(`${rows.slice(0, 200)}\n`), 5);
      response.on('close', () => clearInterval(timer));
    });
    const fromEndless = await sftJob(server, model.id, endless);
    expect(fromEndless.job.status).toBe('FAILED');
    expect(fromEndless.job.error_message).toMatch(
      /^Training data at http:\/\/127\.0\.0\.1:\d+\/rows\.jsonl is over the limit of 1000 bytes$/,
    );

    // Under the limit, the same route trains.
    const small = sftJsonl([{ question: 'q', answer: 'a' }]);
    const fits = await sftJob(server, model.id, await listen((_request, response) => response.end(small)));
    expect(fits.job.status).toBe('COMPLETED');
  });

  it('does not say what a download got: no HTTP status, no connection error', async () => {
    const server = await start({
      engine: createStandInEngine(),
      allowTrainingDataDownloads: true,
      trainingDataAllowedAddresses: ['127.0.0.1'],
    });
    const model = await registerModel(server, 'missing-download');
    const url = await listen((_request, response) => {
      response.statusCode = 404;
      response.end('no such file');
    });
    const { job } = await sftJob(server, model.id, url);
    expect(job.error_message).toMatch(new RegExp(`^Cannot download training data from ${url}: no usable answer`));
    // The URL's port may hold the digits 404 too: only what the message says of the answer counts.
    expect(String(job.error_message).replace(url, '<url>')).not.toContain('404');
  });
});

describe('time limits', () => {
  it('stops a job that runs longer than jobTimeoutMs, with one training_failed event, and runs the next one', async () => {
    const gate = createGate();
    const server = await start({ engine: createStandInEngine({ gate: gate.wait }), jobTimeoutMs: 300 });
    const model = await registerModel(server, 'stuck');
    const groups = [{ trajectories: [{ reward: 0 }, { reward: 1 }] }];
    const stuck = await server.call('POST', '/v1/preview/training-jobs', {
      body: { model_id: model.id, trajectory_groups: groups },
    });
    const { events } = await followEvents(server, stuck.body.id);
    expect(events.map((event) => event.type)).toEqual(['training_failed']);
    expect(events[0]?.data['error_message']).toBe(
      "The job did not finish within 300 ms (the service's jobTimeoutMs) and was stopped",
    );
    expect((await waitForJobEnd(server, stuck.body.id)).status).toBe('FAILED');
    gate.open();
    const next = await server.call('POST', '/v1/preview/training-jobs', {
      body: { model_id: model.id, trajectory_groups: groups },
    });
    expect((await waitForJobEnd(server, next.body.id)).status).toBe('COMPLETED');
  });

  it("answers a completion slower than requestTimeoutMs with 503 and Retry-After, and stops the engine's work", async () => {
    const engine = createStandInEngine({ completionDelayMs: 60_000 });
    const server = await start({ engine, requestTimeoutMs: 200 });
    const response = await server.call('POST', '/v1/chat/completions', {
      body: { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('5');
    expect(response.body.detail).toBe(
      "The completion did not finish within 200 ms (the service's requestTimeoutMs): the engine is busy or stuck; try again later",
    );
    expect(response.body.error).toMatchObject({ type: 'server_error', code: 503 });
    expect(engine.completionSignals[0]?.aborted).toBe(true);
  });

  it('refuses timeouts and limits that are not positive integers', async () => {
    for (const options of [
      { requestTimeoutMs: 0 },
      { jobTimeoutMs: 1.5 },
      { maxTrainingDataBytes: -1 },
      { requestTimeoutMs: 2 ** 31 },
    ]) {
      await expect(
        createApp({ dataDir: temporaryDirectory(), engine: createStandInEngine(), ...options }),
      ).rejects.toThrow(/Expected `\w+` to be/);
    }
  });

  it('refuses a misspelt option of serve() or createApp, naming the nearest, before opening or listening on anything', async () => {
    const dataDir = join(temporaryDirectory(), 'never-made');
    const engine = createStandInEngine();
    const misspelt = serve({ port: 0, dataDir, engine, requestTimeoutMS: 5_000 } as never);
    await expect(misspelt).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(misspelt).rejects.toThrow('Unknown option `requestTimeoutMS`; did you mean `requestTimeoutMs`?');
    await expect(serve({ port: 0, dataDir, engine, allowedHost: ['mybox.lan'] } as never)).rejects.toThrow(
      'Unknown option `allowedHost`; did you mean `allowedHosts`?',
    );
    await expect(createApp({ dataDir, engine, maxBodyByte: 10 } as never)).rejects.toThrow(
      'Unknown option `maxBodyByte`; did you mean `maxBodyBytes`?',
    );
    // serve()'s own options are not the app's.
    await expect(createApp({ dataDir, engine, port: 0 } as never)).rejects.toThrow('Unknown option `port`');
    expect(existsSync(dataDir)).toBe(false);
  });
});

describe('closing with requests in flight', () => {
  const ask = (app: Awaited<ReturnType<typeof createApp>>) =>
    app.fetch(
      new Request('http://local/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'slow' }] }),
      }),
    );

  it('lets a completion in flight finish before the engine and store close', async () => {
    const engine = createStandInEngine({ completionDelayMs: 300 });
    const app = await createApp({ dataDir: temporaryDirectory(), engine });
    const inFlight = ask(app);
    await engine.completionsStarted(1);
    const closing = app.close();
    // New requests are refused while it drains.
    expect((await ask(app)).status).toBe(503);
    const response = await inFlight;
    expect(response.status).toBe(200);
    expect(((await response.json()) as any).choices[0].message.content).toBe('echo 0: slow');
    await closing;
  });

  it('answers 503 to a completion still running when the drain time is up, instead of a 500', async () => {
    const engine = createStandInEngine({ completionDelayMs: 60_000 });
    const app = await createApp({ dataDir: temporaryDirectory(), engine });
    const inFlight = ask(app);
    await engine.completionsStarted(1);
    await app.close(100);
    const response = await inFlight;
    expect(response.status).toBe(503);
    expect(((await response.json()) as any).detail).toMatch(/^The service stopped before the completion finished/);
    expect(engine.completionSignals[0]?.aborted).toBe(true);
  });

  it('answers 503, not 500, to a request that outlives close (its body arrives after the store closed)', async () => {
    const app = await createApp({ dataDir: temporaryDirectory(), engine: createStandInEngine() });
    const modelResponse = await app.fetch(
      new Request('http://local/v1/preview/models', {
        method: 'POST',
        headers: { authorization: `Bearer ${DEV_API_KEY}` },
        body: JSON.stringify({ project: 'p', name: 'late', base_model: 'policyloop/tiny-chat' }),
      }),
    );
    const model = (await modelResponse.json()) as { id: string };
    let release = (): void => undefined;
    let reading = (): void => undefined;
    const bodyRead = new Promise<void>((resolve) => {
      reading = resolve;
    });
    const body = new ReadableStream<Uint8Array>({
      // The service has taken the first chunk and asks for more: it is past the door, reading the body.
      pull() {
        reading();
      },
      start(controller) {
        controller.enqueue(new TextEncoder().encode(`{"model_id": "${model.id}", `));
        release = () => {
          controller.enqueue(
            new TextEncoder().encode('"trajectory_groups": [{"trajectories": [{"reward": 1}, {"reward": 0}]}]}'),
          );
          controller.close();
        };
      },
    });
    // Past the door (authenticated, body still arriving) when close starts.
    const submitted = app.fetch(
      new Request('http://local/v1/preview/training-jobs', {
        method: 'POST',
        headers: { authorization: `Bearer ${DEV_API_KEY}` },
        body,
        duplex: 'half',
      } as RequestInit),
    );
    await bodyRead;
    await app.close(50);
    release();
    const response = await submitted;
    expect(response.status).toBe(503);
    expect(((await response.json()) as any).detail).toBe('The service is stopped');
  });
});

describe('unexpected errors', () => {
  it('answers 500 with the request id, and logs the cause with that id but never the key', async () => {
    const notes: string[] = [];
    const logger = {
      info: (note: string) => notes.push(note),
      warn: (note: string) => notes.push(note),
      error: (note: string) => notes.push(note),
    };
    const engine = {
      ...createStandInEngine(),
      chatCompletion: async () => Promise.reject(new Error('engine exploded')),
    };
    const server = await start({ engine, logger, apiKeys: ['secret-key-1234'] });
    const response = await server.call('POST', '/v1/chat/completions', {
      body: { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: 'hi' }] },
      auth: 'secret-key-1234',
    });
    expect(response.status).toBe(500);
    expect(response.body.detail).toBe('Internal server error');
    const requestId = response.headers.get('x-request-id') as string;
    const note = notes.find((entry) => entry.includes(requestId));
    expect(note).toContain('engine exploded');
    expect(notes.join('\n')).not.toContain('secret-key-1234');
  });
});

describe('an engine that ignores the abort', () => {
  it("still fails the timed-out job with one terminal event, and the model's next job runs", async () => {
    const dataDir = temporaryDirectory();
    const store = Store.openIn(dataDir);
    const standIn = createStandInEngine();
    let calls = 0;
    // The first job never settles, whatever the signal says.
    const engine = {
      ...standIn,
      train: (...args: Parameters<typeof standIn.train>) =>
        ++calls === 1 ? new Promise<never>(() => undefined) : standIn.train(...args),
    };
    const runner = new JobRunner({
      store,
      engine,
      dataDir,
      maxConcurrentJobs: 1,
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
      // The limit applies to the next job too: long enough that a loaded machine still runs it in
      // time, short enough to keep the test quick.
      jobTimeoutMs: 1_000,
      engineStopGraceMs: 100,
    });
    try {
      const model = store.models.create({
        entity: 'local',
        project: 'p',
        name: 'deaf',
        base_model: 'policyloop/tiny-chat',
      });
      const request = { model_id: model.id, trajectory_groups: [{ trajectories: [{ reward: 0 }, { reward: 1 }] }] };
      const stuck = store.jobs.create({ modelId: model.id, kind: 'rl', request });
      const next = store.jobs.create({ modelId: model.id, kind: 'rl', request });
      runner.enqueue(stuck.id, model.id);
      runner.enqueue(next.id, model.id);
      const ended = (id: string) => ['COMPLETED', 'FAILED'].includes(store.jobs.get(id)?.status ?? '');
      for (const id of [stuck.id, next.id]) {
        const deadline = Date.now() + 10_000;
        while (!ended(id) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(store.jobs.get(stuck.id)).toMatchObject({
        status: 'FAILED',
        error_message: expect.stringContaining('jobTimeoutMs'),
      });
      expect(store.jobEvents.list(stuck.id, { limit: 10 })?.items.map((event) => event.type)).toEqual([
        'training_failed',
      ]);
      expect(store.jobs.get(next.id)?.status).toBe('COMPLETED');
    } finally {
      await runner.close();
      store.close();
    }
  });
});

describe('many completions at once', () => {
  it('answers 40 concurrent completions without a listener-leak warning reaching the console', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => {
      warnings.push(`${warning.name}: ${warning.message}`);
    };
    process.on('warning', onWarning);
    try {
      const server = await start({ engine: createStandInEngine({ completionDelayMs: 100 }) });
      const responses = await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          server.call('POST', '/v1/chat/completions', {
            body: { model: 'policyloop/tiny-chat', messages: [{ role: 'user', content: `r${index}` }] },
          }),
        ),
      );
      expect(responses.map((response) => response.status)).toEqual(Array(40).fill(200));
      // Node emits a warning on the next tick after the cause: one turn of the event loop delivers them all.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((warning) => warning.includes('MaxListeners'))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
