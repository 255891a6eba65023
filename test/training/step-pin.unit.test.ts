/**
 * `pinnableFetch`, which `model.fetch()` uses: inside an RL trainer's pin, a framework's chat
 * completion for the model's latest name goes to the step its rollout is stamped with, and its
 * tokens count toward the trainer's budget; outside a pin nothing changes.
 */
import { describe, expect, it } from 'vitest';
import { pinnableFetch, runWithPinnedSteps } from '../../src/training/step-pin.js';

const URL_ = 'http://127.0.0.1:1/v1/chat/completions';
const LATEST = 'wandb-artifact:///local/p/agent';

/** A fetch that answers every request with usage 7 and remembers each body's model. */
function recordingFetch(models: unknown[]): typeof fetch {
  return async (_input, init) => {
    models.push(JSON.parse(String(init?.body)).model);
    return new Response(JSON.stringify({ choices: [], usage: { total_tokens: 7 } }), {
      headers: { 'content-type': 'application/json' },
    });
  };
}

const post = (pinned: typeof fetch, model: string, extra: Record<string, unknown> = {}) =>
  pinned(URL_, { method: 'POST', body: JSON.stringify({ model, messages: [], ...extra }) });

describe('pinnableFetch', () => {
  it("sends the latest name's requests for the pinned step and counts their tokens, inside a pin only", async () => {
    const models: unknown[] = [];
    const pinned = pinnableFetch(recordingFetch(models));
    const tokens: number[] = [];
    // Resolves once the pin's token counter heard of a completion (it reads a copy of the answer).
    const settled = new Promise<void>((resolve) => {
      const scope = {
        routes: new Map([[LATEST, { step: 3 }]]),
        onTokens: (count: number) => {
          tokens.push(count);
          resolve();
        },
      };
      void runWithPinnedSteps(scope, async () => {
        const answer = await post(pinned, LATEST);
        expect(await answer.json()).toEqual({ choices: [], usage: { total_tokens: 7 } }); // the caller's body is intact
        await post(pinned, 'other-model');
      });
    });
    await settled;
    await post(pinned, LATEST); // outside the pin
    expect(models).toEqual([`${LATEST}:step3`, 'other-model', LATEST]);
    expect(tokens[0]).toBe(7);
  });
});
