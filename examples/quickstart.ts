/**
 * Quickstart: a rollout, a reward, and a few RL steps against the local service (offline).
 * Run: npx tsx examples/quickstart.ts
 */
import { normalizedMatch } from '../src/rewards/index.js';
import { gatherTrajectoryGroups } from '../src/rollout/index.js';
import { LocalBackend, TrainableModel } from '../src/training/index.js';

interface Scenario {
  word: string;
}
const scenarios: Scenario[] = ['cat', 'dog', 'sun', 'map'].map((word) => ({ word }));

// The local service starts in-process; its store, checkpoints and history go under dataDir.
const backend = await LocalBackend.start({ dataDir: '.policyloop/quickstart' });
const model = new TrainableModel({ project: 'quickstart', name: 'echo', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);
const client = model.openai(); // logprobs on; every call inside a rollout is captured

for (let i = 0; i < 3; i += 1) {
  const groups = await gatherTrajectoryGroups(
    scenarios,
    async (scenario) => {
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'user', content: `Repeat the word: ${scenario.word}` }],
        max_tokens: 8,
      });
    },
    {
      groupSize: 8,
      // A partial-credit reward: exact answers score 1, answers containing the word 0.5.
      reward: {
        exact: normalizedMatch<Scenario>((scenario) => scenario.word),
        mentions: { fn: (trajectory, scenario) => (JSON.stringify(trajectory.messages_and_choices.at(-1)).includes(scenario.word) ? 0.5 : 0) },
      },
      policyVersion: () => model.getStep(),
    },
  );
  const { step, metrics } = await model.train(groups);
  console.log(`step ${step}: loss ${metrics['loss']?.toFixed(4)}`);
}

console.log(`history: ${model.files.history}`);
await model.close();
await backend.close();
