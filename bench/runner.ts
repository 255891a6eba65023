/**
 * The rollout runner against a bare `openai` client: 2,000 rollouts at concurrency 256 against a
 * loopback chat endpoint that answers after 50 ms (a separate process), and the same requests
 * through the bare client in the same run. Prints runner/bare throughput and the extra CPU per
 * rollout (`process.cpuUsage` around each side, subtracted).
 *
 * A third side, the bare client with Node's async-context tracking on, splits the extra CPU into
 * what `AsyncLocalStorage` costs on Node 20 (a hook on every promise, which the runner needs to
 * know which rollout a completion belongs to) and policyloop's own work.
 *
 * Run: `npx tsx bench/runner.ts`. Each round runs the three sides in a rotating order; the
 * figures of every round are printed, then their range. Pass `--rounds N` to change the count.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { AsyncLocalStorage } from 'node:async_hooks';
import os from 'node:os';
import OpenAI from 'openai';
import { captureCompletions, gatherTrajectoryGroups, GatherEmitter } from 'policyloop';

const ROLLOUTS = 2_000;
const CONCURRENCY = 256;
const GROUP_SIZE = 8;
const LATENCY_MS = 50;
const roundsFlag = process.argv.indexOf('--rounds');
const ROUNDS = roundsFlag > 0 ? Number(process.argv[roundsFlag + 1]) : 3;

/** The chat endpoint: answers every POST with one fixed completion (8 tokens with logprobs) after 50 ms. */
const SERVER_SOURCE = `
import http from 'node:http';
const tokens = ['The', ' answer', ' is', ' four', ',', ' I', ' think', '.'];
const body = JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 0, model: 'bench',
  choices: [{ index: 0, finish_reason: 'stop',
    message: { role: 'assistant', content: tokens.join(''), refusal: null },
    logprobs: { content: tokens.map((token) => ({ token, logprob: -0.5, bytes: [...Buffer.from(token)], top_logprobs: [] })), refusal: null } }],
  usage: { prompt_tokens: 12, completion_tokens: tokens.length, total_tokens: 12 + tokens.length },
});
const server = http.createServer((request, response) => {
  request.resume();
  request.on('end', () => setTimeout(() => {
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    response.end(body);
  }, ${LATENCY_MS}));
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;

async function startServer(): Promise<{ child: ChildProcess; baseURL: string }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', SERVER_SOURCE], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [chunk] = (await once(child.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
  return { child, baseURL: `http://127.0.0.1:${chunk.toString().trim()}/v1` };
}

interface Scenario {
  readonly question: string;
}

const scenarios: Scenario[] = Array.from({ length: ROLLOUTS / GROUP_SIZE }, (_, index) => ({
  question: `What is ${index} + ${index}?`,
}));

function request(scenario: Scenario) {
  return {
    model: 'bench',
    messages: [
      { role: 'system' as const, content: 'You answer arithmetic questions.' },
      { role: 'user' as const, content: scenario.question },
    ],
    logprobs: true,
    max_tokens: 16,
  };
}

interface Side {
  readonly seconds: number;
  readonly cpuMicros: number;
}

async function measure(run: () => Promise<void>): Promise<Side> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await run();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { seconds, cpuMicros: used.user + used.system };
}

/** The same requests through the bare client, 256 in flight. */
async function bare(client: OpenAI): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const index = next;
      next += 1;
      if (index >= ROLLOUTS) return;
      const scenario = scenarios[Math.floor(index / GROUP_SIZE)] as Scenario;
      const completion = await client.chat.completions.create(request(scenario));
      if (completion.choices.length === 0) throw new Error('no choice');
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/**
 * The bare client with Node's async-context tracking on, as it is while rollouts run: every
 * promise the HTTP stack creates then goes through `AsyncLocalStorage`'s hooks (Node 20 has no
 * other way to follow a rollout through its awaits). The runner minus this side is policyloop's
 * own work.
 */
async function bareInContext(client: OpenAI): Promise<void> {
  const storage = new AsyncLocalStorage<object>();
  try {
    await storage.run({}, () => bare(client));
  } finally {
    storage.disable();
  }
}

/** The runner: capture, reward, policy-version stamps and events, as a training loop uses them. */
async function runner(client: OpenAI): Promise<void> {
  const captured = captureCompletions(client, { defaults: { logprobs: true } });
  const events = new GatherEmitter<Scenario>();
  let ended = 0;
  events.on('rollout:end', () => {
    ended += 1;
  });
  const groups = await gatherTrajectoryGroups(
    scenarios,
    async (scenario) => {
      await captured.chat.completions.create(request(scenario));
    },
    {
      groupSize: GROUP_SIZE,
      concurrency: CONCURRENCY,
      reward: (trajectory) => (trajectory.messages_and_choices.length === 3 ? 1 : 0),
      policyVersion: () => 0,
      events,
    },
  );
  if (ended !== ROLLOUTS || groups.length !== scenarios.length) throw new Error('rollouts missing');
}

const { child, baseURL } = await startServer();
try {
  const client = new OpenAI({ baseURL, apiKey: 'bench', maxRetries: 0 });
  console.log(
    `# rollout runner vs bare openai client: ${ROLLOUTS} rollouts, concurrency ${CONCURRENCY}, endpoint answers after ${LATENCY_MS} ms (separate process)`,
  );
  console.log(
    `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${os.platform()} ${os.release()}, load average ${os
      .loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}`,
  );
  // Warm-up: connections, JIT.
  await bare(client);
  await bareInContext(client);
  await runner(client);
  const ratios: number[] = [];
  const extras: number[] = [];
  const contextCosts: number[] = [];
  const ownCosts: number[] = [];
  const sides = { bare, bareInContext, runner };
  for (let round = 0; round < ROUNDS; round += 1) {
    // Each round runs the three sides in another order, so that none always runs first.
    const order = (['bare', 'bareInContext', 'runner'] as const).map(
      (_, position, names) => names[(position + round) % names.length] as keyof typeof sides,
    );
    const measured: Partial<Record<keyof typeof sides, Side>> = {};
    for (const name of order) measured[name] = await measure(() => sides[name](client));
    const bareSide = measured.bare as Side;
    const contextSide = measured.bareInContext as Side;
    const runnerSide = measured.runner as Side;
    const ratio = bareSide.seconds / runnerSide.seconds;
    const extra = (runnerSide.cpuMicros - bareSide.cpuMicros) / ROLLOUTS;
    const contextCost = (contextSide.cpuMicros - bareSide.cpuMicros) / ROLLOUTS;
    ratios.push(ratio);
    extras.push(extra);
    contextCosts.push(contextCost);
    ownCosts.push(extra - contextCost);
    const perRollout = (side: Side): string =>
      `${(ROLLOUTS / side.seconds).toFixed(0)} rollouts/s (${(side.cpuMicros / ROLLOUTS).toFixed(0)} µs CPU each)`;
    console.log(
      `round ${round + 1}: bare ${perRollout(bareSide)}, bare in async context ${perRollout(contextSide)}, runner ${perRollout(runnerSide)}: runner/bare throughput ${ratio.toFixed(2)}, extra CPU ${extra.toFixed(0)} µs per rollout (async context ${contextCost.toFixed(0)}, policyloop ${(extra - contextCost).toFixed(0)})`,
    );
  }
  const range = (values: number[], digits: number): string =>
    `${Math.min(...values).toFixed(digits)}..${Math.max(...values).toFixed(digits)}`;
  console.log(`runner/bare throughput: ${range(ratios, 2)} (target >= 0.95)`);
  console.log(`extra CPU per rollout: ${range(extras, 0)} µs (target <= 50)`);
  console.log(`  of which Node's async-context tracking: ${range(contextCosts, 0)} µs`);
  console.log(`  of which policyloop's own work: ${range(ownCosts, 0)} µs`);
  console.log(
    `load average after: ${os
      .loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}`,
  );
} finally {
  child.kill();
}
