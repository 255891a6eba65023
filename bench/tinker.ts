/**
 * One RL step on a Tinker server (SkyRL 0.4.0's, JAX on this CPU, a tiny Qwen3 with the real
 * tokenizer), three ways in the same run:
 *
 * 1. the official `tinker` 0.25.0 Python SDK (test/tinker/sdk_reference.py, mode rl_step): sample
 *    16 choices in one request, forward_backward (importance_sampling) on them, optim_step,
 *    save_weights_for_sampler; optim_step submitted without waiting, as tinker-cookbook does;
 * 2. policyloop's TinkerBackend doing the same calls (`resumableState: false`): 16 choices through
 *    `model.openai()` (one request, n = 16), each the trajectory of one group, then
 *    `model.train([group])`, which sends forward_backward and
 *    optim_step back to back and saves the sampler weights; and the default configuration, which
 *    also saves the resumable state every step;
 * 3. the local wasm engine (LocalBackend on the same model folder) doing the same step.
 *
 * Each side runs WARMUP + STEPS steps; the figure is the median wall time of the last STEPS (the
 * first calls of a JAX server compile). Prints the ratios policyloop / SDK (target <= 1.1) and
 * local engine / SkyRL.
 *
 * Run: `npx tsx bench/tinker.ts [--steps 5]` (needs Python >= 3.12; the first run builds the
 * SkyRL venv under .cache/, about 6 GB).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { LocalBackend, TinkerBackend, TrainableModel } from 'policyloop';
import type { Choice } from 'policyloop/schema';
import type { Backend } from 'policyloop';
import { writeTinyQwen3 } from '../src/engine/hf/tiny-qwen3.js';
import { runSdkReference, skyrlSkipReason, startSkyrlServer } from '../test/support/skyrl-server.js';

const { values } = parseArgs({
  options: { steps: { type: 'string', default: '5' }, warmup: { type: 'string', default: '2' } },
});
const STEPS = Number(values.steps);
const WARMUP = Number(values.warmup);
const SAMPLES = 16;
const MAX_TOKENS = 16;
const RANK = 8;
const LEARNING_RATE = 1e-4;
const MESSAGES = [{ role: 'user' as const, content: 'Write a word.' }];

const median = (numbers: readonly number[]): number => {
  const sorted = [...numbers].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};

console.log(
  `# One RL step on a Tinker server: ${SAMPLES} choices of <= ${MAX_TOKENS} tokens, forward/backward, optim, save`,
);
console.log(
  `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);
const skip = await skyrlSkipReason();
if (skip !== undefined) {
  console.log(`skipped: ${skip}`);
  process.exit(0);
}

const root = await mkdtemp(path.join(os.tmpdir(), 'policyloop-bench-tinker-'));
const modelDir = await writeTinyQwen3(path.join(root, 'tiny-qwen3'), { embeddingStd: 0.15 });
const server = await startSkyrlServer({ modelDir, maxLoraAdapters: 4, maxLoraRank: RANK });
console.log(`SkyRL ready in ${server.startup.readySeconds.toFixed(0)} s`);

/** policyloop's step on a backend: sample SAMPLES choices in one request, then train on them. */
async function policyloopSteps(backend: Backend, name: string): Promise<number[]> {
  const model = new TrainableModel({ project: 'bench', name, baseModel: modelDir });
  await model.register(backend);
  const client = model.openai();
  const times: number[] = [];
  for (let step = 0; step < WARMUP + STEPS; step += 1) {
    const started = performance.now();
    // One request for all choices, as the SDK side samples; each choice becomes a trajectory of
    // the group, with a synthetic reward that differs across the group as the SDK side's does.
    const completion = await client.chat.completions.create({
      model: model.inferenceName(),
      messages: MESSAGES,
      n: SAMPLES,
      max_tokens: MAX_TOKENS,
      temperature: 1,
    });
    const group = {
      trajectories: completion.choices.map((choice, index) => ({
        messages_and_choices: [...MESSAGES, choice as unknown as Choice],
        reward: index % 2,
      })),
    };
    await model.train([group], { learningRate: LEARNING_RATE });
    times.push((performance.now() - started) / 1000);
  }
  await model.close();
  return times.slice(WARMUP);
}

try {
  const prompt = await (async () => {
    const { loadTextLayer } = await import('../src/text/text-layer.js');
    const text = await loadTextLayer(modelDir);
    return text.encode(text.renderChat(MESSAGES, { addGenerationPrompt: true }));
  })();
  const sdk = await runSdkReference(
    server,
    {
      mode: 'rl_step',
      rank: RANK,
      promptTokens: prompt,
      numSamples: SAMPLES,
      maxTokens: MAX_TOKENS,
      steps: WARMUP + STEPS,
      learningRate: LEARNING_RATE,
      pipelined: true,
    },
    { timeoutMs: 30 * 60_000 },
  );
  const sdkTimes = sdk.steps.slice(WARMUP).map((step) => step.step_s);

  const sameCalls = new TinkerBackend({
    baseURL: server.baseURL,
    dataDir: path.join(root, 'same-calls'),
    lora: { rank: RANK },
    resumableState: false,
  });
  const sameTimes = await policyloopSteps(sameCalls, 'same-calls');
  await sameCalls.close();

  const withState = new TinkerBackend({
    baseURL: server.baseURL,
    dataDir: path.join(root, 'default'),
    lora: { rank: RANK },
  });
  const defaultTimes = await policyloopSteps(withState, 'default');
  await withState.close();
  await server.close();

  // The local engine on the same folder, with SkyRL stopped (the CPU is the engine's alone).
  const local = await LocalBackend.start({ dataDir: path.join(root, 'local'), models: [modelDir] });
  const localTimes = await policyloopSteps(local, 'local');
  await local.close();

  const sdkMedian = median(sdkTimes);
  const sameMedian = median(sameTimes);
  const defaultMedian = median(defaultTimes);
  const localMedian = median(localTimes);
  const seconds = (times: number[]) => times.map((time) => time.toFixed(2)).join(' ');
  console.log(`official SDK (Python), s per step:            median ${sdkMedian.toFixed(2)}  [${seconds(sdkTimes)}]`);
  console.log(
    `policyloop TinkerBackend, same calls:          median ${sameMedian.toFixed(2)}  [${seconds(sameTimes)}]`,
  );
  console.log(
    `policyloop TinkerBackend, default (+ state):   median ${defaultMedian.toFixed(2)}  [${seconds(defaultTimes)}]`,
  );
  console.log(
    `policyloop local wasm engine, same model/step: median ${localMedian.toFixed(2)}  [${seconds(localTimes)}]`,
  );
  console.log(`ratio policyloop / SDK (same calls): ${(sameMedian / sdkMedian).toFixed(2)} (target <= 1.10)`);
  console.log(`ratio policyloop / SDK (default, saving resumable state): ${(defaultMedian / sdkMedian).toFixed(2)}`);
  console.log(`ratio local wasm engine / SkyRL-JAX (policyloop same calls): ${(localMedian / sameMedian).toFixed(2)}`);
} finally {
  await server.close();
  await rm(root, { recursive: true, force: true });
}
