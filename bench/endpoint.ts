/**
 * What the per-rollout endpoint (`context.endpoint`) and the Responses / Messages translations cost
 * per call, in CPU of the training script's process, against the direct captured client in the
 * same run. One upstream chat-completions endpoint in a separate process (a fixed 8-token
 * completion with logprobs, JSON or SSE, after 5 ms) serves every side; each side is a gather of
 * 256 rollouts (16 at once) making 8 calls each, recorded into their trajectories:
 *
 * - `direct`: `model.openai().chat.completions.create` (the captured client): the baseline;
 * - `responses`: `model.openai().responses.create`, translated in-process;
 * - `direct stream`: the same streamed (`stream: true`): the baseline of the streamed side;
 * - `responses stream`: `responses.create` with `stream: true` (typed events out of the chat chunks);
 * - `fetch chat stream` and `fetch responses stream`: the two streamed calls through `model.fetch()`
 *   with the body read as text, no SDK: what the translation itself adds to a stream, without the
 *   SDK reading the Responses API's larger event stream;
 * - `messages`: `@anthropic-ai/sdk`'s `messages.create` on `model.fetch()`, translated in-process;
 * - `endpoint chat`: an `openai` client in another process (one load process for all rollouts,
 *   told each rollout's endpoint over IPC) calling `context.endpoint`: the script serves the call
 *   and forwards it through the model's recording fetch;
 * - `endpoint responses`: the same with the Responses API (served, translated, recorded).
 *
 * Per side: the script's CPU per call (`process.cpuUsage` around the gather, divided by its
 * calls), what it adds to `direct`'s, and for the endpoint sides the load process's own CPU per
 * call (the client work `direct` does in the script). The sides run in a rotating order in each
 * round (so a change of the machine's load hits all of them), with a full collection before each;
 * the median over rounds is reported with the spread. The target is at most 150 µs of added CPU
 * per call on Node 24 (`scripts/node24.sh`; see docs/performance.md).
 *
 * Run: `npx tsx bench/endpoint.ts` (`--rounds N`, default 7), and on Node 24:
 * `PATH="$(scripts/node24.sh)/bin:$PATH" npx tsx bench/endpoint.ts`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import Anthropic from '@anthropic-ai/sdk';
import { gatherTrajectoryGroups, PromptedModel } from 'policyloop';

const ROLLOUTS = 256;
const CALLS_PER_ROLLOUT = 8;
const CONCURRENCY = 16;
const LATENCY_MS = 5;
function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}
const ROUNDS = Number(flag('--rounds') ?? 7);
const ROOT = path.resolve(import.meta.dirname, '..');

v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc') as () => void;

/** The upstream chat endpoint: one fixed completion (8 tokens with logprobs), JSON or SSE, after 5 ms. */
const UPSTREAM_SOURCE = `
import http from 'node:http';
const tokens = ['The', ' answer', ' is', ' four', ',', ' I', ' think', '.'];
const logprobs = tokens.map((token) => ({ token, logprob: -0.5, bytes: [...Buffer.from(token)], top_logprobs: [] }));
const usage = { prompt_tokens: 12, completion_tokens: tokens.length, total_tokens: 12 + tokens.length };
const base = { id: 'chatcmpl-bench', created: 0, model: 'bench' };
const json = JSON.stringify({ ...base, object: 'chat.completion', usage, choices: [{ index: 0, finish_reason: 'stop',
  message: { role: 'assistant', content: tokens.join(''), refusal: null }, logprobs: { content: logprobs, refusal: null } }] });
const chunk = (choices, extra = {}) => 'data: ' + JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra }) + '\\n\\n';
const sse = chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])
  + tokens.map((token, index) => chunk([{ index: 0, delta: { content: token }, logprobs: { content: [logprobs[index]] }, finish_reason: null }])).join('')
  + chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]) + chunk([], { usage }) + 'data: [DONE]\\n\\n';
const server = http.createServer((request, response) => {
  let body = '';
  request.on('data', (part) => { body += part; });
  request.on('end', () => setTimeout(() => {
    const streamed = body.includes('"stream":true');
    const text = streamed ? sse : json;
    response.writeHead(200, { 'content-type': streamed ? 'text/event-stream' : 'application/json', 'content-length': Buffer.byteLength(text) });
    response.end(text);
  }, ${LATENCY_MS}));
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;

/** The load process: an `openai` client per job, making a rollout's calls to its endpoint; reports its CPU. */
const LOAD_SOURCE = `
import OpenAI from 'openai';
process.on('message', async (job) => {
  if (job.cpu) { const { user, system } = process.cpuUsage(); process.send({ cpu: user + system }); return; }
  const client = new OpenAI({ baseURL: job.baseURL, apiKey: job.apiKey, maxRetries: 0 });
  for (let call = 0; call < job.calls; call += 1) {
    if (job.api === 'chat') {
      const completion = await client.chat.completions.create({ model: 'gpt-4o', messages: [
        { role: 'system', content: 'You answer arithmetic questions.' }, { role: 'user', content: job.question }], max_tokens: 16 });
      if (completion.choices.length === 0) throw new Error('no choice');
    } else {
      const response = await client.responses.create({ model: 'gpt-4o', instructions: 'You answer arithmetic questions.',
        input: job.question, max_output_tokens: 16 });
      if (response.output.length === 0) throw new Error('no output');
    }
  }
  process.send({ id: job.id });
});
`;

async function startUpstream(): Promise<{ child: ChildProcess; baseURL: string }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', UPSTREAM_SOURCE], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [chunk] = (await once(child.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
  return { child, baseURL: `http://127.0.0.1:${chunk.toString().trim()}/v1` };
}

/** The load process, and how to run a job on it or read its CPU (µs). */
function startLoad() {
  const child = spawn(process.execPath, ['--input-type=module', '-e', LOAD_SOURCE], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let next = 0;
  const waiting = new Map<number, () => void>();
  let cpuWaiter: ((micros: number) => void) | undefined;
  child.on('message', (message: { id?: number; cpu?: number }) => {
    if (message.cpu !== undefined) cpuWaiter?.(message.cpu);
    else if (message.id !== undefined) waiting.get(message.id)?.();
  });
  return {
    child,
    run(job: { baseURL: string; apiKey: string; api: 'chat' | 'responses'; question: string }): Promise<void> {
      const id = next;
      next += 1;
      return new Promise<void>((resolve) => {
        waiting.set(id, () => {
          waiting.delete(id);
          resolve();
        });
        child.send({ ...job, id, calls: CALLS_PER_ROLLOUT });
      });
    },
    cpu(): Promise<number> {
      return new Promise<number>((resolve) => {
        cpuWaiter = resolve;
        child.send({ cpu: true });
      });
    },
  };
}

const ALL_SIDES = [
  'direct',
  'direct stream',
  'responses',
  'responses stream',
  'fetch chat stream',
  'fetch responses stream',
  'messages',
  'endpoint chat',
  'endpoint responses',
] as const;
type SideName = (typeof ALL_SIDES)[number];
/** `--only "endpoint chat"` runs one side (and `direct`), to profile it (`node --import tsx --cpu-prof bench/endpoint.ts`). */
const ONLY = flag('--only') as SideName | undefined;
if (ONLY !== undefined && !ALL_SIDES.includes(ONLY))
  throw new Error(`Expected --only to be one of ${ALL_SIDES.join(', ')}, got ${ONLY}`);
const SIDES: readonly SideName[] = ONLY === undefined ? ALL_SIDES : ['direct', ONLY];

const upstream = await startUpstream();
const load = startLoad();
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'policyloop-bench-endpoint-'));
const model = new PromptedModel({
  project: 'bench',
  name: 'endpoint',
  model: 'bench',
  baseURL: upstream.baseURL,
  apiKey: 'k',
  dataDir,
});
const client = model.openai();
const rawFetch = model.fetch();
const anthropic = new Anthropic({ baseURL: model.anthropicBaseURL, apiKey: 'k', fetch: model.fetch(), maxRetries: 0 });
const scenarios = Array.from({ length: ROLLOUTS }, (_, index) => `What is ${index} + ${index}?`);
const SYSTEM = 'You answer arithmetic questions.';

/** One rollout's calls on `side`. */
async function calls(side: SideName, question: string, endpoint: () => { openaiBaseURL: string; apiKey: string }) {
  for (let call = 0; call < CALLS_PER_ROLLOUT; call += 1) {
    if (side === 'direct') {
      await client.chat.completions.create({
        model: 'bench',
        messages: [
          { role: 'system', content: SYSTEM },
          { role: 'user', content: question },
        ],
        max_tokens: 16,
      });
    } else if (side === 'direct stream') {
      const stream = await client.chat.completions.create({
        model: 'bench',
        messages: [
          { role: 'system', content: SYSTEM },
          { role: 'user', content: question },
        ],
        max_tokens: 16,
        stream: true,
        stream_options: { include_usage: true },
      });
      for await (const _chunk of stream) {
        // read to the end
      }
    } else if (side === 'responses') {
      await client.responses.create({ model: 'bench', instructions: SYSTEM, input: question, max_output_tokens: 16 });
    } else if (side === 'responses stream') {
      const stream = await client.responses.create({
        model: 'bench',
        instructions: SYSTEM,
        input: question,
        max_output_tokens: 16,
        stream: true,
      });
      for await (const _event of stream) {
        // read to the end
      }
    } else if (side === 'fetch chat stream' || side === 'fetch responses stream') {
      const chat = side === 'fetch chat stream';
      const body = chat
        ? {
            model: 'bench',
            messages: [
              { role: 'system', content: SYSTEM },
              { role: 'user', content: question },
            ],
            max_tokens: 16,
            stream: true,
            stream_options: { include_usage: true },
          }
        : { model: 'bench', instructions: SYSTEM, input: question, max_output_tokens: 16, stream: true };
      const response = await rawFetch(`${upstream.baseURL}/${chat ? 'chat/completions' : 'responses'}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer k' },
        body: JSON.stringify(body),
      });
      await response.text();
    } else if (side === 'messages') {
      await anthropic.messages.create({
        model: 'bench',
        system: SYSTEM,
        max_tokens: 16,
        messages: [{ role: 'user', content: question }],
      });
    } else {
      const { openaiBaseURL, apiKey } = endpoint();
      await load.run({
        baseURL: openaiBaseURL,
        apiKey,
        api: side === 'endpoint chat' ? 'chat' : 'responses',
        question,
      });
      return; // the load process made all of the rollout's calls
    }
  }
}

interface Measured {
  /** The script's CPU per call, µs. */
  readonly script: number;
  /** The load process's CPU per call, µs (endpoint sides). */
  readonly load: number;
}

async function measure(side: SideName): Promise<Measured> {
  collect();
  const loadBefore = side.startsWith('endpoint') ? await load.cpu() : 0;
  const before = process.cpuUsage();
  const groups = await gatherTrajectoryGroups(
    scenarios,
    async (question, context) => {
      await calls(side, question, () => context.endpoint);
    },
    { concurrency: CONCURRENCY, model },
  );
  const used = process.cpuUsage(before);
  const loadAfter = side.startsWith('endpoint') ? await load.cpu() : 0;
  const recorded = groups.flatMap((group) => group.trajectories).length;
  if (recorded !== ROLLOUTS) throw new Error(`Expected ${ROLLOUTS} trajectories, got ${recorded}`);
  const total = ROLLOUTS * CALLS_PER_ROLLOUT;
  return { script: (used.user + used.system) / total, load: (loadAfter - loadBefore) / total };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}
const micros = (value: number): string => `${value.toFixed(0)} µs`;

try {
  // A warm-up round (JIT, connections), not counted.
  for (const side of SIDES) await measure(side);
  const results = new Map<SideName, Measured[]>(SIDES.map((side) => [side, []]));
  for (let round = 0; round < ROUNDS; round += 1) {
    const order = SIDES.map((_, index) => SIDES[(index + round) % SIDES.length] as SideName);
    const row: string[] = [];
    const measured = new Map<SideName, Measured>();
    for (const side of order) measured.set(side, await measure(side));
    for (const side of SIDES) {
      const value = measured.get(side) as Measured;
      results.get(side)?.push(value);
      row.push(`${side} ${micros(value.script)}`);
    }
    console.log(`round ${round + 1}: ${row.join(', ')}`);
  }
  const direct = median((results.get('direct') ?? []).map((value) => value.script));
  console.log(
    `\n${process.version}, ${os.cpus().length} cores, load average ${os.loadavg()[0]?.toFixed(1)}; ${ROLLOUTS} rollouts x ${CALLS_PER_ROLLOUT} calls, ${CONCURRENCY} at once, median of ${ROUNDS} rounds`,
  );
  console.log(
    'side                    script CPU/call   added vs direct (middle half)                    load process CPU/call',
  );
  const summary: string[] = [];
  for (const side of SIDES) {
    const values = results.get(side) ?? [];
    const scripts = values.map((value) => value.script);
    const baseline =
      side === 'responses stream' && results.has('direct stream')
        ? 'direct stream'
        : side === 'fetch responses stream' && results.has('fetch chat stream')
          ? 'fetch chat stream'
          : 'direct';
    const added = scripts.map((value, index) => value - ((results.get(baseline) ?? [])[index]?.script ?? direct));
    const sortedAdded = [...added].sort((a, b) => a - b);
    const low = sortedAdded[Math.floor(sortedAdded.length / 4)] ?? 0;
    const high = sortedAdded[Math.ceil((sortedAdded.length * 3) / 4) - 1] ?? 0;
    const loadCPU = side.startsWith('endpoint') ? micros(median(values.map((value) => value.load))) : '-';
    // `direct` and the raw chat stream are baselines: nothing to add to.
    const isBaseline = side === 'direct' || side === 'fetch chat stream';
    const addedText = isBaseline
      ? '-'
      : `${micros(median(added))} (${micros(low)} .. ${micros(high)})${baseline === 'direct' ? '' : ` vs ${baseline}`}`;
    console.log(`${side.padEnd(23)} ${micros(median(scripts)).padStart(12)}   ${addedText.padEnd(47)}  ${loadCPU}`);
    const sign = median(added) >= 0 ? '+' : '';
    summary.push(`${side}=${median(scripts).toFixed(0)}${isBaseline ? '' : `(${sign}${median(added).toFixed(0)})`}`);
  }
  console.log(`summary: ${process.version} load ${os.loadavg()[0]?.toFixed(1)} µs/call ${summary.join(' ')}`);
} finally {
  upstream.child.kill();
  load.child.kill();
  await rm(dataDir, { recursive: true, force: true });
}
