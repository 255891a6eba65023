/**
 * The `policyloop` command line as a user runs it: the real bin (through tsx) against a real
 * local service on loopback. Each subcommand's happy path, `--json` parsed, exit codes 0/1/2,
 * `jobs events --follow` to a job's end, the missing-key message and the HTML report.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TrainingClient } from 'policyloop/client';
import type { TrajectoryGroupInput } from 'policyloop';
import { LocalBackend, TrainableModel } from 'policyloop';
import { killChildren, runCli } from './support/run-cli.js';

const BASE_MODEL = 'policyloop/tiny-chat';
let dataDir: string;
let backend: LocalBackend;
let client: TrainingClient;
let model: TrainableModel;
let env: Record<string, string>;
const VAL_REWARDS = [0.125, 0.875, 0.5];

/** A val group of mean reward `reward` whose first trajectory says `answer` (text for the report). */
function valGroup(reward: number, answer: string): TrajectoryGroupInput {
  return {
    trajectories: [
      {
        reward,
        messages_and_choices: [
          { role: 'user', content: 'What is the capital of France?' },
          { role: 'assistant', content: answer },
        ],
      },
      { reward, messages_and_choices: [{ role: 'user', content: 'And of Spain?' }] },
    ],
  };
}

const SFT_ROWS = [
  {
    messages: [
      { role: 'user' as const, content: 'q' },
      { role: 'assistant' as const, content: 'a' },
    ],
  },
];

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-cli-'));
  backend = await LocalBackend.start({ dataDir });
  const connection = await backend.connect();
  client = connection.client;
  env = { POLICYLOOP_BASE_URL: connection.baseURL, POLICYLOOP_API_KEY: connection.apiKey };
  model = await new TrainableModel({ project: 'cli', name: 'agent', baseModel: BASE_MODEL }).register(backend);
  await model.log({ groups: [valGroup(VAL_REWARDS[0] as number, 'Paris, step zero')], split: 'val' });
  for (const [index, reward] of VAL_REWARDS.slice(1).entries()) {
    await model.trainSFT(SFT_ROWS);
    await model.log({ groups: [valGroup(reward, `Paris, step ${index + 1}`)], split: 'val' });
  }
  await model.flushLogs();
}, 120_000);

afterEach(() => killChildren());

afterAll(async () => {
  await model?.close();
  await backend?.close();
  await rm(dataDir, { recursive: true, force: true });
});

/** Parses JSON-lines output. */
function jsonLines(stdout: string): any[] {
  return stdout
    .trim()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

describe('usage and errors', () => {
  it('lists every command in --help (exit 0), and a usage error exits 2 with the usage', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    for (const name of ['serve', 'health', 'models', 'checkpoints', 'jobs', 'history', 'chat', 'report'])
      expect(help.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
    const subHelp = await runCli(['history', '--help']);
    expect(subHelp.code).toBe(0);
    expect(subHelp.stdout).toContain('--metric');
    const unknown = await runCli(['fly'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'fly'");
    const missingArgument = await runCli(['checkpoints', 'delete', model.id], env);
    expect(missingArgument.code).toBe(2);
    expect(missingArgument.stderr).toContain('--steps');
    const badSteps = await runCli(['checkpoints', 'delete', model.id, '--steps', '1,two'], env);
    expect(badSteps.code).toBe(2);
    expect(badSteps.stderr.trim()).toBe('policyloop: expected --steps to be integers >= 0, got "two"');
  });

  it('names POLICYLOOP_API_KEY when no key is given, in one line, exit 1', async () => {
    const result = await runCli(['models', 'list'], { POLICYLOOP_BASE_URL: env['POLICYLOOP_BASE_URL'] as string });
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain('POLICYLOOP_API_KEY');
  });

  it('fails with one line and exit 1 when the service refuses (404, 401, 422)', async () => {
    const missing = await runCli(['jobs', 'get', '00000000-0000-4000-8000-000000000000'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toMatch(/^policyloop: .*not found.*\(HTTP 404\)$/i);
    const denied = await runCli(['models', 'list', '--api-key', 'wrong'], env);
    expect(denied.code).toBe(1);
    expect(denied.stderr.trim().split('\n')).toHaveLength(1);
    expect(denied.stderr).toContain('HTTP 401');
    const refused = await runCli(['models', 'create', 'cli/bad', '--base-model', 'no/such-base-model'], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(/^policyloop: /);
  });
});

describe('commands', () => {
  it('health answers, as text and as JSON; --base-url and --api-key work instead of the variables', async () => {
    const text = await runCli(['health'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^ok: /);
    const json = await runCli([
      'health',
      '--json',
      '--base-url',
      env['POLICYLOOP_BASE_URL'] as string,
      '--api-key',
      env['POLICYLOOP_API_KEY'] as string,
    ]);
    expect(json.code).toBe(0);
    expect(() => JSON.parse(json.stdout)).not.toThrow();
  });

  it('models list / create / delete', async () => {
    const listed = await runCli(['models', 'list', '--json'], env);
    expect(listed.code).toBe(0);
    const models = jsonLines(listed.stdout);
    expect(models).toContainEqual(
      expect.objectContaining({ id: model.id, project: 'cli', name: 'agent', latest_step: 2 }),
    );
    const table = await runCli(['models', 'list', '--project', 'cli'], env);
    expect(table.stdout).toMatch(/^id\s+model\s+base model\s+step\s+created$/m);
    expect(table.stdout).toContain(`${model.id}  `);

    const created = await runCli(['models', 'create', 'cli/scratch', '--base-model', BASE_MODEL, '--json'], env);
    expect(created.code).toBe(0);
    const scratch = JSON.parse(created.stdout);
    expect(scratch).toMatchObject({ project: 'cli', name: 'scratch', base_model: BASE_MODEL });
    const deleted = await runCli(['models', 'delete', 'cli/scratch'], env);
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toContain(`deleted model ${scratch.id}`);
    const after = jsonLines((await runCli(['models', 'list', '--json', '--project', 'cli'], env)).stdout);
    expect(after.map((item) => item.name)).toEqual(['agent']);
  });

  it('checkpoints list and delete --steps', async () => {
    const other = await new TrainableModel({ project: 'cli', name: 'pruned', baseModel: BASE_MODEL }).register(backend);
    await other.trainSFT(SFT_ROWS);
    await other.trainSFT(SFT_ROWS);
    const listed = jsonLines((await runCli(['checkpoints', 'list', other.id, '--json'], env)).stdout);
    expect(listed.map((checkpoint) => checkpoint.step)).toEqual([1, 2]);
    const text = await runCli(['checkpoints', 'list', 'cli/pruned'], env);
    expect(text.stdout).toMatch(/^step\s+id\s+metrics$/m);
    const deleted = await runCli(['checkpoints', 'delete', other.id, '--steps', '1,7'], env);
    expect(deleted.code).toBe(0);
    expect(deleted.stdout).toBe('deleted 1 checkpoint(s)\nnot found: step 7\n');
    const left = jsonLines((await runCli(['checkpoints', 'list', other.id, '--json'], env)).stdout);
    expect(left.map((checkpoint) => checkpoint.step)).toEqual([2]);
    await other.close();
  });

  it('jobs get, and jobs events --follow streams a running job to its end: exit 0 ended, 1 failed', async () => {
    const target = await new TrainableModel({ project: 'cli', name: 'jobs', baseModel: BASE_MODEL }).register(backend);
    // In the model's sft-data folder: the local service reads file:// data from there (and its roots).
    const sftFile = path.join(dataDir, 'cli', 'models', 'jobs', 'sft-data', 'rows.jsonl');
    await import('node:fs/promises').then(({ mkdir }) => mkdir(path.dirname(sftFile), { recursive: true }));
    await import('node:fs/promises').then(({ writeFile }) =>
      writeFile(sftFile, `${Array.from({ length: 8 }, () => JSON.stringify(SFT_ROWS[0])).join('\n')}\n`),
    );
    const job = await client.jobs.createSFT({
      model_id: target.id,
      training_data_url: backend.localFileUrl(sftFile),
      config: { batch_size: 1 },
    });
    const followed = await runCli(['jobs', 'events', job.id, '--follow', '--json'], env);
    expect(followed.code).toBe(0);
    const events = jsonLines(followed.stdout);
    expect(events[0]?.type).toBe('training_started');
    expect(events.at(-1)?.type).toBe('training_ended');
    expect(events.filter((event) => event.type === 'gradient_step').length).toBeGreaterThan(0);
    // Piped: no progress on stderr.
    expect(followed.stderr).toBe('');

    const got = await runCli(['jobs', 'get', job.id, '--json'], env);
    expect(got.code).toBe(0);
    expect(JSON.parse(got.stdout)).toMatchObject({ id: job.id, status: 'COMPLETED' });
    const text = await runCli(['jobs', 'events', job.id], env);
    expect(text.code).toBe(0);
    expect(text.stdout.trim().split('\n').at(-1)).toMatch(/^training_ended/);

    // Nothing to train: the job fails, and following it exits 1.
    const failing = await client.jobs.createRL({
      model_id: target.id,
      trajectory_groups: [{ trajectories: [{ reward: 1 }, { reward: 0 }] }],
    });
    const failed = await runCli(['jobs', 'events', failing.id, '--follow'], env);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/^training_failed\s+error_message=The job has 0 trainable tokens/m);
    await target.close();
  });

  it('history: the latest metrics per step as a table, filtered, and as JSON lines', async () => {
    const text = await runCli(['history', 'cli/agent'], env);
    expect(text.code).toBe(0);
    const [header, ...rows] = text.stdout.trim().split('\n');
    expect(header).toMatch(/^step\s+val\/reward\s+sft\/loss/);
    expect(rows.slice(0, 3).map((row) => row.trim().split(/\s+/).slice(0, 2))).toEqual([
      ['0', '0.125'],
      ['1', '0.875'],
      ['2', '0.5'],
    ]);
    const json = jsonLines(
      (await runCli(['history', model.id, '--json', '--split', 'val', '--metric', 'reward'], env)).stdout,
    );
    expect(json.map((row) => [row.training_step, row['val/reward']])).toEqual([
      [0, 0.125],
      [1, 0.875],
      [2, 0.5],
    ]);
    expect(json.every((row) => Object.keys(row).sort().join() === 'recorded_at,training_step,val/reward')).toBe(true);
  });

  it('history falls back to history.jsonl under --data-dir when the service has no local routes', async () => {
    // A stand-in for the hosted service: every path answers 404, as /v1/local/ does there.
    const hosted: Server = createServer((_request, response) => {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}');
    });
    await new Promise<void>((resolve) => hosted.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(hosted.address() as AddressInfo).port}/v1`;
      const hostedEnv = { POLICYLOOP_BASE_URL: url, POLICYLOOP_API_KEY: 'k' };
      const list = await runCli(['models', 'list'], hostedEnv);
      expect(list.code).toBe(1);
      expect(list.stderr.trim()).toMatch(/^policyloop: http:\/\/127\.0\.0\.1:\d+\/v1 has no \/v1\/local\/ routes/);
      const without = await runCli(['history', 'cli/agent'], hostedEnv);
      expect(without.code).toBe(1);
      expect(without.stderr).toContain('--data-dir');
      const fromFile = await runCli(
        ['history', 'cli/agent', '--data-dir', dataDir, '--json', '--metric', 'val/reward'],
        hostedEnv,
      );
      expect(fromFile.code).toBe(0);
      expect(jsonLines(fromFile.stdout).map((row) => row['val/reward'])).toEqual(VAL_REWARDS);
      const report = path.join(dataDir, 'hosted-report.html');
      const written = await runCli(['report', 'cli/agent', '--data-dir', dataDir, '-o', report], hostedEnv);
      expect(written.code).toBe(0);
      expect(await readFile(report, 'utf8')).toContain(
        `data-series="val/reward" data-values="${VAL_REWARDS.map((value, step) => `${step}:${value}`).join(' ')}"`,
      );
    } finally {
      hosted.close();
    }
  });

  it('chat sends its completion to the training API, not the inference API (which only lists models)', async () => {
    const seen: { service: string; method: string; url: string; body: string }[] = [];
    const fake = (service: string): Server =>
      createServer((request, response) => {
        let body = '';
        request.on('data', (chunk) => {
          body += chunk;
        });
        request.on('end', () => {
          seen.push({ service, method: request.method ?? '', url: request.url ?? '', body });
          response.writeHead(200, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: `from ${service}` } }] }));
        });
      });
    const training = fake('training');
    const inference = fake('inference');
    await Promise.all(
      [training, inference].map((server) => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))),
    );
    try {
      const port = (server: Server) => (server.address() as AddressInfo).port;
      const name = 'wandb-artifact:///team/project/agent:step3';
      const result = await runCli(['chat', name, 'hi'], {
        POLICYLOOP_BASE_URL: `http://127.0.0.1:${port(training)}/v1`,
        POLICYLOOP_INFERENCE_BASE_URL: `http://127.0.0.1:${port(inference)}/v1`,
        POLICYLOOP_API_KEY: 'k',
      });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout.trim()).toBe('from training');
      expect(seen.map(({ service, method, url }) => [service, method, url])).toEqual([
        ['training', 'POST', '/v1/chat/completions'],
      ]);
      expect(JSON.parse(seen[0]?.body ?? '{}').model).toBe(name);
    } finally {
      training.close();
      inference.close();
    }
  });

  it('chat prints the reply of the latest checkpoint, or of a pinned step', async () => {
    const reply = await runCli(['chat', 'cli/agent', 'hello', '--max-tokens', '4', '--temperature', '0'], env);
    expect(reply.code).toBe(0);
    expect(reply.stdout.endsWith('\n')).toBe(true);
    const json = await runCli(['chat', model.id, 'hello', '--step', '1', '--max-tokens', '4', '--json'], env);
    expect(json.code).toBe(0);
    const body = JSON.parse(json.stdout);
    expect(body.model).toMatch(/cli\/agent:step1$/);
    expect(typeof body.choices[0].message.content).toBe('string');
    const badStep = await runCli(['chat', model.id, 'hello', '--step', '9'], env);
    expect(badStep.code).toBe(1);
    expect(badStep.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('report writes one self-contained HTML file with the curves as SVG and sample trajectories', async () => {
    const file = path.join(dataDir, 'report.html');
    const result = await runCli(['report', 'cli/agent', '-o', file], env);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(file);
    const html = await readFile(file, 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<svg');
    expect(html).toContain(`data-series="val/reward" data-values="0:0.125 1:0.875 2:0.5"`);
    expect(html).toMatch(/data-series="sft\/loss" data-values="0:[\d.e-]+ 1:[\d.e-]+"/);
    // Each step's own metrics (here the SFT steps' times) have their chart too.
    expect(html).toMatch(/data-series="time\/step" data-values="0:[\d.e-]+ 1:[\d.e-]+"/);
    expect(html).toContain('Seconds per step');
    // The newest val step's trajectories, best first.
    expect(html).toContain('Paris, step 2');
    expect(html).toContain('What is the capital of France?');
    // Self-contained: nothing loaded from elsewhere.
    expect(html).not.toMatch(/<script|<link|src="http/);
  });
});
