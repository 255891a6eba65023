/** The demo task of `examples/tasks/uppercase.ts`: scenarios and the two verifiable rewards. */
import { describe, expect, it } from 'vitest';
import {
  WORD_LENGTH,
  capitalsReward,
  makeScenarios,
  reward,
  scenarioOf,
  sftRows,
} from '../../examples/tasks/uppercase.js';

describe('uppercase task', () => {
  it('makes deterministic scenarios of lowercase words, different for another seed', () => {
    const scenarios = makeScenarios(1, 50);
    expect(makeScenarios(1, 50)).toEqual(scenarios);
    expect(makeScenarios(2, 50).map((scenario) => scenario.word)).not.toEqual(
      scenarios.map((scenario) => scenario.word),
    );
    for (const scenario of scenarios) {
      expect(scenario.word).toMatch(new RegExp(`^[a-z]{${WORD_LENGTH}}$`));
      expect(scenario.answer).toBe(scenario.word.toUpperCase());
      expect(scenario.messages).toEqual([{ role: 'user', content: scenario.word }]);
    }
    expect(makeScenarios(3, 2, 7).every((scenario) => scenario.word.length === 7)).toBe(true);
  });

  it('rewards exact answers with 1 and partial ones by the fraction of right positions over the longer length', () => {
    const scenario = scenarioOf('word');
    expect(reward(scenario, 'WORD')).toBe(1);
    expect(reward(scenario, '  WORD\n')).toBe(1);
    expect(reward(scenario, 'WOxD')).toBe(0.75);
    expect(reward(scenario, 'WORDS')).toBe(0.8);
    expect(reward(scenario, 'WO')).toBe(0.5);
    expect(reward(scenario, 'word')).toBe(0);
    expect(reward(scenario, null)).toBe(0);
  });

  it('scores the fraction of capital letters for capitalsReward', () => {
    expect(capitalsReward('ABcd')).toBe(0.5);
    expect(capitalsReward('ÉA')).toBe(0.5);
    expect(capitalsReward('')).toBe(0);
    expect(capitalsReward(undefined)).toBe(0);
  });

  it('builds SFT rows with the answer as the assistant turn', () => {
    expect(sftRows([scenarioOf('cat')])).toEqual([
      {
        messages: [
          { role: 'user', content: 'cat' },
          { role: 'assistant', content: 'CAT' },
        ],
      },
    ]);
  });
});
