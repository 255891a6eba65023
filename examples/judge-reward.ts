/**
 * A custom reward with a judge: verifiable parts (`combineRewards`) plus a relative judge that
 * scores each group's answers against each other and becomes the reward. The judge is any
 * OpenAI-compatible client: with OPENAI_API_KEY set, `gpt-4.1-mini` judges. Offline, a stand-in
 * client answers in the judge's JSON format from a simple heuristic (the local tiny models'
 * 256/512-token contexts are too short for a judge prompt), so the wiring runs without network.
 * Run: npx tsx examples/judge-reward.ts
 */
import { rm } from 'node:fs/promises';
import OpenAI from 'openai';
import {
  combineRewards,
  gatherTrajectoryGroups,
  lengthPenalty,
  LocalBackend,
  regexMatch,
  relativeJudge,
  TrainableModel,
} from 'policyloop';
import type { ChatCompletionsClient } from 'policyloop';

/**
 * Offline stand-in: scores each `<trajectory>` of the prompt 1 when it mentions the sea, else
 * between 0 and 0.5, the shorter the better (the rubric asks for one short line).
 */
const standInJudge: ChatCompletionsClient = {
  chat: {
    completions: {
      create: async (body) => {
        const prompt = (body.messages as { content?: unknown }[]).map((message) => String(message.content)).join('\n');
        const parts = prompt.split('<trajectory id=').slice(1);
        const scores = parts.map((part, index) => {
          const length = part.replace(/<\/trajectory>[\s\S]*$/, '').length;
          const sea = /sea/i.test(part);
          return {
            trajectory_id: String(index + 1),
            explanation: sea ? 'mentions the sea' : `off topic, ${length} characters`,
            score: sea ? 1 : Number((0.5 * Math.max(0, 1 - length / 200)).toFixed(3)),
          };
        });
        const content = JSON.stringify({ scores });
        return { choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }] };
      },
    },
  },
};

const dataDir = '.policyloop/judge-reward';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'sea-lines', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);
const client = model.openai();

const judge = relativeJudge({
  client: process.env['OPENAI_API_KEY'] === undefined ? standInJudge : new OpenAI(),
  model: 'gpt-4.1-mini',
  rubric: 'A good answer is one short line about the sea.',
});

const groups = await gatherTrajectoryGroups(
  ['the sea', 'a boat'],
  async (topic) => {
    await client.chat.completions.create({
      model: model.inferenceName(),
      messages: [{ role: 'user', content: `A line about ${topic}` }],
      max_tokens: 24,
    });
  },
  {
    groupSize: 4,
    // `brevity` has weight 0: recorded as a metric, not part of the reward.
    reward: combineRewards({ sea: regexMatch(/sea/i), brevity: { fn: lengthPenalty({ target: 40 }), weight: 0 } }),
    scoreGroup: judge, // the judge's score becomes the reward; the previous one stays as a metric
  },
);
for (const trajectory of groups.flatMap((group) => group.trajectories)) {
  console.log(trajectory.reward.toFixed(2), trajectory.metrics, trajectory.logs.at(-1));
}
console.log(await model.log({ groups, split: 'val' }));
// The judge's scores are the rewards RL trains on (the parts stay as metrics in the history).
const { step } = await model.train(groups);
console.log(`trained on the judged groups: step ${step}`);
await model.close();
await backend.close();
