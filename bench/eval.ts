/**
 * What `evaluate` costs per rollout over the `gatherTrajectoryGroups` it runs on: the same
 * environment (the default agent loop, one model turn, a two-function rubric) on the same scripted
 * model (`ScriptedBackend` of `policyloop/testing`: the local service in-process over a scripted
 * engine), 64 tasks x 4 rollouts at concurrency 8. Three sides, interleaved in a rotating order in
 * every round and compared within it:
 * - gather: `environment.start(...)` then a plain gather of the run's rollout and reward (the baseline);
 * - evaluate, in memory: `evaluate` without a folder (the rows, error accounting, pass@k);
 * - evaluate, to a folder: `evaluate` with `out` (each group's lines appended, metadata.json
 *   rewritten after every write), what `policyloop eval` does.
 * Wall time and this process's CPU time per rollout; the ratios against the gather of the same
 * round, then their median and spread over the rounds. Target: evaluate to a folder <= 1.1x.
 *
 * Run: `npx tsx bench/eval.ts` (`--rounds N`, default 11; `--dir PARENT` writes the runs under
 * PARENT instead of the system's temporary folder, e.g. `/dev/shm` to leave the disk out). With
 * `node --expose-gc --import tsx bench/eval.ts` a full collection runs before each side (each
 * side then starts without the garbage of the one before, but with a shrunk young generation).
 * The machine and its load are printed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  defineEnvironment,
  evaluate,
  exactMatch,
  finalAssistantText,
  gatherTrajectoryGroups,
  PromptedModel,
} from 'policyloop';
import { ScriptedBackend } from 'policyloop/testing';

const TASKS = 64;
const ROLLOUTS = 4;
const CONCURRENCY = 8;
const roundsFlag = process.argv.indexOf('--rounds');
const ROUNDS = roundsFlag > 0 ? Number(process.argv[roundsFlag + 1]) : 11;
const dirFlag = process.argv.indexOf('--dir');
const PARENT = dirFlag > 0 ? (process.argv[dirFlag + 1] as string) : os.tmpdir();

const tasks = Array.from({ length: TASKS }, (_, index) => ({ prompt: `word ${index}`, answer: `answer ${index}` }));
const environment = defineEnvironment({
  name: 'bench',
  dataset: tasks,
  reward: {
    correct: exactMatch((task: { answer: string }) => task.answer),
    length: { fn: (trajectory) => finalAssistantText(trajectory).length, weight: 0 },
  },
});

interface Measured {
  /** Wall time per rollout, µs. */
  readonly wall: number;
  /** CPU time of this process per rollout, µs. */
  readonly cpu: number;
}

async function measure(work: () => Promise<unknown>): Promise<Measured> {
  // Each side starts without the garbage of the one before (run with node --expose-gc).
  (globalThis as { gc?: () => void }).gc?.();
  const cpu = process.cpuUsage();
  const start = performance.now();
  await work();
  const wall = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const rollouts = TASKS * ROLLOUTS;
  return { wall: (wall * 1000) / rollouts, cpu: (used.user + used.system) / rollouts };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

function spread(values: readonly number[]): string {
  return `median ${median(values).toFixed(3)} (all ${Math.min(...values).toFixed(3)}..${Math.max(...values).toFixed(3)})`;
}

const backend = await ScriptedBackend.start({ sample: ({ repeat }) => (repeat % 2 === 0 ? 'answer' : 'no') });
const connection = await backend.connect();
const model = new PromptedModel({
  project: 'bench',
  name: 'scripted',
  model: 'policyloop/tiny-chat',
  baseURL: connection.baseURL,
  apiKey: connection.apiKey,
  fetch: connection.fetch,
});
const directory = await mkdtemp(path.join(PARENT, 'policyloop-bench-eval-'));

const sides: Record<string, (round: number) => Promise<unknown>> = {
  gather: async () => {
    const run = await environment.start({ model });
    try {
      return await gatherTrajectoryGroups(tasks, run.rollout, {
        groupSize: ROLLOUTS,
        concurrency: CONCURRENCY,
        reward: run.reward,
      });
    } finally {
      await run.close();
    }
  },
  'evaluate, in memory': () => evaluate(environment, { model, rolloutsPerExample: ROLLOUTS, concurrency: CONCURRENCY }),
  'evaluate, to a folder': (round) =>
    evaluate(environment, {
      model,
      rolloutsPerExample: ROLLOUTS,
      concurrency: CONCURRENCY,
      out: path.join(directory, `round-${round}`),
    }),
};
const names = Object.keys(sides);

console.log(
  `# evaluate against gatherTrajectoryGroups: ${TASKS} tasks x ${ROLLOUTS} rollouts, concurrency ${CONCURRENCY}, ScriptedBackend in-process, ${ROUNDS} rounds`,
);
console.log(
  `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);
// A warm-up round of each side (JIT, the service's first requests).
for (const name of names) await sides[name]?.(-1 - names.indexOf(name));

const wallRatios = new Map<string, number[]>(names.slice(1).map((name) => [name, []]));
const cpuRatios = new Map<string, number[]>(names.slice(1).map((name) => [name, []]));
const gatherCosts: number[] = [];
const gatherCpu: number[] = [];
for (let round = 0; round < ROUNDS; round += 1) {
  const order = names.map((_, index) => names[(index + round) % names.length] as string);
  const measured = new Map<string, Measured>();
  for (const name of order)
    measured.set(name, await measure(() => (sides[name] as (round: number) => Promise<unknown>)(round)));
  const base = measured.get('gather') as Measured;
  gatherCosts.push(base.wall);
  gatherCpu.push(base.cpu);
  const parts = [`gather ${base.wall.toFixed(0)} µs wall, ${base.cpu.toFixed(0)} µs CPU per rollout`];
  for (const name of names.slice(1)) {
    const side = measured.get(name) as Measured;
    wallRatios.get(name)?.push(side.wall / base.wall);
    cpuRatios.get(name)?.push(side.cpu / base.cpu);
    parts.push(`${name} ${(side.wall / base.wall).toFixed(3)}x wall, ${(side.cpu / base.cpu).toFixed(3)}x CPU`);
  }
  console.log(`round ${round + 1}: ${parts.join('; ')}`);
}
console.log(
  `gather: ${median(gatherCosts).toFixed(0)} µs wall, ${median(gatherCpu).toFixed(0)} µs CPU per rollout (medians)`,
);
for (const name of names.slice(1)) {
  console.log(`${name} / gather, wall per rollout: ${spread(wallRatios.get(name) ?? [])}`);
  console.log(`${name} / gather, CPU per rollout: ${spread(cpuRatios.get(name) ?? [])}`);
}
console.log(
  `summary: evaluate to a folder / gather per rollout ${median(wallRatios.get('evaluate, to a folder') ?? []).toFixed(3)}x wall, ${median(cpuRatios.get('evaluate, to a folder') ?? []).toFixed(3)}x CPU (target <= 1.1x), load ${os.loadavg()[0]?.toFixed(1)}`,
);
await backend.close();
await rm(directory, { recursive: true, force: true });
