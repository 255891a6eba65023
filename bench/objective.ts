/**
 * The cost of the RL objective's options on the local engine, against the plain step: one RL
 * optimizer step's loss and gradients (`computeStep`) on the built-in `policyloop/tiny-chat` model,
 * over a fixed batch of 64 sequences (32 prompt tokens and 16 learned ones each, as the demo's
 * rollouts are), with
 *
 * - `plain`: CISPO, token-level ratios (the default objective);
 * - `sequence`: `importance_sampling_level: "sequence"` (GSPO);
 * - `kl`: `kl_penalty_coef` 0.1 to the base weights (a forward pass of the reference per pass);
 * - `kl+sequence`: both.
 *
 * Run: `npx tsx bench/objective.ts` (`--rounds N`, default 9). Each round runs the four one after
 * the other in a rotating order (interleaved, so that a change of the machine's load hits all of
 * them) and divides each one's time by the plain step's of the same round; the medians and the
 * ranges of those ratios over the rounds are printed, then a `summary:` line.
 */
import { loadTensorFlow } from '../src/engine/backend.js';
import type { ExperimentalTrainingConfig } from '../src/schema/index.js';
import {
  builtInDifferentiable,
  computeStep,
  lossSettings,
  modelConfigOf,
  referenceScorer,
} from '../src/engine/trainer.js';
import type { TrainingSequence } from '../src/engine/training-data.js';
import { SeededRandom } from '../src/engine/random.js';
import { initialWeights } from '../src/engine/weights.js';

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}
const ROUNDS = Number(flag('--rounds') ?? 9);
const SEQUENCES = 64;
const PROMPT = 32;
const LEARNED = 16;

const tf = await loadTensorFlow();
const config = modelConfigOf('policyloop/tiny-chat');
const model = builtInDifferentiable(tf, config, initialWeights(config));
const reference = referenceScorer(tf, model, initialWeights(config));
const random = new SeededRandom(36);
const sequences: TrainingSequence[] = Array.from({ length: SEQUENCES }, (_, index) => {
  const length = PROMPT + LEARNED;
  const tokens = Array.from({ length }, () => Math.floor(random.next() * config.vocabularySize));
  const advantage = index % 2 === 0 ? 1 : -1;
  return {
    tokens,
    mask: tokens.map((_, position) => (position >= PROMPT ? 1 : 0)),
    weights: tokens.map(() => advantage),
    // Sampled logprobs near a uniform policy's, so the ratios are not all 1.
    oldLogprobs: tokens.map(() => Math.log(1 / config.vocabularySize) + (random.next() - 0.5) * 0.4),
  };
});

const VARIANTS: Record<string, ExperimentalTrainingConfig> = {
  plain: {},
  sequence: { importance_sampling_level: 'sequence' },
  kl: { kl_penalty_coef: 0.1 },
  'kl+sequence': { kl_penalty_coef: 0.1, importance_sampling_level: 'sequence' },
};
const names = Object.keys(VARIANTS);

async function timeStep(name: string): Promise<number> {
  const settings = lossSettings('rl', VARIANTS[name] as ExperimentalTrainingConfig);
  const started = performance.now();
  await computeStep(tf, model, sequences, settings, settings.klPenaltyCoef > 0 ? reference : undefined);
  return performance.now() - started;
}

// One warm-up of each (kernels, caches).
for (const name of names) await timeStep(name);
const ratios = new Map<string, number[]>(names.map((name) => [name, []]));
const plainTimes: number[] = [];
for (let round = 0; round < ROUNDS; round += 1) {
  const order = names.map((_, index) => names[(index + round) % names.length] as string);
  const times = new Map<string, number>();
  for (const name of order) times.set(name, await timeStep(name));
  const plain = times.get('plain') as number;
  plainTimes.push(plain);
  for (const name of names) (ratios.get(name) as number[]).push((times.get(name) as number) / plain);
  console.log(
    `round ${round + 1}: ${names.map((name) => `${name} ${(times.get(name) as number).toFixed(0)} ms`).join(', ')}`,
  );
}
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};
console.log(
  `plain step: median ${median(plainTimes).toFixed(0)} ms (${SEQUENCES} sequences × ${PROMPT + LEARNED} tokens, ${LEARNED} learned)`,
);
for (const name of names.slice(1)) {
  const values = ratios.get(name) as number[];
  console.log(
    `${name}: ${median(values).toFixed(2)}× the plain step (range ${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`,
  );
}
console.log(
  `summary: plain ${median(plainTimes).toFixed(0)} ms; ${names
    .slice(1)
    .map((name) => `${name} ${median(ratios.get(name) as number[]).toFixed(2)}×`)
    .join(', ')} (median of ${ROUNDS} interleaved rounds)`,
);
