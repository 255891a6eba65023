/**
 * A single-turn environment: "uppercase this word", answered in one reply by the default agent
 * loop (no tools). Its rubric: `characters`, the fraction of characters right (the reward: dense,
 * so a tiny model climbs it, as in the demo), and two metrics (weight 0): `capitals`, the fraction
 * of capital letters, and `exact`, an exact match. In an evaluation a rollout is correct when its
 * reward reaches the threshold: `--threshold 1` counts exact answers only. Held-out words are the
 * evalDataset.
 * Train on it: npx tsx examples/environments/train.ts
 * Evaluate a model on it: npx policyloop eval examples/environments/uppercase.ts
 */
import { defineEnvironment, exactMatch, finalAssistantText } from 'policyloop';
import { capitalsReward, makeScenarios, reward, scenarioOf, type UppercaseScenario } from '../tasks/uppercase.js';

/** One task: a word as the prompt, its capitals as the answer. */
interface UppercaseTask {
  prompt: string;
  answer: string;
}

const asTask = ({ word, answer }: UppercaseScenario): UppercaseTask => ({ prompt: word, answer });

export default defineEnvironment({
  name: 'uppercase',
  // Functions: the words are made when a run reads them (a large or remote set would be read lazily).
  dataset: () => makeScenarios(1, 1024).map(asTask),
  evalDataset: () => makeScenarios(2, 16).map(asTask),
  // An answer is 4 letters: a short limit keeps each rollout (and training) fast.
  sampling: { max_tokens: 8 },
  reward: {
    characters: (trajectory, task) => reward(scenarioOf(task.prompt), finalAssistantText(trajectory)),
    capitals: { fn: (trajectory) => capitalsReward(finalAssistantText(trajectory)), weight: 0 },
    exact: { fn: exactMatch((task) => task.answer), weight: 0 },
  },
});
