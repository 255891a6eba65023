/**
 * The quickstart's agent, trained on a Tinker server: hosted Tinker, or SkyRL on your own GPUs
 * (or on a CPU, to try it). The rollout and the reward are the quickstart's, unchanged; only the
 * backend and the base model differ. Completions are rendered and tokenized here with the base
 * model's own tokenizer and chat template (its tokenizer files must be in the Hugging Face cache,
 * or the folder a self-hosted server was started on), sampled on the server, and trained there.
 *
 * Run against hosted Tinker:  TINKER_API_KEY=tml-... npx tsx examples/tinker.ts
 * Run against SkyRL:          TINKER_BASE_URL=http://127.0.0.1:8000 TINKER_BASE_MODEL=/path/to/model npx tsx examples/tinker.ts
 * (see docs/tinker.md for starting SkyRL). TINKER_STEPS sets the number of RL steps (default 12).
 */
import { rm } from 'node:fs/promises';
import { finalAssistantText, RLTrainer, TinkerBackend, TrainableModel } from 'policyloop';
import type { RewardFn } from 'policyloop';

const scenarios = ['cat', 'dog', 'sun', 'map', 'owl', 'bee', 'fig', 'ink'];

/** The share of the reply's characters that are capital letters A-Z. */
const capitals: RewardFn<string> = (trajectory) => {
  const text = finalAssistantText(trajectory);
  return text.length === 0 ? 0 : (text.match(/[A-Z]/g)?.length ?? 0) / text.length;
};

// TINKER_BASE_URL and TINKER_API_KEY are read by the backend (hosted Tinker when no URL is set).
const baseModel = process.env['TINKER_BASE_MODEL'] ?? 'Qwen/Qwen3-4B-Instruct-2507';
const steps = Number(process.env['TINKER_STEPS'] ?? 12);
const dataDir = process.env['TINKER_DATA_DIR'] ?? '.policyloop/tinker-quickstart';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run (get-or-create would resume)
const backend = new TinkerBackend({ dataDir, lora: { rank: Number(process.env['TINKER_LORA_RANK'] ?? 32) } });
const model = new TrainableModel({ project: 'quickstart', name: 'capitals', baseModel });
await model.register(backend);
console.log(`training ${baseModel} on the Tinker server at ${backend.baseURL}`);
console.log(`watch it train: ${await backend.dashboardURL()}`);
const client = model.openai(); // logprobs on; every call inside a rollout is captured

const trainer = new RLTrainer({
  model,
  scenarios,
  rollout: async (word: string) => {
    await client.chat.completions.create({
      model: model.inferenceName(),
      messages: [{ role: 'user', content: word }],
      max_tokens: 8,
    });
  },
  reward: capitals,
  groupSize: 8,
  groupsPerStep: 4,
  maxSteps: steps,
  maxStepsOffPolicy: 1,
  // No rate: the backend's (1e-4, a LoRA rate; TINKER_LEARNING_RATE overrides it). Never the local engine's 5e-3.
  train:
    process.env['TINKER_LEARNING_RATE'] === undefined
      ? {}
      : { learningRate: Number(process.env['TINKER_LEARNING_RATE']) },
  progress: false,
});
trainer.on('step:end', ({ step, metrics }) => {
  const reward = metrics['train/reward'] ?? Number.NaN;
  console.log(`step ${step + 1}: mean reward of the groups it trained on ${reward.toFixed(3)}`);
});
const summary = await trainer.run();

console.log(`trained to step ${summary.step} (${summary.totals.rollouts} rollouts, ${summary.totals.tokens} tokens)`);
console.log(`history: ${model.files.history}`);
console.log(`adapter: npx policyloop export quickstart/capitals --data-dir ${dataDir} --out ./capitals-adapter`);
await model.close();
await backend.close();
