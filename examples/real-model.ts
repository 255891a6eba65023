/**
 * RL on a real open-weight model, offline, then take the adapter away.
 *
 * 1. Download a small instruct model into the Hugging Face cache (once, ~270 MB):
 *      pip install -U huggingface_hub
 *      huggingface-cli download HuggingFaceTB/SmolLM2-135M-Instruct
 *    The engine finds it there (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub).
 *    Qwen3-0.6B does not fit the engine's 4 GB wasm heap in float32; SmolLM2-135M/360M do.
 * 2. Run: npx tsx examples/real-model.ts   (POLICYLOOP_EXAMPLE_STEPS=N for fewer RL steps)
 *    It registers a model on the base model, samples with the model's own tokenizer and chat
 *    template, rewards uppercasing a 4-letter word (examples/tasks/uppercase.ts), and trains a
 *    LoRA adapter (rank 8 on every linear layer) by RL, printing the validation reward per step.
 * 3. Export the adapter for PEFT or vLLM (`--merged` for a full model folder):
 *      npx policyloop export examples/real-uppercase --out ./uppercase-adapter --data-dir .policyloop/real-model
 *    then in Python: PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), './uppercase-adapter').
 *
 * On 2 CPU cores a step (16 prompts × 4 samples of up to 8 tokens, then a training job) takes
 * about a minute on SmolLM2-135M; CI does not run this example (it needs the download).
 */
import { rm } from 'node:fs/promises';
import { finalAssistantText, gatherTrajectoryGroups, LocalBackend, TrainableModel } from 'policyloop';
import type { TrajectoryGroup } from 'policyloop';
import { makeScenarios, reward } from './tasks/uppercase.js';
import type { UppercaseScenario } from './tasks/uppercase.js';

const BASE_MODEL = process.env['POLICYLOOP_REAL_MODEL'] ?? 'HuggingFaceTB/SmolLM2-135M-Instruct';
const STEPS = Number(process.env['POLICYLOOP_EXAMPLE_STEPS'] ?? 20);
const dataDir = '.policyloop/real-model';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run

const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'real-uppercase', baseModel: BASE_MODEL });
await model.register(backend); // a 422 here says where the engine looked and how to download the model
const client = model.openai();
let step = await model.getStep();

// The instruction goes in a system prompt; the user message is the word.
const system = 'Reply with the word the user sends, in capital letters, and nothing else.';
const sample = (scenarios: UppercaseScenario[], groupSize: number): Promise<TrajectoryGroup[]> =>
  gatherTrajectoryGroups(
    scenarios,
    async (scenario) => {
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'system', content: system }, ...scenario.messages],
        max_tokens: 8,
        temperature: 1,
      });
    },
    {
      groupSize,
      concurrency: 16,
      reward: (trajectory, scenario) => reward(scenario, finalAssistantText(trajectory)),
      sampledStep: () => step,
    },
  );
const validate = async (): Promise<number> => {
  const row = await model.log({ groups: await sample(makeScenarios(99, 16), 1), split: 'val', step });
  return row['val/reward'] as number;
};

console.log(`base ${BASE_MODEL}: val/reward ${(await validate()).toFixed(3)}`);
for (let i = 1; i <= STEPS; i += 1) {
  // LoRA on a pretrained model wants a far smaller learning rate than the toy models' 5e-3.
  ({ step } = await model.train(await sample(makeScenarios(1_000 + i, 16), 4), {
    learningRate: 5e-4,
    config: { lora_rank: 8, lora_alpha: 16 },
  }));
  console.log(`step ${step}: val/reward ${(await validate()).toFixed(3)}`);
}
console.log(
  `export the adapter: npx policyloop export examples/real-uppercase --out ./uppercase-adapter --data-dir ${dataDir}`,
);
await model.close();
await backend.close();
