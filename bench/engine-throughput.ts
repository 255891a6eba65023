/**
 * Engine throughput: sampling tokens/s at 1 and at 64 concurrent sequences (their ratio is the
 * batching gain) and training tokens/s of an RL step on 64 completions and of SFT batches.
 *
 * Run: `npx tsx bench/engine-throughput.ts`. The machine and its load average are printed: the
 * cores may be shared, so figures are noisy; the script takes the best of a few rounds.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createEngine, parameterCount, TINY_CHAT } from '../src/engine/index.js';
import type { PolicyRef } from '../src/engine/index.js';
import type { ChatCompletionRequestBody, TrajectoryGroup } from 'policyloop/schema';

const MAX_TOKENS = 64;
const ROUNDS = 5;
const policy: PolicyRef = { baseModel: TINY_CHAT.id, checkpointPath: null, key: TINY_CHAT.id };
const request = (index: number): ChatCompletionRequestBody =>
  ({
    model: policy.baseModel,
    messages: [{ role: 'user', content: `word number ${index}` }],
    max_tokens: MAX_TOKENS,
    seed: index,
    logprobs: true,
  }) as ChatCompletionRequestBody;

const engine = await createEngine();
const directory = await mkdtemp(path.join(os.tmpdir(), 'policyloop-throughput-'));
console.log(`# engine throughput: ${TINY_CHAT.id} (${parameterCount(TINY_CHAT)} parameters)`);
console.log(
  `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${os.platform()} ${os.release()}, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);

try {
  await engine.chatCompletion(policy, request(0)); // warm-up: weights and kernels

  async function sample(
    concurrency: number,
  ): Promise<{ tokensPerSecond: number; results: Awaited<ReturnType<typeof engine.chatCompletion>>[] }> {
    let best = 0;
    let results: Awaited<ReturnType<typeof engine.chatCompletion>>[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const started = performance.now();
      results = await Promise.all(
        Array.from({ length: concurrency }, (_, index) => engine.chatCompletion(policy, request(round * 1000 + index))),
      );
      const seconds = (performance.now() - started) / 1000;
      const tokens = results.reduce((sum, result) => sum + result.usage.completion_tokens, 0);
      best = Math.max(best, tokens / seconds);
    }
    return { tokensPerSecond: best, results };
  }

  const single = await sample(1);
  const batched = await sample(64);
  console.log(`sampling, 1 sequence:    ${single.tokensPerSecond.toFixed(0)} tokens/s`);
  console.log(`sampling, 64 concurrent: ${batched.tokensPerSecond.toFixed(0)} tokens/s`);
  console.log(`batching gain: ${(batched.tokensPerSecond / single.tokensPerSecond).toFixed(1)}x`);

  const groups: TrajectoryGroup[] = Array.from({ length: 8 }, (_, group) => ({
    trajectories: batched.results.slice(group * 8, group * 8 + 8).map((result, index) => ({
      messages_and_choices: [
        { role: 'user' as const, content: `word number ${group * 8 + index}` },
        result.choices[0]!,
      ],
      reward: index % 3,
      additional_histories: [],
      metrics: {},
      metadata: {},
      logs: [],
    })),
  }));
  let bestRl = { seconds: Infinity, tokens: 0, trainable: 0 };
  for (let round = 0; round < ROUNDS; round += 1) {
    const started = performance.now();
    const result = await engine.train(
      {
        kind: 'rl',
        policy,
        outputPath: path.join(directory, `rl-${round}`),
        step: 1,
        trajectoryGroups: groups,
        config: null,
      },
      { onEvent: () => undefined },
    );
    const seconds = (performance.now() - started) / 1000;
    if (seconds < bestRl.seconds)
      bestRl = { seconds, tokens: 0, trainable: result.metrics['num_trainable_tokens'] ?? 0 };
  }
  console.log(
    `RL step on 64 completions (${bestRl.trainable} trained tokens, ${MAX_TOKENS} max each): ${(bestRl.seconds * 1000).toFixed(0)} ms per job incl. worker hand-off and checkpoint write = ${(bestRl.trainable / bestRl.seconds).toFixed(0)} trained tokens/s`,
  );

  const rows = Array.from({ length: 256 }, (_, index) => ({
    messages: [
      { role: 'user' as const, content: `word ${index}` },
      { role: 'assistant' as const, content: `WORD ${index}` },
    ],
  }));
  let bestSft = { seconds: Infinity, tokens: 0 };
  for (let round = 0; round < ROUNDS; round += 1) {
    const started = performance.now();
    let tokens = 0;
    await engine.train(
      {
        kind: 'sft',
        policy,
        outputPath: path.join(directory, `sft-${round}`),
        step: 1,
        rows,
        config: { batch_size: 32, assistant_turns: 'all' },
      },
      {
        onEvent: (event) => {
          if (event.type === 'gradient_step') tokens += event.data['num_trainable_tokens'] ?? 0;
        },
      },
    );
    const seconds = (performance.now() - started) / 1000;
    if (seconds < bestSft.seconds) bestSft = { seconds, tokens };
  }
  const sequenceTokens = rows.reduce(
    (sum, row) => sum + row.messages.reduce((inner, message) => inner + message.content.length + 2, 0),
    0,
  );
  console.log(
    `SFT, 256 rows in batches of 32: ${(bestSft.seconds * 1000).toFixed(0)} ms = ${(sequenceTokens / bestSft.seconds).toFixed(0)} sequence tokens/s (${(bestSft.tokens / bestSft.seconds).toFixed(0)} trained tokens/s)`,
  );
} finally {
  await engine.close();
  await rm(directory, { recursive: true, force: true });
}
