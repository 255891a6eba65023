/**
 * The same loop on the local service or on the hosted W&B / CoreWeave Serverless Training
 * service: the backend is the one line that changes. With WANDB_API_KEY set this runs against
 * the hosted service (network, a GPU bill); without it, locally. See docs/hosted.md.
 * Run: WANDB_API_KEY=... npx tsx examples/hosted.ts
 */
import {
  combineRewards,
  finalAssistantText,
  gatherTrajectoryGroups,
  HostedBackend,
  LocalBackend,
  normalizedMatch,
  TrainableModel,
} from 'policyloop';
import type { Backend } from 'policyloop';

const hosted = process.env['WANDB_API_KEY'] !== undefined;
// The one-line switch:
const backend: Backend = hosted
  ? new HostedBackend()
  : await LocalBackend.start({ dataDir: '.policyloop/hosted-example' });

const model = new TrainableModel({
  project: 'hosted-example',
  name: 'capitals',
  // Base models differ by service: list them with `client.baseModels.list()`.
  baseModel: hosted ? 'OpenPipe/Qwen3-14B-Instruct' : 'policyloop/tiny-chat',
});
await model.register(backend);
const client = model.openai();

const scenarios = [
  { country: 'France', capital: 'Paris' },
  { country: 'Peru', capital: 'Lima' },
];
const letterShare = (text: string): number =>
  text.length === 0 ? 0 : [...text].filter((character) => /\p{L}/u.test(character)).length / [...text].length;
const groups = await gatherTrajectoryGroups(
  scenarios,
  async (scenario) => {
    await client.chat.completions.create({
      model: model.inferenceName(),
      messages: [{ role: 'user', content: `Capital of ${scenario.country}? One word.` }],
      max_tokens: 8,
    });
  },
  {
    groupSize: 4,
    concurrency: hosted ? 32 : 8,
    // Right answers score 1. Partial credit for a reply of letters only (a one-word answer) keeps
    // the rewards of a group apart while no sample is right yet, as with a fresh local model: a
    // group whose rewards are all equal teaches nothing, and train() refuses a batch of only those.
    reward: combineRewards<(typeof scenarios)[number]>({
      correct: normalizedMatch((scenario) => scenario.capital),
      letters: { fn: (trajectory) => letterShare(finalAssistantText(trajectory)), weight: 0.2 },
    }),
    sampledStep: () => model.getStep(),
  },
);

// No learning rate: each backend applies its own default (the local engine's tuned value, or the
// hosted service's value for LoRA on large models). A local value carried over would wreck a 14B LoRA.
const { step } = await model.train(groups);
console.log(`step ${step} on the ${backend.kind} service; history in ${model.files.history}`);

// SFT: the local backend sends a file:// URL of a JSONL it writes; the hosted service reads only
// data you uploaded (a W&B artifact): pass its URL.
if (hosted && process.env['SFT_DATA_URL'] !== undefined) {
  await model.trainSFT(undefined, { trainingDataUrl: process.env['SFT_DATA_URL'] });
}
await model.close();
await backend.close();
