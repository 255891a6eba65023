/**
 * The demo task: "uppercase this word". The prompt is a short lowercase word; the answer is the
 * same word in capitals. The reward is verifiable and dense (the fraction of characters right),
 * which lets a tiny byte-level model climb it with RL in minutes on a CPU.
 *
 * @example
 * const [scenario] = makeScenarios(1, 1);
 * reward(scenario, 'CAT'); // 1 when scenario.word is "cat"
 */

/** One prompt of the task. */
export interface UppercaseScenario {
  /** The lowercase word to uppercase. */
  readonly word: string;
  /** The expected answer (the word in capitals). */
  readonly answer: string;
  /** The chat messages to send. */
  readonly messages: readonly [{ readonly role: 'user'; readonly content: string }];
}

/** Letters the words are made of. */
export const ALPHABET = 'abcdefghijklmnopqrstuvwxyz';

/** Length of every word: fixed, so the answer's characters sit at fixed offsets from the word's. */
export const WORD_LENGTH = 4;

function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The scenario of one word. */
export function scenarioOf(word: string): UppercaseScenario {
  return { word, answer: word.toUpperCase(), messages: [{ role: 'user', content: word }] };
}

/**
 * `count` scenarios of random lowercase words, deterministic in `seed`. Different seeds give
 * (almost surely) different words, so a validation set is `makeScenarios(otherSeed, n)`.
 * @param length word length (default {@link WORD_LENGTH}).
 */
export function makeScenarios(seed: number, count: number, length: number = WORD_LENGTH): UppercaseScenario[] {
  const random = mulberry32(seed * 7919 + 17);
  return Array.from({ length: count }, () => {
    let word = '';
    for (let index = 0; index < length; index += 1) word += ALPHABET[Math.floor(random() * ALPHABET.length)];
    return scenarioOf(word);
  });
}

/**
 * The reward of an answer: 1 for an exact match, otherwise the fraction of positions whose
 * character is right, over the longer of answer and expected answer (so extra or missing
 * characters cost). Leading and trailing whitespace is ignored.
 */
export function reward(scenario: UppercaseScenario, completion: string | null | undefined): number {
  const text = (completion ?? '').trim();
  const expected = scenario.answer;
  if (text === expected) return 1;
  const longest = Math.max(text.length, expected.length);
  if (longest === 0) return 0;
  let right = 0;
  for (let index = 0; index < Math.min(text.length, expected.length); index += 1)
    if (text[index] === expected[index]) right += 1;
  return right / longest;
}

/** SFT rows (`{messages}` with the answer as the assistant turn) for the given scenarios. */
export function sftRows(
  scenarios: readonly UppercaseScenario[],
): { messages: ({ role: 'user'; content: string } | { role: 'assistant'; content: string })[] }[] {
  return scenarios.map((scenario) => ({
    messages: [...scenario.messages, { role: 'assistant', content: scenario.answer }],
  }));
}

/**
 * A second, simpler verifiable reward used to show that RL moves a fresh (random) model: the
 * fraction of the completion's characters that are capital letters A-Z (0 for an empty one).
 * A fresh model scores about 0.1 on it.
 */
export function capitalsReward(completion: string | null | undefined): number {
  const text = completion ?? '';
  if (text.length === 0) return 0;
  let capitals = 0;
  for (const character of text) if (character >= 'A' && character <= 'Z') capitals += 1;
  return capitals / [...text].length;
}
