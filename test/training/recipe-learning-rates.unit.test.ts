/**
 * The learning-rate choice the guides tell a user to copy (docs/recipes.md, docs/hosted.md), run
 * as written on each backend: the local engine's rate only on `LocalBackend`, and each other
 * backend's own default (Tinker's 1e-4, the hosted service's own) elsewhere. A snippet that tests
 * `kind === 'hosted'` would hand a `TinkerBackend` the local 5e-3 and fail here.
 */
import { readFileSync } from 'node:fs';
import { HostedBackend, linearDecay, LocalBackend, TinkerBackend } from 'policyloop';
import type { Backend } from 'policyloop';
import { describe, expect, it } from 'vitest';
import { TINKER_DEFAULT_LEARNING_RATE } from '../../src/backends/tinker-backend.js';

/** Every expression starting at `backend.kind` in the TypeScript blocks of a guide, to its end (`,` `)` `;` at depth 0). */
function kindChoices(file: string): string[] {
  const blocks = [...readFileSync(file, 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? '');
  const choices: string[] = [];
  for (const code of blocks) {
    for (let start = code.indexOf('backend.kind'); start >= 0; start = code.indexOf('backend.kind', start + 1)) {
      let depth = 0;
      let end = start;
      for (; end < code.length; end += 1) {
        const char = code[end] as string;
        if ('({['.includes(char)) depth += 1;
        else if (')}]'.includes(char)) {
          if (depth === 0) break;
          depth -= 1;
        } else if ((char === ',' || char === ';' || char === '\n') && depth === 0) break;
      }
      choices.push(code.slice(start, end).trim());
    }
  }
  return choices;
}

/** The rate of the first step a backend trains with when the snippet chose `choice` for it. */
async function firstRate(choice: string, backend: Backend): Promise<number | null> {
  const chosen = new Function('backend', 'linearDecay', `return (${choice});`)(backend, linearDecay) as unknown;
  const rate =
    typeof chosen === 'object' && chosen !== null && 'learningRate' in chosen
      ? (chosen as { learningRate: unknown }).learningRate
      : chosen;
  if (typeof rate === 'function')
    return (rate as (step: number, run: { maxSteps: number }) => number)(0, { maxSteps: 15 });
  if (typeof rate === 'number') return rate;
  // None sent: the backend's own default.
  return backend.defaultLearningRate();
}

const backends = {
  local: new LocalBackend(),
  hosted: new HostedBackend({ apiKey: 'test-key' }),
  tinker: new TinkerBackend({ baseURL: 'http://127.0.0.1:9' }),
};

describe.each(['docs/recipes.md', 'docs/hosted.md'])('the learning rate %s chooses by backend', (file) => {
  const choices = kindChoices(file);

  it('has a choice to test, made on the local kind', () => {
    expect(choices.length).toBeGreaterThan(0);
    for (const choice of choices) expect(choice).toMatch(/^backend\.kind === 'local' \?/);
  });

  it('gives a TinkerBackend Tinker’s default, the hosted backend the service’s, the local backend 5e-3', async () => {
    for (const choice of choices) {
      expect(await firstRate(choice, backends.tinker), choice).toBe(TINKER_DEFAULT_LEARNING_RATE);
      expect(await firstRate(choice, backends.hosted), choice).toBeNull();
      expect(await firstRate(choice, backends.local), choice).toBe(5e-3);
    }
  });
});
