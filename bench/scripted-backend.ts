/**
 * What an `RLTrainer` step costs on `ScriptedBackend` (policyloop/testing), against the same run on
 * the local engine's smallest model measured in the same process: 10 steps of 4 groups x 4
 * rollouts, median of 5 runs each, wall time and this process's CPU time per step, and the cold
 * start (the backend started, a model registered and a first run: the engine's load included). Rows:
 * - scripted, in-process: the default (the service's handler called through the connection's `fetch`);
 * - scripted, loopback: `listen: true` (the same service on a loopback port);
 * - scripted, pollInterval 1: the default with `job.pollInterval: 1`, which shows the share of
 *   the job follower's wait between event polls (up to 50 ms after each page of events);
 * - local engine: `LocalBackend` with `policyloop/tiny-chat`, the baseline of the ratios.
 *
 * Run: `npx tsx bench/scripted-backend.ts`. The machine and its load average are printed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type Backend, LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
import { ScriptedBackend } from 'policyloop/testing';

const STEPS = 10;
const RUNS = 5;
const WORDS = ['cat', 'dog', 'sun', 'map', 'owl', 'bee', 'fig', 'ink'];

console.log(`# RLTrainer on ScriptedBackend: ${STEPS} steps of 4 groups x 4 rollouts, median of ${RUNS} runs`);
console.log(
  `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);

interface Measured {
  /** Start of the backend, registration and the first run (engine loads included), ms. */
  readonly cold: number;
  /** Wall time per step, ms. */
  readonly wall: number;
  /** CPU time of this process per step (user + system), ms. */
  readonly cpu: number;
}

async function oneRun(backend: Backend, name: string, pollInterval: number | undefined): Promise<Measured> {
  const model = await new TrainableModel({ project: 'bench', name, baseModel: 'policyloop/tiny-chat' }).register(
    backend,
  );
  const client = model.openai();
  const trainer = new RLTrainer({
    model,
    scenarios: WORDS,
    rollout: async (word, { index }) => {
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'user', content: word }],
        max_tokens: 4,
      });
      return { reward: index % 2 };
    },
    groupSize: 4,
    groupsPerStep: 4,
    maxSteps: STEPS,
    progress: false,
    ...(pollInterval === undefined ? {} : { job: { pollInterval } }),
  });
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await trainer.run();
  const wall = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  await model.close();
  return { cold: 0, wall: wall / STEPS, cpu: (cpu.user + cpu.system) / 1000 / STEPS };
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

async function measure(start: () => Promise<Backend>, pollInterval?: number): Promise<Measured> {
  const started = performance.now();
  const backend = await start();
  try {
    await oneRun(backend, 'warm-up', pollInterval);
    const cold = performance.now() - started;
    const runs: Measured[] = [];
    for (let run = 0; run < RUNS; run += 1) runs.push(await oneRun(backend, `run-${run}`, pollInterval));
    return { cold, wall: median(runs.map((run) => run.wall)), cpu: median(runs.map((run) => run.cpu)) };
  } finally {
    await backend.close();
  }
}

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'policyloop-bench-scripted-'));
try {
  const rows: [string, Measured][] = [
    ['scripted, in-process', await measure(() => ScriptedBackend.start())],
    ['scripted, loopback', await measure(() => ScriptedBackend.start({ listen: true }))],
    ['scripted, pollInterval 1', await measure(() => ScriptedBackend.start(), 1)],
    ['local engine (tiny-chat)', await measure(() => LocalBackend.start({ dataDir }))],
  ];
  const baseline = rows.at(-1)?.[1] as Measured;
  for (const [name, { cold, wall, cpu }] of rows) {
    console.log(
      `${name.padEnd(26)} ${wall.toFixed(1).padStart(7)} ms/step (${(wall / baseline.wall).toFixed(2)}x the local engine)` +
        `  cpu ${cpu.toFixed(1).padStart(6)} ms/step (${(cpu / baseline.cpu).toFixed(2)}x)` +
        `  cold start + first run ${Math.round(cold)} ms (${(cold / baseline.cold).toFixed(2)}x)`,
    );
  }
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
