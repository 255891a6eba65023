/**
 * Load: 100 concurrent clients against one `policyloop serve` process (the real engine), each
 * alternating a log POST through the training client and a chat completion (`max_tokens: 4`,
 * with logprobs) through the OpenAI SDK, for 20 s (`POLICYLOOP_LOAD_SECONDS` to change it). No
 * request may fail (neither client retries); the test prints p50/p99 latency per operation.
 */
import type { ChildProcess } from 'node:child_process';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrainingClient } from 'policyloop/client';
import { DEV_API_KEY } from 'policyloop/server';
import { temporaryDirectory } from '../server/support/harness.js';
import { killHard, percentile, type ServeProcess, startServeProcess } from './support/serve-process.js';

const CLIENTS = 100;
const SECONDS = Number(process.env['POLICYLOOP_LOAD_SECONDS'] ?? 20);
const children: ChildProcess[] = [];
let service: ServeProcess;

beforeAll(async () => {
  service = await startServeProcess(temporaryDirectory('policyloop-load-'), (child) => children.push(child));
});
afterAll(async () => {
  for (const child of children.splice(0)) await killHard(child);
});

describe('load', () => {
  it(`serves ${CLIENTS} concurrent clients logging and sampling without an error`, async () => {
    const baseURL = `${service.url}/v1`;
    const setup = new TrainingClient({ baseURL, apiKey: DEV_API_KEY });
    const model = await setup.models.create({ project: 'load', name: 'target', base_model: 'policyloop/tiny-chat' });
    const latencies = { log: [] as number[], chat: [] as number[] };
    const errors: string[] = [];
    let logged = 0;
    const deadline = performance.now() + SECONDS * 1000;

    const clients = Array.from({ length: CLIENTS }, async (_, index) => {
      // Each simulated client has its own SDK instances, as separate processes would.
      const training = new TrainingClient({ baseURL, apiKey: DEV_API_KEY, maxRetries: 0, timeout: 120_000 });
      const openai = new OpenAI({ baseURL, apiKey: DEV_API_KEY, maxRetries: 0, timeout: 120_000 });
      for (let round = 0; performance.now() < deadline; round += 1) {
        const logStart = performance.now();
        try {
          await training.models.log(model.id, {
            split: 'train',
            trajectory_groups: [
              {
                trajectories: [
                  {
                    messages_and_choices: [
                      { role: 'user', content: `client ${index} round ${round}` },
                      { role: 'assistant', content: 'an answer' },
                    ],
                    reward: round % 2,
                  },
                ],
                metadata: { client: index, round },
              },
            ],
          });
          latencies.log.push(performance.now() - logStart);
          logged += 1;
        } catch (error) {
          errors.push(`log: ${String(error)}`);
        }
        const chatStart = performance.now();
        try {
          const completion = await openai.chat.completions.create({
            model: 'policyloop/tiny-chat',
            messages: [{ role: 'user', content: `client ${index} says hi` }],
            max_tokens: 4,
            logprobs: true,
          });
          expect(completion.choices).toHaveLength(1);
          latencies.chat.push(performance.now() - chatStart);
        } catch (error) {
          errors.push(`chat: ${String(error)}`);
        }
      }
    });
    const started = performance.now();
    await Promise.all(clients);
    const elapsed = (performance.now() - started) / 1000;

    let stored = 0;
    for await (const _ of setup.local.trajectoryGroups.list(model.id, { limit: 100 })) stored += 1;
    const line = (name: keyof typeof latencies): string => {
      const sorted = [...latencies[name]].sort((a, b) => a - b);
      return (
        `${name} ${sorted.length} requests (${(sorted.length / elapsed).toFixed(0)}/s), ` +
        `p50 ${percentile(sorted, 0.5).toFixed(1)} ms, p99 ${percentile(sorted, 0.99).toFixed(1)} ms`
      );
    };
    console.log(
      `load: ${CLIENTS} concurrent clients for ${elapsed.toFixed(1)} s against one policyloop serve process; ` +
        `${line('log')}; ${line('chat')}; ${errors.length} errors; ${stored} groups stored`,
    );
    expect(errors.slice(0, 5)).toEqual([]);
    expect(latencies.log.length).toBeGreaterThan(CLIENTS);
    expect(latencies.chat.length).toBeGreaterThan(CLIENTS);
    // Every acknowledged log is stored.
    expect(stored).toBe(logged);
  });
});
