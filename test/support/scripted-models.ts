/**
 * Models registered on a `ScriptedBackend` (whose engine answers 'yes' or 'no' and trains at
 * once), closed after each test, and one group of those two answers with rewards 1 and 0: what the
 * tests of training parameters (losses, objective keys) train on.
 */
import { TrainableModel } from 'policyloop';
import { makeChoice, makeGroup, ScriptedBackend, type ScriptedSampleRequest } from 'policyloop/testing';
import { afterAll, afterEach, beforeAll } from 'vitest';

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

/** What a scripted model answers to a request: text, or a Choice (e.g. with tool calls). */
export type ScriptedAnswer = (request: ScriptedSampleRequest) => string | ReturnType<typeof makeChoice>;

/**
 * One `ScriptedBackend` for a test file (started before its tests, closed after), answering with
 * whatever `script` is set to when a request comes, and `freshModel()` registering a new model
 * (`project/prefix-N`) on it for each test.
 */
export function scriptedTurns(project: string, prefix: string) {
  let started: ScriptedBackend | undefined;
  let models = 0;
  const turns = {
    script: (() => 'unset') as ScriptedAnswer,
    /** The file's backend (its `samples` are every request it answered). */
    get backend(): ScriptedBackend {
      if (started === undefined) throw new Error('the scripted backend starts in beforeAll');
      return started;
    },
    /** A new model registered on the backend. */
    freshModel(): Promise<TrainableModel> {
      models += 1;
      return new TrainableModel({ project, name: `${prefix}-${models}`, baseModel: 'policyloop/tiny-chat' }).register(
        turns.backend,
      );
    },
  };
  beforeAll(async () => {
    started = await ScriptedBackend.start({ sample: (request) => turns.script(request) });
  });
  afterAll(async () => {
    await started?.close();
  });
  return turns;
}
