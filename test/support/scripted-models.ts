/**
 * Models registered on a `ScriptedBackend` (whose engine answers 'yes' or 'no' and trains at
 * once), closed after each test, and one group of those two answers with rewards 1 and 0: what the
 * tests of training parameters (losses, objective keys) train on.
 */
import { TrainableModel } from 'policyloop';
import { makeChoice, makeGroup, ScriptedBackend } from 'policyloop/testing';
import { afterEach } from 'vitest';

/**
 * A `registered(name)` that starts a scripted backend and registers `project/name` on it; both are
 * closed after each test of the file that calls this (at its top level).
 */
export function scriptedModels(project: string) {
  const opened: { close(): Promise<unknown> }[] = [];
  afterEach(async () => {
    for (const item of opened.splice(0).reverse()) await item.close();
  });
  return async function registered(name: string) {
    const backend = await ScriptedBackend.start({ sample: ['yes', 'no'] });
    const model = await new TrainableModel({ project, name, baseModel: 'policyloop/tiny-chat' }).register(backend);
    opened.push(backend, model);
    return { backend, model };
  };
}

/** One group: 'yes' rewarded 1, 'no' rewarded 0, both with logprobs. */
export const yesNoGroups = [
  makeGroup([
    { user: 'q', answer: makeChoice('yes', { logprobs: true }), reward: 1 },
    { user: 'q', answer: makeChoice('no', { logprobs: true }), reward: 0 },
  ]),
];
