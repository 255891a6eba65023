/**
 * An agent in another process, trained end to end: each rollout runs the agent
 * (examples/agents/capitals-agent.mjs, a plain `openai` program that calls the Responses API) with
 * `context.endpoint.spawn()`, which gives it the rollout's endpoint in its environment
 * (OPENAI_BASE_URL, OPENAI_API_KEY), kills it if the rollout is cancelled or times out, and fails
 * the rollout if it exits non-zero. Its calls reach the trained model through that endpoint, served
 * by this script on 127.0.0.1, and are recorded into the rollout's trajectory. The agent scores its
 * own reply and prints `{"reply": ..., "reward": ...}` as its last line: `result.reward` is the
 * rollout's reward, and `RLTrainer` trains on it. The task is the quickstart's (answer in capital
 * letters), offline on the local service.
 * The agent could be a Python or Go program, a CLI or an agent server: anything that reads
 * OPENAI_BASE_URL / OPENAI_API_KEY (or ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY).
 * Run: npx tsx examples/process-agent.ts
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
import type { RolloutFn } from 'policyloop';

const AGENT = path.join(import.meta.dirname, 'agents', 'capitals-agent.mjs');
const STEPS = Number(process.env['POLICYLOOP_EXAMPLE_STEPS'] ?? 10);
const scenarios = ['cat', 'dog', 'sun', 'map', 'owl', 'bee', 'fig', 'ink'];

/** Runs the agent for one word with the rollout's endpoint, and takes the reward it printed. */
const rollout: RolloutFn<string> = async (word, context) => {
  const { result } = await context.endpoint.spawn<{ reply: string; reward: number }>(process.execPath, [AGENT, word], {
    env: { WANDB_API_KEY: undefined }, // the child needs no training key
  });
  return { reward: result?.reward ?? 0 };
};

const dataDir = '.policyloop/process-agent';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'process-agent', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);

const trainer = new RLTrainer({
  model, // each rollout's context.endpoint forwards to it (the step the rollout samples from)
  scenarios,
  rollout, // no `reward` option: the rollout returns the reward its agent computed
  groupSize: 8,
  groupsPerStep: 4,
  maxSteps: STEPS,
  maxStepsOffPolicy: 1,
  gather: { concurrency: 16 }, // 16 agent processes at once
  progress: false,
});
trainer.on('step:end', ({ step, metrics }) => {
  console.log(`step ${step + 1}: mean reward ${(metrics['train/reward'] ?? Number.NaN).toFixed(3)}`);
});
const summary = await trainer.run();
console.log(
  `trained to step ${summary.step} (${summary.totals.rollouts} agent processes); history in ${model.files.history}`,
);
await model.close();
await backend.close();
