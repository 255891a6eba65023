/**
 * Proves that the engine learns: drives the engine API directly (no service) through
 * 1. RL from a fresh base model on `capitalsReward` for at most 60 s (the engine's done-criterion:
 *    mean reward must rise by >= 0.3), and
 * 2. the demo recipe on the uppercase task: fresh base (val), a short SFT warm start (val), then
 *    RL steps (val), printing per-step reward and wall time.
 *
 * Run: `npx tsx bench/engine-learnability.ts` (settings can be overridden by environment
 * variables of the same names as the constants in `RECIPE`, e.g. `RL_STEPS=30`).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ChatCompletionRequestBody, Choice, TrajectoryGroup } from 'policyloop/schema';
import { createEngine } from '../src/engine/index.js';
import type { Engine, PolicyRef } from '../src/engine/index.js';
import { capitalsReward, makeScenarios, reward, sftRows } from '../examples/tasks/uppercase.js';
import type { UppercaseScenario } from '../examples/tasks/uppercase.js';

function setting(name: string, fallback: number): number {
  const value = process.env[name];
  return value === undefined ? fallback : Number(value);
}

/** The recipe of the demo task (see docs/engine.md, "Recipe for the demo task"). */
const RECIPE = {
  SFT_EXAMPLES: setting('SFT_EXAMPLES', 256),
  SFT_EPOCHS: setting('SFT_EPOCHS', 3),
  SFT_BATCH: setting('SFT_BATCH', 32),
  SFT_LR: setting('SFT_LR', 5e-3),
  RL_STEPS: setting('RL_STEPS', 40),
  PROMPTS_PER_STEP: setting('PROMPTS_PER_STEP', 16),
  GROUP_SIZE: setting('GROUP_SIZE', 8),
  TEMPERATURE: setting('TEMPERATURE', 1),
  RL_LR: setting('RL_LR', 5e-3),
  MAX_TOKENS: setting('MAX_TOKENS', 8),
  VAL_SIZE: setting('VAL_SIZE', 64),
  VAL_TEMPERATURE: setting('VAL_TEMPERATURE', 1),
};
const SKIP_SCRATCH = process.env['SKIP_SCRATCH'] === '1';
const SKIP_DEMO = process.env['SKIP_DEMO'] === '1';

const BASE = 'policyloop/tiny-chat';

function request(
  messages: UppercaseScenario['messages'] | { role: 'user'; content: string }[],
  n: number,
  temperature: number,
  maxTokens: number,
  seed?: number,
): ChatCompletionRequestBody {
  return {
    model: BASE,
    messages: [...messages],
    n,
    temperature,
    max_tokens: maxTokens,
    logprobs: true,
    ...(seed === undefined ? {} : { seed }),
  } as ChatCompletionRequestBody;
}

async function validate(
  engine: Engine,
  policy: PolicyRef,
  scenarios: readonly UppercaseScenario[],
): Promise<{ reward: number; exact: number }> {
  const results = await Promise.all(
    scenarios.map((scenario, index) =>
      engine.chatCompletion(
        policy,
        request(scenario.messages, 1, RECIPE.VAL_TEMPERATURE, RECIPE.MAX_TOKENS, 1000 + index),
      ),
    ),
  );
  const rewards = results.map((result, index) =>
    reward(scenarios[index] as UppercaseScenario, result.choices[0]?.message.content),
  );
  return {
    reward: rewards.reduce((a, b) => a + b, 0) / rewards.length,
    exact: rewards.filter((value) => value === 1).length / rewards.length,
  };
}

interface RlStep {
  readonly policy: PolicyRef;
  readonly meanReward: number;
}

async function rlStep(
  engine: Engine,
  policy: PolicyRef,
  directory: string,
  step: number,
  prompts: readonly {
    messages: { role: 'user'; content: string }[];
    score: (completion: string | null | undefined) => number;
  }[],
  learningRate: number,
): Promise<RlStep> {
  const results = await Promise.all(
    prompts.map((prompt) =>
      engine.chatCompletion(policy, request(prompt.messages, RECIPE.GROUP_SIZE, RECIPE.TEMPERATURE, RECIPE.MAX_TOKENS)),
    ),
  );
  let total = 0;
  let count = 0;
  const groups: TrajectoryGroup[] = results.map((result, index) => {
    const prompt = prompts[index] as (typeof prompts)[number];
    return {
      trajectories: result.choices.map((choice: Choice) => {
        const value = prompt.score(choice.message.content);
        total += value;
        count += 1;
        return {
          messages_and_choices: [...prompt.messages, choice],
          reward: value,
          additional_histories: [],
          metrics: {},
          metadata: {},
          logs: [],
        };
      }),
    };
  });
  const outputPath = path.join(directory, `step-${step}`);
  await engine.train(
    { kind: 'rl', policy, outputPath, step, trajectoryGroups: groups, config: { learning_rate: learningRate } },
    { onEvent: () => undefined },
  );
  return {
    policy: { baseModel: BASE, checkpointPath: outputPath, key: `bench:${directory}:${step}` },
    meanReward: total / count,
  };
}

async function scratch(engine: Engine, directory: string): Promise<void> {
  console.log('\n## RL from a fresh base model on capitalsReward (budget 60 s)');
  let policy: PolicyRef = { baseModel: BASE, checkpointPath: null, key: BASE };
  const started = performance.now();
  const rewards: number[] = [];
  for (let step = 1; performance.now() - started < 60_000; step += 1) {
    const prompts = makeScenarios(500 + step, 8).map((scenario) => ({
      messages: [...scenario.messages],
      score: capitalsReward,
    }));
    const result = await rlStep(engine, policy, directory, step, prompts, RECIPE.RL_LR);
    policy = result.policy;
    rewards.push(result.meanReward);
    console.log(
      `step ${step}: reward ${result.meanReward.toFixed(3)}  t=${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    const first = rewards.slice(0, 3).reduce((a, b) => a + b, 0) / Math.min(3, rewards.length);
    const last = rewards.slice(-3).reduce((a, b) => a + b, 0) / Math.min(3, rewards.length);
    if (rewards.length >= 6 && last - first >= 0.4) break;
  }
  const first = rewards.slice(0, 3).reduce((a, b) => a + b, 0) / 3;
  const last = rewards.slice(-3).reduce((a, b) => a + b, 0) / 3;
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `mean reward of the first 3 steps ${first.toFixed(3)}, last 3 steps ${last.toFixed(3)}: gain ${(last - first).toFixed(3)} in ${seconds.toFixed(1)} s`,
  );
  console.log(`target (gain >= 0.3 within 60 s): ${last - first >= 0.3 && seconds <= 60 ? 'met' : 'NOT met'}`);
}

async function demo(engine: Engine, directory: string): Promise<void> {
  console.log('\n## Demo recipe on the uppercase task');
  console.log(JSON.stringify(RECIPE));
  const started = performance.now();
  const elapsed = (): string => `${((performance.now() - started) / 1000).toFixed(1)} s`;
  const val = makeScenarios(99, RECIPE.VAL_SIZE);
  const base: PolicyRef = { baseModel: BASE, checkpointPath: null, key: BASE };
  const baseVal = await validate(engine, base, val);
  console.log(
    `base model: val reward ${baseVal.reward.toFixed(3)} (exact ${baseVal.exact.toFixed(2)})  t=${elapsed()}`,
  );

  const examples = makeScenarios(1, RECIPE.SFT_EXAMPLES);
  const rows = Array.from({ length: RECIPE.SFT_EPOCHS }, () => sftRows(examples)).flat();
  const sftPath = path.join(directory, 'sft');
  await engine.train(
    {
      kind: 'sft',
      policy: base,
      outputPath: sftPath,
      step: 1,
      rows,
      config: { batch_size: RECIPE.SFT_BATCH, learning_rate: RECIPE.SFT_LR, assistant_turns: 'all' },
    },
    { onEvent: () => undefined },
  );
  let policy: PolicyRef = { baseModel: BASE, checkpointPath: sftPath, key: `bench:${sftPath}` };
  const sftVal = await validate(engine, policy, val);
  console.log(
    `after SFT (${rows.length} rows): val reward ${sftVal.reward.toFixed(3)} (exact ${sftVal.exact.toFixed(2)})  t=${elapsed()}`,
  );

  let lastVal = sftVal;
  for (let step = 1; step <= RECIPE.RL_STEPS; step += 1) {
    const prompts = makeScenarios(1000 + step, RECIPE.PROMPTS_PER_STEP).map((scenario) => ({
      messages: [...scenario.messages],
      score: (completion: string | null | undefined) => reward(scenario, completion),
    }));
    const result = await rlStep(engine, policy, directory, step + 1, prompts, RECIPE.RL_LR);
    policy = result.policy;
    if (step % 5 === 0 || step === RECIPE.RL_STEPS) {
      lastVal = await validate(engine, policy, val);
      console.log(
        `RL step ${step}: train reward ${result.meanReward.toFixed(3)}  val reward ${lastVal.reward.toFixed(3)} (exact ${lastVal.exact.toFixed(2)})  t=${elapsed()}`,
      );
    } else {
      console.log(`RL step ${step}: train reward ${result.meanReward.toFixed(3)}  t=${elapsed()}`);
    }
  }
  console.log(
    `\nsummary: base ${baseVal.reward.toFixed(3)} -> SFT ${sftVal.reward.toFixed(3)} -> RL ${lastVal.reward.toFixed(3)} (RL adds ${(lastVal.reward - sftVal.reward).toFixed(3)}) in ${elapsed()}`,
  );
  const met =
    baseVal.reward <= 0.3 &&
    lastVal.reward >= 0.8 &&
    lastVal.reward - sftVal.reward >= 0.2 &&
    performance.now() - started <= 300_000;
  console.log(`targets (base <= 0.3, final >= 0.8, RL adds >= 0.2, within 5 min): ${met ? 'met' : 'NOT met'}`);
}

const engine = await createEngine();
const directory = await mkdtemp(path.join(os.tmpdir(), 'policyloop-learnability-'));
console.log(
  `# engine learnability (${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}; timings are noisy when the cores are shared)`,
);
try {
  if (!SKIP_SCRATCH) await scratch(engine, path.join(directory, 'scratch'));
  if (!SKIP_DEMO) await demo(engine, path.join(directory, 'demo'));
} finally {
  await engine.close();
  await rm(directory, { recursive: true, force: true });
}
