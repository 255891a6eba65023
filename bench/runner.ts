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
 * Run: `npx tsx bench/runner.ts`. Each round runs the three sides one after the other, in a
 * rotating order (interleaved, so that a change of the machine's load hits all of them), and
 * compares them within the round; the figures of every round are printed, then the median and the
 * spread (the middle half and the whole range) over the rounds. Last, the bare and runner sides
 * run without sockets in many short interleaved rounds, which takes the HTTP stack's
 * load-dependent noise out: against an in-process stand-in for the client (policyloop's own CPU
 * per rollout), and through the real `openai` client over an in-process `fetch` (policyloop's CPU
 * together with what it makes the SDK do: the signal, the transformed promise, the scope).
 *
 * At 256 in flight and 50 ms the endpoint allows 5,120 rollouts/s, more than one Node thread can
 * send through the `openai` client, so the client side is CPU-bound: the throughput ratio is then
 * the ratio of CPU per rollout (bare / runner), and 0.95 means at most ~5 % extra CPU (about 25 µs
 * at the bare client's ~500 µs per request). The bench prints how busy the bare side kept the main
 * thread and the CPU ratio next to the throughput ratio, so that this can be checked on any
 * machine. The last two lines (`summary:`) hold everything the docs table needs.
 * `--rounds N` changes the count (default 11), `--in-process-rounds N` the last parts' (30);
 * `--only runner` runs one side alone, to profile it
 * (`node --import tsx --cpu-prof bench/runner.ts --only runner`).
 *
 * `--parts` instead splits the runner's extra CPU into its parts, each against the bare client in
 * the same round: the bare client sending its next requests once per event-loop turn as the
 * runner's workers do (how much of the runner's gain is that scheduling, which any loop could
 * have), the bare client with a signal on every request (what capture passes), the gather
 * with the bare client in its rollouts (its bookkeeping: attempts, scope, timer, trajectory,
 * events; nothing captured), the gather with a captured client (what capture and recording add),
 * then the runner as above (reward, stamps, a listener). Each part runs over HTTP (`--rounds`) and
 * through the SDK over an in-process fetch (`--in-process-rounds`, where the HTTP stack's noise is
 * out). What 0.95 allows is printed beside them: 1/0.95 - 1 of the bare client's CPU per request
 * over HTTP.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { AsyncLocalStorage } from 'node:async_hooks';
import os from 'node:os';
import v8 from 'node:v8';
import vm from 'node:vm';
import { PerformanceObserver } from 'node:perf_hooks';
import OpenAI from 'openai';
import { captureCompletions, gatherTrajectoryGroups } from 'policyloop';
import { GatherEmitter } from 'policyloop/training';

const ROLLOUTS = 2_000;
const CONCURRENCY = 256;
const GROUP_SIZE = 8;
const LATENCY_MS = 50;
function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}
const ROUNDS = Number(flag('--rounds') ?? 11);
const SIDE_NAMES = ['bare', 'bareInContext', 'runner'] as const;
type SideName = (typeof SIDE_NAMES)[number];
/** `--only runner` (or `bare`, `bareInContext`) runs one side alone, for a profiler. */
const ONLY = flag('--only') as SideName | undefined;
/** `--parts` splits the runner's extra CPU into its parts (see the file's docs). */
const PARTS = process.argv.includes('--parts');
if (ONLY !== undefined && !SIDE_NAMES.includes(ONLY)) {
  throw new Error(`Expected --only to be one of ${SIDE_NAMES.join(', ')}, got ${ONLY}`);
}
/**
 * A full collection before each side, outside its measurement, so that no side pays for the
 * garbage of the side before it (the runner keeps its 2,000 trajectories until the gather ends).
 */
v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc') as () => void;

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
  /** Garbage-collection pauses on the main thread during the side, in µs. */
  readonly gcMicros: number;
}

/** The main thread's garbage-collection pauses so far, in µs (a `gc` performance observer). */
let gcPauseMicros = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcPauseMicros += entry.duration * 1000;
}).observe({ entryTypes: ['gc'] });

/** How a bare side sends its requests (the parts of `--parts`). */
interface BareMode {
  /** Each request gets an `AbortController`'s signal, as capture passes a rollout's. */
  readonly signal?: boolean;
  /**
   * A worker starts its next request on the event loop's next turn, together with the others
   * freed in this turn (`setImmediate`), as the runner's workers do: how much of the runner's
   * scheduling any client loop could have.
   */
  readonly batched?: boolean;
}

/** The same requests through the bare client, 256 in flight, as `mode` says (plain by default). */
async function bareRequests(client: OpenAI, mode: BareMode = {}): Promise<void> {
  let next = 0;
  let turn: Promise<void> | undefined;
  const nextTurn = (): Promise<void> =>
    (turn ??= new Promise<void>((resolve) =>
      setImmediate(() => {
        turn = undefined;
        resolve();
      }),
    ));
  const worker = async (): Promise<void> => {
    for (;;) {
      const index = next;
      next += 1;
      if (index >= ROLLOUTS) return;
      const scenario = scenarios[Math.floor(index / GROUP_SIZE)] as Scenario;
      const options = mode.signal === true ? { signal: new AbortController().signal } : undefined;
      const completion = await client.chat.completions.create(request(scenario), options);
      if (completion.choices.length === 0) throw new Error('no choice');
      if (mode.batched === true && next < ROLLOUTS) await nextTurn();
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/** The same requests through the bare client, 256 in flight. */
const bare = (client: OpenAI): Promise<void> => bareRequests(client);

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
      sampledStep: () => 0,
      events,
    },
  );
  if (ended !== ROLLOUTS || groups.length !== scenarios.length) throw new Error('rollouts missing');
}

/**
 * The gather alone, no reward, stamps or listener (parts of `--parts`): with `capture`, through a
 * captured client (every completion recorded); without, with the bare client in its rollouts
 * (the gather's bookkeeping, nothing captured).
 */
async function gatherOnly(client: OpenAI, capture: boolean): Promise<void> {
  const inRollout = capture ? captureCompletions(client, { defaults: { logprobs: true } }) : client;
  const groups = await gatherTrajectoryGroups(
    scenarios,
    async (scenario) => {
      await inRollout.chat.completions.create(request(scenario));
    },
    { groupSize: GROUP_SIZE, concurrency: CONCURRENCY },
  );
  if (groups.length !== scenarios.length) throw new Error('groups missing');
}

/** The endpoint's completion, parsed afresh for every request (as the HTTP client does). */
const COMPLETION_TEXT = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 0,
  model: 'bench',
  choices: [
    {
      index: 0,
      finish_reason: 'stop',
      message: { role: 'assistant', content: 'The answer is four, I think.', refusal: null },
      logprobs: {
        content: ['The', ' answer', ' is', ' four', ',', ' I', ' think', '.'].map((token) => ({
          token,
          logprob: -0.5,
          bytes: [...Buffer.from(token)],
          top_logprobs: [],
        })),
        refusal: null,
      },
    },
  ],
  usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 },
});

/**
 * An in-process stand-in for the client: answers on the next turn of the event loop with a freshly
 * parsed completion. Without HTTP (hundreds of µs per request whose cost swings with the machine's
 * load), the runner's own CPU per rollout shows plainly.
 */
const inProcessClient = {
  chat: {
    completions: {
      create: (_body: unknown, _options?: unknown): Promise<unknown> =>
        new Promise((resolve) => setImmediate(() => resolve(JSON.parse(COMPLETION_TEXT)))),
    },
  },
} as unknown as OpenAI;

/**
 * The real `openai` client over an in-process `fetch` that answers on the next turn of the event
 * loop: everything the SDK does per request (and what capture makes it do) without sockets.
 */
const sdkInProcessClient = new OpenAI({
  baseURL: 'http://in-process.invalid/v1',
  apiKey: 'bench',
  maxRetries: 0,
  fetch: (async () => {
    await new Promise((resolve) => setImmediate(resolve));
    return new Response(COMPLETION_TEXT, { headers: { 'content-type': 'application/json' } });
  }) as typeof fetch,
});

async function measure(run: () => Promise<void>): Promise<Side> {
  collect();
  // Observer entries arrive asynchronously: let the ones of earlier work land first.
  await new Promise((resolve) => setImmediate(resolve));
  const gcBefore = gcPauseMicros;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await run();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  await new Promise((resolve) => setImmediate(resolve));
  return { seconds, cpuMicros: used.user + used.system, gcMicros: gcPauseMicros - gcBefore };
}

/** The median of `values`. */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  return sorted.length % 2 === 1
    ? (sorted[Math.floor(middle)] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** The value below which `fraction` of `values` lie (linear between neighbours). */
function quantile(values: readonly number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (sorted.length - 1) * fraction;
  const low = sorted[Math.floor(at)] as number;
  const high = sorted[Math.ceil(at)] as number;
  return low + (high - low) * (at - Math.floor(at));
}

/** `median (middle half low..high; all low..high)`. */
function summary(values: readonly number[], digits: number): string {
  const fixed = (value: number): string => value.toFixed(digits);
  return `median ${fixed(median(values))} (middle half ${fixed(quantile(values, 0.25))}..${fixed(quantile(values, 0.75))}; all ${fixed(Math.min(...values))}..${fixed(Math.max(...values))})`;
}

/** Rounds of the socket-free parts (`--in-process-rounds`). */
const IN_PROCESS_ROUNDS = Number(flag('--in-process-rounds') ?? 30);

/** The parts of `--parts`, in the order they add up to the runner; each is compared with `bare`. */
const PART_SIDES = {
  bare,
  'the bare client, its next requests sent once per turn as the runner does': (client: OpenAI) =>
    bareRequests(client, { batched: true }),
  'a signal on every request (bare client)': (client: OpenAI) => bareRequests(client, { signal: true }),
  'the gather, nothing captured (bookkeeping)': (client: OpenAI) => gatherOnly(client, false),
  'the gather with a captured client': (client: OpenAI) => gatherOnly(client, true),
  'the runner (capture, reward, stamps, a listener)': runner,
} as const;

/**
 * `--parts`: each part against the bare client through `client`, `rounds` rounds in a rotating
 * order; prints each part's extra CPU per rollout and what 0.95 allows (over HTTP).
 */
async function partsOf(client: OpenAI, label: string, rounds: number): Promise<void> {
  const names = Object.keys(PART_SIDES) as Array<keyof typeof PART_SIDES>;
  for (const name of names) await PART_SIDES[name](client);
  const extras = new Map(names.map((name) => [name, [] as number[]]));
  const bareCosts: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const order = names.map((_, position) => names[(position + round) % names.length] as keyof typeof PART_SIDES);
    const cpu = new Map<string, number>();
    for (const name of order) cpu.set(name, (await measure(() => PART_SIDES[name](client))).cpuMicros / ROLLOUTS);
    const bareCost = cpu.get('bare') as number;
    bareCosts.push(bareCost);
    for (const name of names) extras.get(name)?.push((cpu.get(name) as number) - bareCost);
  }
  const range = (values: readonly number[]): string =>
    `${median(values).toFixed(1)} (${quantile(values, 0.25).toFixed(1)}..${quantile(values, 0.75).toFixed(1)})`;
  console.log(
    `parts ${label}, ${rounds} rounds, extra CPU per rollout over the bare client, µs, median (middle half):`,
  );
  for (const name of names.slice(1)) console.log(`  ${name}: ${range(extras.get(name) as number[])}`);
  const bareCost = median(bareCosts);
  console.log(
    `  the bare client's CPU per request: ${bareCost.toFixed(0)} µs${label === 'over HTTP' ? `; 0.95 of its throughput allows ${(bareCost * (1 / 0.95 - 1)).toFixed(0)} µs of extra CPU` : ''}`,
  );
  console.log(
    `summary: Node ${process.versions.node}, parts ${label}: ${names
      .slice(1)
      .map((name) => `${name.split(' (')[0]} ${range(extras.get(name) as number[])}`)
      .join('; ')} µs`,
  );
}

const loadAverage = (): string =>
  os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ');

const { child, baseURL } = await startServer();
const loadAtStart = loadAverage();
try {
  const client = new OpenAI({ baseURL, apiKey: 'bench', maxRetries: 0 });
  const sides: Record<SideName, (client: OpenAI) => Promise<void>> = { bare, bareInContext, runner };
  console.log(
    `# rollout runner vs bare openai client: ${ROLLOUTS} rollouts, concurrency ${CONCURRENCY}, endpoint answers after ${LATENCY_MS} ms (separate process)`,
  );
  console.log(`runtime: Node ${process.versions.node} (V8 ${process.versions.v8})`);
  console.log(
    `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${os.platform()} ${os.release()}, load average ${loadAverage()}`,
  );
  console.log(
    `${ROUNDS} rounds, sides interleaved in a rotating order, a full GC before each side (outside its measurement)`,
  );
  // Warm-up: connections, JIT.
  for (const name of SIDE_NAMES) if (ONLY === undefined || name === ONLY) await sides[name](client);
  if (PARTS) {
    await partsOf(client, 'over HTTP', ROUNDS);
    await partsOf(sdkInProcessClient, 'through the SDK over an in-process fetch', IN_PROCESS_ROUNDS);
  } else if (ONLY !== undefined) {
    const measured = await measure(async () => {
      for (let round = 0; round < ROUNDS; round += 1) await sides[ONLY](client);
    });
    console.log(
      `${ONLY} alone, ${ROUNDS} rounds: ${((ROLLOUTS * ROUNDS) / measured.seconds).toFixed(0)} rollouts/s, ${(measured.cpuMicros / (ROLLOUTS * ROUNDS)).toFixed(0)} µs CPU each (GC pauses ${(measured.gcMicros / (ROLLOUTS * ROUNDS)).toFixed(0)} µs)`,
    );
  } else {
    const ratios: number[] = [];
    const extras: number[] = [];
    const contextCosts: number[] = [];
    const ownCosts: number[] = [];
    const bareCosts: number[] = [];
    const gcExtras: number[] = [];
    const cpuRatios: number[] = [];
    const bareBusy: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      // Each round runs the three sides in another order, so that none always runs first.
      const order = SIDE_NAMES.map((_, position) => SIDE_NAMES[(position + round) % SIDE_NAMES.length] as SideName);
      const measured: Partial<Record<SideName, Side>> = {};
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
      bareCosts.push(bareSide.cpuMicros / ROLLOUTS);
      // CPU-bound, the throughput ratio is this one; the busy share says whether it is.
      cpuRatios.push(bareSide.cpuMicros / runnerSide.cpuMicros);
      bareBusy.push(bareSide.cpuMicros / (bareSide.seconds * 1e6));
      const gcExtra = (runnerSide.gcMicros - bareSide.gcMicros) / ROLLOUTS;
      gcExtras.push(gcExtra);
      const perRollout = (side: Side): string =>
        `${(ROLLOUTS / side.seconds).toFixed(0)} rollouts/s (${(side.cpuMicros / ROLLOUTS).toFixed(0)} µs CPU each)`;
      console.log(
        `round ${round + 1}: bare ${perRollout(bareSide)}, bare in async context ${perRollout(contextSide)}, runner ${perRollout(runnerSide)}: runner/bare throughput ${ratio.toFixed(2)}, extra CPU ${extra.toFixed(0)} µs per rollout (async context ${contextCost.toFixed(0)}, policyloop ${(extra - contextCost).toFixed(0)}; GC pauses ${gcExtra.toFixed(0)}), load ${loadAverage()}`,
      );
    }
    console.log(`Node ${process.versions.node}, ${ROUNDS} rounds:`);
    console.log(`runner/bare throughput: ${summary(ratios, 2)} (target >= 0.95)`);
    console.log(`extra CPU per rollout, µs: ${summary(extras, 0)} (target <= 50)`);
    console.log(`  of which Node's async-context tracking: ${summary(contextCosts, 0)}`);
    console.log(`  of which policyloop's own work: ${summary(ownCosts, 0)}`);
    console.log(`  of which more GC pauses on the main thread: ${summary(gcExtras, 0)}`);
    console.log(`bare client CPU per rollout, µs: ${summary(bareCosts, 0)}`);
    console.log(
      `bare side's CPU time per second of its run (1.00 = one core busy; near 1, the bench is CPU-bound): ${summary(bareBusy, 2)}`,
    );
    console.log(`bare/runner CPU per rollout (the throughput ratio when CPU-bound): ${summary(cpuRatios, 2)}`);
    // The same two sides without sockets, many short rounds, interleaved: against the in-process
    // stand-in (policyloop's own work), then through the SDK over an in-process fetch.
    const ownRounds = IN_PROCESS_ROUNDS;
    const withoutSockets = async (client: OpenAI): Promise<number[]> => {
      const extra: number[] = [];
      for (let round = 0; round < ownRounds; round += 1) {
        const first = round % 2 === 0 ? bare : runner;
        const second = first === bare ? runner : bare;
        const a = await measure(() => first(client));
        const b = await measure(() => second(client));
        const [bareSide, runnerSide] = first === bare ? [a, b] : [b, a];
        extra.push((runnerSide.cpuMicros - bareSide.cpuMicros) / ROLLOUTS);
      }
      return extra;
    };
    const inProcess = await withoutSockets(inProcessClient);
    console.log(
      `policyloop's own CPU per rollout without HTTP (an in-process client, ${ownRounds} interleaved rounds), µs: ${summary(inProcess, 1)}`,
    );
    await bare(sdkInProcessClient);
    await runner(sdkInProcessClient);
    const throughSdk = await withoutSockets(sdkInProcessClient);
    console.log(
      `extra CPU per rollout through the openai client over an in-process fetch (no sockets, ${ownRounds} interleaved rounds), µs: ${summary(throughSdk, 1)}`,
    );
    const range = (values: readonly number[], digits: number): string =>
      `${median(values).toFixed(digits)} (${quantile(values, 0.25).toFixed(digits)}..${quantile(values, 0.75).toFixed(digits)})`;
    console.log(
      `summary: Node ${process.versions.node}, load average ${loadAtStart} at start, ${loadAverage()} at end, ${ROUNDS} rounds; runner/bare throughput ${range(ratios, 2)} (target >= 0.95); extra CPU ${range(extras, 0)} µs per rollout (target <= 50)`,
    );
    console.log(
      `summary: Node ${process.versions.node}: bare CPU ${range(bareCosts, 0)} µs per rollout, main thread busy ${range(bareBusy, 2)}, bare/runner CPU ${range(cpuRatios, 2)}; async context ${range(contextCosts, 0)} µs; without sockets: policyloop ${range(inProcess, 1)} µs, through the SDK ${range(throughSdk, 1)} µs`,
    );
  }
  console.log(`load average after: ${loadAverage()}`);
} finally {
  child.kill();
}
