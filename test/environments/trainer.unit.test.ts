/**
 * `RLTrainer` on an environment, in the fast tier: the local service over a scripted engine
 * (`ScriptedBackend`). The environment gives the scenarios (cycled epoch after epoch), the rollout
 * (the default loop), the rubric and the validation tasks; explicit options win; the environment
 * is started when a run starts and closed when it ends, failures and aborts included. What is
 * checked is what a user sees: the history rows, the requests the engine got, the events.
 */
import {
  APIUserAbortError,
  defineEnvironment,
  InvalidArgumentError,
  RLTrainer,
  TrainableModel,
  finalAssistantText,
  type PromptTask,
} from 'policyloop';
import { ScriptedBackend } from 'policyloop/testing';
import type { StartedToolSource, ToolSource } from 'policyloop/training';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let backend: ScriptedBackend;
let models = 0;

beforeAll(async () => {
  // Alternate answers within a group, so every group has a learning signal.
  backend = await ScriptedBackend.start({ sample: (request) => (request.repeat % 2 === 0 ? 'yes' : 'no way') });
});
afterAll(async () => {
  await backend?.close();
});

async function freshModel(): Promise<TrainableModel> {
  models += 1;
  return new TrainableModel({ project: 'env', name: `trainer-${models}`, baseModel: 'policyloop/tiny-chat' }).register(
    backend,
  );
}

/** A tool source that counts its starts and closes (and offers no tool). */
function countingSource(): ToolSource & { starts: number; closes: number } {
  const source = {
    kind: 'tool-source' as const,
    name: 'counting',
    starts: 0,
    closes: 0,
    start(): Promise<StartedToolSource> {
      source.starts += 1;
      return Promise.resolve({
        name: 'counting',
        definitions: [],
        open: () =>
          Promise.resolve({
            definitions: [],
            call: () => Promise.reject(new Error('no tools')),
            close: () => Promise.resolve(),
          }),
        close: () => {
          source.closes += 1;
          return Promise.resolve();
        },
      });
    },
  };
  return source;
}

const TASKS: PromptTask[] = ['a', 'b', 'c'].map((letter) => ({ prompt: `task ${letter}`, answer: 'yes' }));
const HELD_OUT: PromptTask[] = [
  { prompt: 'held out 1', answer: 'yes' },
  { prompt: 'held out 2', answer: 'yes' },
];

function environmentWith(source: ToolSource, extra: { evalDataset?: PromptTask[] } = {}) {
  return defineEnvironment({
    name: 'yes-env',
    dataset: TASKS,
    ...extra,
    tools: [source],
    reward: {
      correct: (trajectory, task) => (finalAssistantText(trajectory) === task.answer ? 1 : 0),
      length: { fn: (trajectory) => finalAssistantText(trajectory).length, weight: 0 },
    },
  });
}

/** The user prompts the engine got for `model`, in order. */
function promptsOf(model: TrainableModel): string[] {
  return backend.samples
    .filter((sample) => sample.body.model.startsWith(model.inferenceName()))
    .map((sample) => String((sample.body.messages.at(-1) as { content?: unknown }).content));
}

describe('RLTrainer on an environment', () => {
  it('trains on its dataset (cycled), rollout and rubric; validates on its evalDataset; each rubric mean in the rows', async () => {
    const source = countingSource();
    const environment = environmentWith(source, { evalDataset: HELD_OUT });
    const model = await freshModel();
    const trainer = new RLTrainer({
      model,
      environment,
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 2,
      maxStepsOffPolicy: 0,
      progress: false,
    });
    const summary = await trainer.run({ signal: AbortSignal.timeout(30_000) });
    expect(summary).toMatchObject({ step: 2, stopReason: 'max_steps' });
    expect([source.starts, source.closes]).toEqual([1, 1]);

    // The train tasks epoch after epoch (a, b | c, a), the held-out ones at step 0 only (every 10).
    const prompts = promptsOf(model);
    expect(prompts.filter((prompt) => prompt.startsWith('task'))).toEqual([
      'task a',
      'task a',
      'task b',
      'task b',
      'task c',
      'task c',
      'task a',
      'task a',
    ]);
    expect(prompts.filter((prompt) => prompt.startsWith('held out'))).toEqual(['held out 1', 'held out 2']);

    const rows = await model.history();
    const trainRows = rows.filter((row) => typeof row['train/loss'] === 'number');
    expect(trainRows).toHaveLength(2);
    for (const row of trainRows) {
      // Rollouts answer 'yes' (3 characters, correct) and 'no way' (6, wrong) in turn.
      expect(row['train/correct']).toBe(0.5);
      expect(row['train/length']).toBe(4.5);
      expect(row['train/reward']).toBe(0.5);
      expect(row['train/num_turns']).toBe(1);
      expect(row['train/tool_calls']).toBe(0);
    }
    const validation = rows.find((row) => typeof row['val/reward'] === 'number');
    expect(validation).toMatchObject({ training_step: 0, 'val/correct': 1, 'val/length': 3 });
    await model.close();
  });

  it('lets explicit options win: scenarios, reward, and validation: false', async () => {
    const source = countingSource();
    const environment = environmentWith(source, { evalDataset: HELD_OUT });
    const model = await freshModel();
    const trainer = new RLTrainer({
      model,
      environment,
      scenarios: [{ prompt: 'mine', answer: 'yes' }],
      reward: (trajectory) => finalAssistantText(trajectory).length,
      validation: false,
      groupSize: 2,
      groupsPerStep: 1,
      maxSteps: 1,
      maxStepsOffPolicy: 0,
      progress: false,
    });
    await trainer.run({ signal: AbortSignal.timeout(30_000) });
    expect(promptsOf(model)).toEqual(['mine', 'mine']);
    const rows = await model.history();
    expect(rows.some((row) => Object.keys(row).some((name) => name.startsWith('val/')))).toBe(false);
    expect(rows.find((row) => typeof row['train/loss'] === 'number')?.['train/reward']).toBe(4.5);
    expect(source.closes).toBe(1);
    await model.close();
  });

  it('validates on the environment when validation only says how often', async () => {
    const environment = environmentWith(countingSource()); // no evalDataset: validation is off by default
    const model = await freshModel();
    await new RLTrainer({
      model,
      environment,
      validation: { every: 1 },
      groupSize: 2,
      groupsPerStep: 1,
      maxSteps: 1,
      maxStepsOffPolicy: 0,
      progress: false,
    }).run({ signal: AbortSignal.timeout(30_000) });
    // Validation on evalDataset(), which is the dataset here: at step 0 and step 1.
    const rows = (await model.history()).filter((row) => typeof row['val/reward'] === 'number');
    expect(rows.map((row) => row.training_step)).toEqual([0, 1]);
    await model.close();
  });

  it('closes the environment when the run is aborted', async () => {
    const source = countingSource();
    const environment = environmentWith(source);
    const model = await freshModel();
    const controller = new AbortController();
    const trainer = new RLTrainer({ model, environment, groupSize: 2, groupsPerStep: 1, maxSteps: 5, progress: false });
    trainer.on('step:end', () => controller.abort());
    await expect(trainer.run({ signal: controller.signal })).rejects.toBeInstanceOf(APIUserAbortError);
    expect([source.starts, source.closes]).toEqual([1, 1]);
    await model.close();
  });

  it('refuses a trainer without scenarios or rollout when no environment gives them', async () => {
    const model = await freshModel();
    expect(() => new RLTrainer({ model, rollout: async () => undefined, maxSteps: 1 } as never)).toThrow(
      /^Expected `scenarios` to be a non-empty array, an iterable or an async iterable of scenarios \(or an `environment` that gives them\), got undefined$/,
    );
    expect(() => new RLTrainer({ model, scenarios: ['a'], maxSteps: 1 } as never)).toThrow(InvalidArgumentError);
    expect(
      () =>
        new RLTrainer({
          model,
          scenarios: ['a'],
          rollout: async () => undefined,
          maxSteps: 1,
          validation: { every: 2 },
        }),
    ).toThrow(/`validation\.scenarios`/);
    expect(() => new RLTrainer({ model, environment: { name: 'x' } as never, maxSteps: 1 })).toThrow(
      /^Expected `environment` to be an environment \(from defineEnvironment or loadEnvironment\)/,
    );
    await model.close();
  });
});
