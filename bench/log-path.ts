/**
 * The log path against `JSON.parse`: 2,000 groups of 8 trajectories (about 56 MB of JSON) through
 * `LogBatcher` into the local service over HTTP on loopback (in this process), until every row is
 * stored; and the service's validation of the same batches alone (the fast path, then the general
 * zod schema for comparison). Each is printed as MB/s and as a ratio to `JSON.parse` of the same
 * bytes, measured in the same round.
 *
 * Also the steps no path can skip, each alone (the client's serialization, SQLite storing the
 * rows): with the parse they bound what one thread can reach, printed as `bound in one thread`.
 *
 * Run: `npx tsx bench/log-path.ts` (`--rounds N`, default 3). The machine and load are printed.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TrajectoryGroupInput } from 'policyloop';
import { LogBatcher } from 'policyloop/training';
import { TrainingClient } from 'policyloop/client';
import { LogRequest } from 'policyloop/schema';
import { serve } from 'policyloop/server';
import { openDatabase } from '../src/server/sqlite.js';
import { fastParseLogRequest } from '../src/schema/fast-parse.js';

const GROUPS = 2_000;
const GROUP_SIZE = 8;
const TOKENS = 30;
const roundsFlag = process.argv.indexOf('--rounds');
const ROUNDS = roundsFlag > 0 ? Number(process.argv[roundsFlag + 1]) : 3;

function trajectory(group: number, index: number) {
  const tokens = Array.from({ length: TOKENS }, (_, position) => ` tok${(group * 31 + index * 7 + position) % 997}`);
  return {
    messages_and_choices: [
      { role: 'system' as const, content: 'You are a careful assistant. Answer with one short sentence.' },
      { role: 'user' as const, content: `Question ${group}: what is ${group} times ${index}? Explain briefly.` },
      {
        index: 0,
        finish_reason: 'stop' as const,
        message: { role: 'assistant' as const, content: tokens.join(''), refusal: null },
        logprobs: {
          content: tokens.map((token, position) => ({
            token,
            logprob: -0.001 * ((position * 37 + index) % 1000),
            bytes: [...Buffer.from(token)],
            top_logprobs: [],
          })),
          refusal: null,
        },
      },
    ],
    reward: (group + index) % 3,
    metrics: { correct: index % 2 === 0, turns: 1 },
    initial_policy_version: 0,
    final_policy_version: 0,
    start_time: '2026-11-23T07:00:00.000Z',
    logs: [`rollout ${index}`],
  };
}

const groups: TrajectoryGroupInput[] = Array.from({ length: GROUPS }, (_, group) => ({
  trajectories: Array.from({ length: GROUP_SIZE }, (_, index) => trajectory(group, index)),
}));
// The batches as the batcher sends them (64 groups each, its default), for the parse and validation figures.
const batchTexts: string[] = [];
for (let start = 0; start < GROUPS; start += 64) {
  batchTexts.push(JSON.stringify({ split: 'train', trajectory_groups: groups.slice(start, start + 64) }));
}
const totalBytes = batchTexts.reduce((sum, text) => sum + Buffer.byteLength(text), 0);
const megabytes = totalBytes / 1e6;

function seconds(work: () => void): number {
  const started = performance.now();
  work();
  return (performance.now() - started) / 1000;
}

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'policyloop-bench-log-'));
const service = await serve({ port: 0, dataDir });
// Retries on: an idle keep-alive connection the service closed between rounds resets the next request.
const client = new TrainingClient({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 2 });
console.log(
  `# log path: ${GROUPS} groups x ${GROUP_SIZE} trajectories (${megabytes.toFixed(1)} MB of JSON), LogBatcher -> local service (HTTP on loopback, this process) -> stored rows`,
);
console.log(
  `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${os.platform()} ${os.release()}, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);

/**
 * `JSON.parse` of the batches, and the service's validation of them (fast path, then zod alone), in
 * seconds. Runs in its own function so that the parsed copies are garbage before the end-to-end
 * measurement: the service never holds them, so neither should its figure pay for them.
 */
function measureParsing(): { parseSeconds: number; validationSeconds: number; zodSeconds: number } {
  const parseSeconds = seconds(() => {
    for (const text of batchTexts) JSON.parse(text);
  });
  const parsed = batchTexts.map((text) => JSON.parse(text) as unknown);
  const validationSeconds = seconds(() => {
    for (const body of parsed) if (fastParseLogRequest(body) === undefined) LogRequest.parse(body);
  });
  const fresh = batchTexts.map((text) => JSON.parse(text) as unknown);
  const zodSeconds = seconds(() => {
    for (const body of fresh) LogRequest.parse(body);
  });

  return { parseSeconds, validationSeconds, zodSeconds };
}

/**
 * The steps no log path can skip, each alone, in seconds: the client serializing the groups, and
 * SQLite storing their text the way the service does (WAL, `synchronous=FULL`, one transaction per
 * batch of 64) in a scratch database. With the service's parse, their sum bounds what one thread
 * can reach end to end, before HTTP, hashing, validation and garbage collection.
 */
function measureStages(round: number): { serializeSeconds: number; storeSeconds: number } {
  let texts: string[] = [];
  const serializeSeconds = seconds(() => {
    texts = groups.map((group) => JSON.stringify(group));
  });
  const database = openDatabase(path.join(dataDir, `stages-${round}.db`));
  database.exec('PRAGMA journal_mode = WAL');
  database.exec('PRAGMA synchronous = FULL');
  database.exec('CREATE TABLE rows (sequence INTEGER PRIMARY KEY, model_id TEXT, data TEXT)');
  const insert = database.prepare('INSERT INTO rows (model_id, data) VALUES (?, ?)');
  const storeBatch = database.transaction((batch: string[]) => {
    for (const text of batch) insert.run('bench', text);
  });
  const storeSeconds = seconds(() => {
    for (let start = 0; start < texts.length; start += 64) storeBatch(texts.slice(start, start + 64));
  });
  database.close();
  return { serializeSeconds, storeSeconds };
}

try {
  const results: { endToEnd: number; validation: number; zod: number; bound: number }[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const model = await client.models.create(
      { project: 'bench', name: `log-path-${round}`, base_model: 'policyloop/tiny-chat' },
      { idempotencyKey: randomUUID() },
    );
    const batcher = new LogBatcher({
      client,
      modelId: model.id,
      spoolPath: path.join(dataDir, `spool-${round}.jsonl`),
    });
    const started = performance.now();
    for (let start = 0; start < GROUPS; start += 100)
      await batcher.add({ split: 'train', groups: groups.slice(start, start + 100) });
    const stats = await batcher.close();
    const endToEndSeconds = (performance.now() - started) / 1000;
    const { parseSeconds, validationSeconds, zodSeconds } = measureParsing();
    const { serializeSeconds, storeSeconds } = measureStages(round);
    if (stats.sentGroups !== GROUPS || stats.spooledGroups !== 0)
      throw new Error(`not all sent: ${JSON.stringify(stats)}`);
    const database = openDatabase(path.join(dataDir, 'policyloop.db'), { readonly: true });
    const stored = database
      .prepare('SELECT count(*) AS count FROM trajectory_groups WHERE model_id = ?')
      .get(model.id) as { count: number };
    database.close();
    if (stored.count !== GROUPS) throw new Error(`expected ${GROUPS} stored groups, got ${stored.count}`);

    const parseRate = megabytes / parseSeconds;
    const result = {
      endToEnd: megabytes / endToEndSeconds / parseRate,
      validation: megabytes / validationSeconds / parseRate,
      zod: megabytes / zodSeconds / parseRate,
      bound: parseSeconds / (serializeSeconds + parseSeconds + storeSeconds),
    };
    results.push(result);
    console.log(
      `round ${round + 1}: JSON.parse ${parseRate.toFixed(0)} MB/s; end to end ${(megabytes / endToEndSeconds).toFixed(1)} MB/s = ${result.endToEnd.toFixed(2)}x JSON.parse; validation ${(megabytes / validationSeconds).toFixed(0)} MB/s = ${result.validation.toFixed(2)}x (zod alone ${result.zod.toFixed(2)}x); alone, serializing takes ${(serializeSeconds / parseSeconds).toFixed(2)}x and storing ${(storeSeconds / parseSeconds).toFixed(2)}x the parse time, so one thread reaches at most ${result.bound.toFixed(2)}x`,
    );
  }
  const range = (values: number[]): string => `${Math.min(...values).toFixed(2)}..${Math.max(...values).toFixed(2)}`;
  console.log(`end to end: ${range(results.map((result) => result.endToEnd))}x JSON.parse (target >= 0.35)`);
  console.log(`validation alone: ${range(results.map((result) => result.validation))}x JSON.parse`);
  console.log(`zod alone: ${range(results.map((result) => result.zod))}x JSON.parse`);
  console.log(
    `bound in one thread (serialize + parse + store alone): ${range(results.map((result) => result.bound))}x JSON.parse`,
  );
  console.log(
    `load average after: ${os
      .loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}`,
  );
} finally {
  await service.close();
  await rm(dataDir, { recursive: true, force: true });
}
