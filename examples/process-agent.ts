/**
 * An agent in another process, trained end to end: each rollout starts the agent
 * (examples/agents/capitals-agent.mjs, a plain `openai` program that calls the Responses API)
 * with `context.endpoint.env` in its environment. Its calls reach the trained model through the
 * rollout's own endpoint, served by this script on 127.0.0.1, and are recorded into the rollout's
 * trajectory; the reward reads the trajectory, and `RLTrainer` trains on it. The task is the
 * quickstart's (answer in capital letters), offline on the local service.
 * The agent could be a Python or Go program, a CLI or an agent server: anything that reads
 * OPENAI_BASE_URL / OPENAI_API_KEY (or ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY).
 * Run: npx tsx examples/process-agent.ts
 */
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { finalAssistantText, LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
import type { RewardFn, RolloutFn } from 'policyloop';

const AGENT = path.join(import.meta.dirname, 'agents', 'capitals-agent.mjs');
const STEPS = Number(process.env['POLICYLOOP_EXAMPLE_STEPS'] ?? 10);
const scenarios = ['cat', 'dog', 'sun', 'map', 'owl', 'bee', 'fig', 'ink'];

/** The share of the reply's characters that are capital letters A-Z. */
const capitals: RewardFn<string> = (trajectory) => {
  const text = finalAssistantText(trajectory);
  return text.length === 0 ? 0 : (text.match(/[A-Z]/g)?.length ?? 0) / text.length;
};

/** Runs the agent for one word, with the rollout's endpoint in its environment, and waits for it. */
const rollout: RolloutFn<string> = async (word, context) => {
  const child = spawn(process.execPath, [AGENT, word], {
    env: { ...process.env, ...context.endpoint.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    signal: context.signal, // a rollout that times out or is cancelled stops its agent
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`the agent ended with code ${code}: ${stderr.slice(-500)}`);
};

const dataDir = '.policyloop/process-agent';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'process-agent', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);

const trainer = new RLTrainer({
  model, // each rollout's context.endpoint forwards to it (the step the rollout samples from)
  scenarios,
  rollout,
  reward: capitals,
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
