/**
 * Bounded validation: what the walk beside the schema (`boundedSafeParse`, every request body of
 * more than 10,000 JSON values) costs on valid bodies, against zod's `safeParse` alone (the
 * baseline, measured in the same run), and what it saves on a body of wrong values.
 *
 * Prints, from one run (the cores may be shared: compare the ratios, not the milliseconds):
 * - a 5.6 MB training-job body (200 groups × 8 trajectories with 50 logprobs each) and a 0.9 MB
 *   chat request of 20,000 messages: median ms of zod and of the bounded parse, and their ratio;
 * - one million wrong array elements: the bounded parse's ms and issue count (zod alone takes
 *   seconds and builds a million issues; it is run once at 200,000 elements for the ratio).
 *
 * Run: `npx tsx bench/bounded-validation.ts [--rounds 5]`.
 */
import type { z } from 'zod';
import { boundedSafeParse } from '../src/schema/bounded-parse.js';
import { ChatCompletionRequestBody, CreateTrainingJob, LogRequest } from '../src/schema/index.js';

const roundsArgument = process.argv.indexOf('--rounds');
const ROUNDS = roundsArgument > 0 ? Number(process.argv[roundsArgument + 1]) : 5;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

/** Median ms of `parse` over fresh copies of `text` (the copy is not timed). */
function time(text: string, parse: (value: unknown) => unknown): number {
  const samples: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const value = JSON.parse(text) as unknown;
    const start = performance.now();
    parse(value);
    samples.push(performance.now() - start);
  }
  return median(samples);
}

const trajectory = () => ({
  messages_and_choices: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say hi.' },
    {
      index: 0,
      finish_reason: 'stop',
      message: { role: 'assistant', content: 'hi' },
      logprobs: {
        content: Array.from({ length: 50 }, (_, index) => ({
          token: `t${index}`,
          logprob: -0.5,
          bytes: [116, 49],
          top_logprobs: [],
        })),
      },
    },
  ],
  reward: 1,
  metrics: { correct: true },
});
const job = {
  model_id: '00000000-0000-4000-8000-000000000000',
  trajectory_groups: Array.from({ length: 200 }, () => ({ trajectories: Array.from({ length: 8 }, trajectory) })),
};
const chat = {
  model: 'policyloop/tiny-chat',
  messages: Array.from({ length: 20_000 }, (_, index) => ({
    role: index % 2 === 0 ? 'user' : 'assistant',
    content: `message ${index}`,
  })),
};

const valid: [string, z.ZodType, unknown][] = [
  ['training job', CreateTrainingJob, job],
  ['chat request', ChatCompletionRequestBody, chat],
];
for (const [label, schema, value] of valid) {
  const text = JSON.stringify(value);
  const zodMs = time(text, (parsed) => schema.safeParse(parsed, { reportInput: true }));
  const boundedMs = time(text, (parsed) => boundedSafeParse(schema, parsed));
  console.log(
    `${label} (${(text.length / 1e6).toFixed(1)} MB, valid): zod ${zodMs.toFixed(0)} ms, bounded ${boundedMs.toFixed(0)} ms, ratio ${(boundedMs / zodMs).toFixed(2)}`,
  );
}

const wrong = (count: number) => `{"split":"train","trajectory_groups":[${'1,'.repeat(count - 1)}1]}`;
const millionMs = time(wrong(1_000_000), (parsed) => boundedSafeParse(LogRequest, parsed));
const result = boundedSafeParse(LogRequest, JSON.parse(wrong(1_000_000)));
console.log(
  `1,000,000 wrong elements: bounded ${millionMs.toFixed(0)} ms, ${result.success ? 0 : result.issues.length} issues`,
);
const smallText = wrong(200_000);
const zodSmall = time(smallText, (parsed) => LogRequest.safeParse(parsed, { reportInput: true }));
const boundedSmall = time(smallText, (parsed) => boundedSafeParse(LogRequest, parsed));
console.log(
  `200,000 wrong elements: zod ${zodSmall.toFixed(0)} ms, bounded ${boundedSmall.toFixed(1)} ms, ratio ${(boundedSmall / zodSmall).toFixed(3)}`,
);
