/**
 * A training process for the crash test: runs an RLTrainer against a service at POLICYLOOP_TEST_URL
 * (the test's, which outlives this process) until MAX_STEPS, then prints its summary as JSON.
 */
import { LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
import { capitalsReward } from '../../../examples/tasks/uppercase.js';
import { finalAssistantText } from 'policyloop';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const backend = new LocalBackend({
  url: env('POLICYLOOP_TEST_URL'),
  apiKey: env('POLICYLOOP_TEST_KEY'),
  dataDir: env('POLICYLOOP_TEST_DIR'),
});
const model = await new TrainableModel({
  project: 'crash',
  name: 'capitals',
  baseModel: 'policyloop/tiny-chat',
}).register(backend);
const client = model.openai();
const trainer = new RLTrainer({
  model,
  scenarios: ['cat', 'dog', 'sun', 'map'],
  rollout: async (word: string) => {
    await client.chat.completions.create({
      model: model.inferenceName(),
      messages: [{ role: 'user', content: word }],
      max_tokens: 6,
      temperature: 1,
    });
  },
  reward: (trajectory) => capitalsReward(finalAssistantText(trajectory)),
  groupSize: 8,
  groupsPerStep: 4,
  maxSteps: Number(env('MAX_STEPS')),
  maxStepsOffPolicy: 0,
  progress: false,
});
const summary = await trainer.run();
await model.close();
await backend.close();
process.stdout.write(`${JSON.stringify(summary)}\n`);
