/**
 * Batching through the local service: 1 vs 64 concurrent chat completions over HTTP on loopback,
 * through the official `openai` client, as rollouts make them. Prints tokens/s for each and their
 * ratio (the batching gain a user's gather sees end to end: HTTP, validation, JSON, engine).
 *
 * Run: `npx tsx bench/service-batching.ts`. The machine and its load average are printed; the
 * cores may be shared, so the script takes the best of a few rounds.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { serve } from 'policyloop/server';

const MAX_TOKENS = 32;
const ROUNDS = 5;
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'policyloop-bench-service-'));
const service = await serve({ port: 0, dataDir });
const client = new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0 });
console.log('# local service batching: policyloop/tiny-chat over HTTP on loopback, openai SDK');
console.log(
  `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${os.platform()} ${os.release()}, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);

async function completion(seed: number): Promise<number> {
  const response = await client.chat.completions.create({
    model: 'policyloop/tiny-chat',
    messages: [{ role: 'user', content: `word number ${seed}` }],
    max_tokens: MAX_TOKENS,
    logprobs: true,
    seed,
  });
  return response.usage?.completion_tokens ?? 0;
}

/** Best tokens/s over the rounds with `concurrency` requests in flight together. */
async function tokensPerSecond(concurrency: number): Promise<number> {
  let best = 0;
  for (let round = 0; round < ROUNDS; round += 1) {
    const started = performance.now();
    const tokens = await Promise.all(
      Array.from({ length: concurrency }, (_, index) => completion(round * 1000 + index)),
    );
    const seconds = (performance.now() - started) / 1000;
    best = Math.max(best, tokens.reduce((sum, count) => sum + count, 0) / seconds);
  }
  return best;
}

try {
  await completion(0); // warm-up: weights and kernels
  const single = await tokensPerSecond(1);
  const concurrent = await tokensPerSecond(64);
  console.log(`1 request:              ${single.toFixed(0)} tokens/s`);
  console.log(`64 concurrent requests: ${concurrent.toFixed(0)} tokens/s`);
  console.log(
    `batching gain through the service: ${(concurrent / single).toFixed(1)}x (64 requests cost ${(64 / (concurrent / single)).toFixed(1)}x one)`,
  );
} finally {
  await service.close();
  await rm(dataDir, { recursive: true, force: true });
}
