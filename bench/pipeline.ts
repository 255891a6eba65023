/**
 * The RL pipeline: the same 20 steps with `maxStepsOffPolicy` 0 (synchronous: sample, then train)
 * and 1 (the next step's rollouts run while a step trains), through RLTrainer. Prints steps per
 * minute for both and their ratio, in two cases:
 * - the local service as it is (sampling and training share the same CPU cores);
 * - the local service behind a loopback stub whose every training job takes a fixed 2 s (the job
 *   POST is answered 2 s after it was sent; the real, tiny job is done well within that), so the
 *   overlap shows apart from CPU contention: the pipelined loop should approach max(sample, train)
 *   per step instead of their sum.
 *
 * Run: `npx tsx bench/pipeline.ts`. The machine and its load average are printed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { finalAssistantText, LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
import type { StepEndEvent } from 'policyloop/training';
import { capitalsReward, makeScenarios } from '../examples/tasks/uppercase.js';

const STEPS = 20;
const STUB_TRAINING_MS = 2_000;

console.log('# RL pipeline: maxStepsOffPolicy 0 vs 1, 20 steps of 8 groups x 8 rollouts, policyloop/tiny-chat');
console.log(
  `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);

/** A fetch in front of the local service whose training jobs take `ms` (the POST answers after). */
function slowTraining(ms: number): typeof globalThis.fetch {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (init?.method !== 'POST' || !url.pathname.endsWith('/preview/training-jobs')) return fetch(input, init);
    const started = performance.now();
    const response = await fetch(input, init);
    const left = ms - (performance.now() - started);
    if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
    return response;
  };
}

interface Measured {
  readonly stepsPerMinute: number;
  readonly sample: number;
  readonly train: number;
  readonly idle: number;
}

async function measure(maxStepsOffPolicy: number, fetch?: typeof globalThis.fetch): Promise<Measured> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'policyloop-bench-pipeline-'));
  const backend = await LocalBackend.start({ dataDir, ...(fetch === undefined ? {} : { fetch }) });
  try {
    const model = await new TrainableModel({
      project: 'bench',
      name: 'pipeline',
      baseModel: 'policyloop/tiny-chat',
    }).register(backend);
    const client = model.openai();
    const ends: StepEndEvent[] = [];
    const trainer = new RLTrainer({
      model,
      scenarios: makeScenarios(1, 64),
      rollout: async (scenario) => {
        await client.chat.completions.create({
          model: model.inferenceName(),
          messages: [...scenario.messages],
          max_tokens: 8,
          temperature: 1,
        });
      },
      reward: (trajectory) => capitalsReward(finalAssistantText(trajectory)),
      groupSize: 8,
      groupsPerStep: 8,
      maxSteps: STEPS,
      maxStepsOffPolicy,
      gather: { concurrency: 64 },
      progress: false,
    });
    trainer.on('step:end', (event) => ends.push(event));
    const summary = await trainer.run();
    await model.close();
    const mean = (name: string): number =>
      ends.reduce((sum, event) => sum + (event.metrics[name] ?? 0), 0) / Math.max(1, ends.length);
    return {
      stepsPerMinute: summary.totals.steps / (summary.elapsedMs / 60_000),
      sample: mean('time/sample'),
      train: mean('time/train'),
      idle: mean('idle/service'),
    };
  } finally {
    await backend.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

const row = (label: string, result: Measured): string =>
  `| ${label.padEnd(31)} | ${result.stepsPerMinute.toFixed(1).padStart(9)} | ${result.sample.toFixed(2).padStart(8)} | ${result.train
    .toFixed(2)
    .padStart(7)} | ${result.idle.toFixed(2).padStart(6)} |`;

for (const [title, fetch] of [
  ['local service', undefined],
  [`local service, training stubbed to ${STUB_TRAINING_MS / 1000} s`, slowTraining(STUB_TRAINING_MS)],
] as const) {
  const sync = await measure(0, fetch);
  const pipelined = await measure(1, fetch);
  console.log(`\n## ${title}`);
  console.log('| loop                            | steps/min | sample s | train s | idle s |');
  console.log('| ------------------------------- | --------- | -------- | ------- | ------ |');
  console.log(row('maxStepsOffPolicy 0 (sync)', sync));
  console.log(row('maxStepsOffPolicy 1 (pipelined)', pipelined));
  console.log(`ratio pipelined / sync: ${(pipelined.stepsPerMinute / sync.stepsPerMinute).toFixed(2)}x`);
}
