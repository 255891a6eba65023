/**
 * The trainer's two loops in the fast tier: `RLTrainer` runs against `ScriptedBackend` (the real
 * local service in this process, its engine answering from a script and training at once), so
 * each step costs milliseconds while everything above the engine (model, jobs, history, pins,
 * retention) is the real code. What is checked is what a user sees: the summary, the events,
 * `model.history()`, and what reached the service's engine (each job's step, groups, learning
 * rate; each completion's checkpoint).
 */
import {
  APIUserAbortError,
  ExceptionBudgetExceededError,
  linearDecay,
  NoLearningSignalError,
  PromptedModel,
  RLTrainer,
  TrainingTimeoutError,
} from 'policyloop';
import { ScriptedBackend } from 'policyloop/testing';
import type { RLTrainerOptions } from 'policyloop/training';
import type { TrainableModel } from 'policyloop';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  chatRollout,
  freshModel,
  jobsOf,
  recorded,
  run,
  sampledSteps,
  samplesOf,
  stepsWith,
} from './support/scripted-trainer.js';

const WORDS = ['cat', 'dog', 'sun', 'map', 'owl', 'bee', 'fig', 'ink'];
let backend: ScriptedBackend;
/** Requests to the service not answered yet. */
let inFlight = 0;

beforeAll(async () => {
  backend = await ScriptedBackend.start({
    // The "policy" answers `yes` at step 2 only: validation rewards it (see 'validation and retention').
    sample: (request) => (request.step === 2 ? 'yes' : 'no'),
    intercept: async (request, next) => {
      inFlight += 1;
      try {
        return await next(request);
      } finally {
        inFlight -= 1;
      }
    },
  });
});
afterAll(async () => {
  await backend?.close();
});

/**
 * The trainer most tests use: the words as scenarios, one chat completion per rollout (rewards 0,
 * 1 by index), groups of two, two groups a step, no progress line; `options` add or override.
 */
function wordTrainer(
  model: TrainableModel,
  options: Partial<RLTrainerOptions<string>> & Pick<RLTrainerOptions<string>, 'maxSteps'>,
): RLTrainer<string> {
  return new RLTrainer({
    model,
    scenarios: WORDS,
    rollout: chatRollout(model),
    groupSize: 2,
    groupsPerStep: 2,
    progress: false,
    ...options,
  });
}

describe('the synchronous loop (maxStepsOffPolicy 0)', () => {
  it('trains to maxSteps, each batch sampled from the step it trains, one train/* row per step', async () => {
    const model = await freshModel(backend);
    const trainer = wordTrainer(model, {
      maxSteps: 4,
      maxStepsOffPolicy: 0,
    });
    const starts = recorded(trainer, 'step:start');
    const ends = recorded(trainer, 'step:end');
    const summary = await run(trainer);

    expect(summary).toMatchObject({ step: 4, startStep: 0, stopReason: 'max_steps' });
    expect(summary.totals).toMatchObject({ steps: 4, rollouts: 16, droppedStale: 0, failedRollouts: 0 });
    expect(await model.getStep()).toBe(4);
    const jobs = jobsOf(backend, model);
    expect(jobs.map((job) => job.step)).toEqual([0, 1, 2, 3]);
    expect(jobs.map(sampledSteps)).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    expect(starts.map(({ step, sampledStep }) => [step, sampledStep])).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    // The rollouts' requests reached the checkpoint they were stamped with.
    expect(samplesOf(backend, model).map((sample) => sample.step)).toEqual([
      0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
    ]);
    expect(ends.map((event) => event.step)).toEqual([0, 1, 2, 3]);
    expect(ends[0]?.metrics).toMatchObject({ 'train/reward': 0.5, 'train/loss': 1, 'rollouts/failed': 0 });
    const rows = (await model.history()).filter((row) => typeof row['train/reward'] === 'number');
    expect(rows.map((row) => [row.training_step, row['train/loss']])).toEqual([
      [0, 1],
      [1, 1 / 2],
      [2, 1 / 3],
      [3, 1 / 4],
    ]);
    await model.close();
  });
});

describe('the pipelined loop', () => {
  it('with maxStepsOffPolicy 1 samples each next batch while a step trains, never more than one step stale', async () => {
    const model = await freshModel(backend);
    const trainer = wordTrainer(model, {
      maxSteps: 5,
      maxStepsOffPolicy: 1,
    });
    const starts = recorded(trainer, 'step:start');
    const ends = recorded(trainer, 'step:end');
    const summary = await run(trainer);

    expect(summary).toMatchObject({ step: 5, stopReason: 'max_steps', totals: { steps: 5, droppedStale: 0 } });
    // Two batches start from the base model; from then on the batch of step s was sampled at s - 1.
    expect(starts.map(({ step, sampledStep }) => [step, sampledStep])).toEqual([
      [0, 0],
      [1, 0],
      [2, 1],
      [3, 2],
      [4, 3],
    ]);
    expect(ends.map(({ step, sampledStep }) => [step, sampledStep])).toEqual(
      starts.map(({ step, sampledStep }) => [step, sampledStep]),
    );
    const jobs = jobsOf(backend, model);
    expect(jobs.map((job) => [job.step, ...new Set(sampledSteps(job))])).toEqual([
      [0, 0],
      [1, 0],
      [2, 1],
      [3, 2],
      [4, 3],
    ]);
    expect(await stepsWith(model, 'train/')).toEqual([0, 1, 2, 3, 4]);
    await model.close();
  });

  it('with maxStepsOffPolicy 2 runs two steps ahead and no further', async () => {
    const model = await freshModel(backend);
    const trainer = wordTrainer(model, {
      maxSteps: 6,
      maxStepsOffPolicy: 2,
    });
    const starts = recorded(trainer, 'step:start');
    await run(trainer);
    const lags = starts.map(({ step, sampledStep }) => step - sampledStep);
    expect(Math.max(...lags)).toBe(2);
    for (const job of jobsOf(backend, model)) {
      for (const sampled of sampledSteps(job)) expect(job.step - sampled).toBeLessThanOrEqual(2);
    }
    await model.close();
  });

  it('drops a group sampled more than maxStepsOffPolicy steps before the step it would train', async () => {
    const model = await freshModel(backend);
    const client = model.openai();
    const trainer = new RLTrainer({
      model,
      scenarios: ['fresh', 'old'],
      // The 'old' rollouts report the policy they started on at step 0 (a conversation resumed
      // from then); by step 2 that is two steps old.
      rollout: async (scenario, { index }) => {
        await client.chat.completions.create({
          model: model.inferenceName(),
          messages: [{ role: 'user', content: scenario }],
        });
        return { reward: index % 2, ...(scenario === 'old' ? { initial_policy_version: 0 } : {}) };
      },
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 3,
      maxStepsOffPolicy: 1,
    });
    const dropped = recorded(trainer, 'groups:dropped');
    const summary = await run(trainer);
    expect(summary.totals.droppedStale).toBe(1);
    expect(dropped).toEqual([expect.objectContaining({ reason: 'stale', count: 1, step: 2, groupIndexes: [1] })]);
    // Step 2 trained the fresh group alone; the steps before had both.
    expect(jobsOf(backend, model).map((job) => job.groups.length)).toEqual([2, 2, 1]);
    await model.close();
  });
});

describe('failing rollouts', () => {
  it('retries a rollout that throws once: rollout:failed with willRetry, the step trains every rollout', async () => {
    const model = await freshModel(backend);
    const inner = chatRollout(model);
    const trainer = wordTrainer(model, {
      rollout: async (scenario, context) => {
        if (scenario === 'dog' && context.index === 0 && context.attempt === 0) throw new Error('flaky tool');
        return inner(scenario, context);
      },
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 2,
      gather: { retryDelay: 1 },
    });
    const failures = recorded(trainer, 'rollout:failed');
    const ends = recorded(trainer, 'step:end');
    const summary = await run(trainer);
    expect(failures).toEqual([
      expect.objectContaining({ sampledStep: 0, groupIndex: 1, index: 0, attempt: 0, willRetry: true }),
    ]);
    expect(failures[0]?.error).toEqual(new Error('flaky tool'));
    expect(ends[0]?.metrics).toMatchObject({ 'rollouts/retried': 1, 'rollouts/failed': 0 });
    expect(ends[1]?.metrics).toMatchObject({ 'rollouts/retried': 0, 'rollouts/failed': 0 });
    expect(summary.totals.failedRollouts).toBe(0);
    expect(jobsOf(backend, model)[0]?.groups.map((group) => group.trajectories.length)).toEqual([2, 2]);
    await model.close();
  });

  it('keeps a rollout that fails for good in its group: the group trains on the rest', async () => {
    const model = await freshModel(backend);
    const inner = chatRollout(model);
    const trainer = wordTrainer(model, {
      rollout: async (scenario, context) => {
        if (scenario === 'dog' && context.index === 2) throw new Error('the agent crashed');
        return inner(scenario, context);
      },
      groupSize: 3,
      groupsPerStep: 2,
      maxSteps: 1,
      gather: { retryDelay: 1 },
    });
    const failures = recorded(trainer, 'rollout:failed');
    const ends = recorded(trainer, 'step:end');
    const summary = await run(trainer);
    expect(failures.map(({ attempt, willRetry }) => [attempt, willRetry])).toEqual([
      [0, true],
      [1, false],
    ]);
    expect(ends[0]?.metrics).toMatchObject({ 'rollouts/failed': 1, 'rollouts/retried': 1, 'groups/dropped_failed': 0 });
    expect(summary.totals).toMatchObject({ failedRollouts: 1, droppedFailed: 0, steps: 1 });
    const [cat, dog] = jobsOf(backend, model)[0]?.groups ?? [];
    expect(cat?.trajectories).toHaveLength(3);
    expect(dog?.trajectories).toHaveLength(2);
    expect(dog?.exceptions?.map((exception) => exception.message)).toEqual(['the agent crashed']);
    await model.close();
  });

  it('leaves out a group with fewer than minGroupSize finished rollouts', async () => {
    const model = await freshModel(backend);
    const inner = chatRollout(model);
    const trainer = wordTrainer(model, {
      rollout: async (scenario, context) => {
        if (scenario === 'dog' && context.index === 0) throw new Error('the agent crashed');
        return inner(scenario, context);
      },
      groupSize: 3,
      groupsPerStep: 2,
      minGroupSize: 3,
      maxSteps: 1,
      gather: { maxRetries: 0 },
    });
    const dropped = recorded(trainer, 'groups:dropped');
    const ends = recorded(trainer, 'step:end');
    const summary = await run(trainer);
    expect(dropped).toEqual([
      expect.objectContaining({ reason: 'failed_rollouts', count: 1, step: 0, groupIndexes: [1], minGroupSize: 3 }),
    ]);
    expect(ends[0]?.metrics).toMatchObject({ 'groups/dropped_failed': 1, 'rollouts/failed': 1 });
    expect(summary.totals).toMatchObject({ droppedFailed: 1, failedRollouts: 1 });
    expect(jobsOf(backend, model).map((job) => job.groups.length)).toEqual([1]);
    await model.close();
  });

  it('fails the step when more rollouts fail than gather.maxExceptions allows, training nothing', async () => {
    const model = await freshModel(backend);
    const inner = chatRollout(model);
    const trainer = wordTrainer(model, {
      rollout: async (scenario, context) => {
        if (context.index === 0) throw new Error('the agent crashed');
        return inner(scenario, context);
      },
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 3,
      // Two of four rollouts fail for good; the default budget is a quarter.
      gather: { maxRetries: 0 },
    });
    const error = await run(trainer).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ExceptionBudgetExceededError);
    expect(jobsOf(backend, model)).toEqual([]);
    expect(await model.getStep()).toBe(0);

    // With a budget of two the same batch trains, each group on its rollout that finished.
    const tolerant = wordTrainer(model, {
      rollout: async (scenario, context) => {
        if (context.index === 0) throw new Error('the agent crashed');
        return inner(scenario, context);
      },
      groupSize: 3,
      groupsPerStep: 2,
      maxSteps: 1,
      gather: { maxRetries: 0, maxExceptions: 2 },
    });
    const summary = await run(tolerant);
    expect(summary.totals).toMatchObject({ steps: 1, failedRollouts: 2 });
    await model.close();
  });
});

describe('learning rates', () => {
  it('sends each step the rate of the schedule at that step', async () => {
    const model = await freshModel(backend);
    const schedule = linearDecay({ initial: 4e-3, final: 1e-3, steps: 3 });
    await run(
      wordTrainer(model, {
        maxSteps: 4,
        learningRate: schedule,
        // The trainer's rate wins over `train.learningRate`.
        train: { learningRate: 1 },
      }),
    );
    const rates = jobsOf(backend, model).map((job) => job.learningRate);
    expect(rates).toEqual([0, 1, 2, 3].map((step) => schedule(step, { maxSteps: 4 })));
    expect(rates[0]).toBeCloseTo(4e-3);
    expect(rates[3]).toBeCloseTo(1e-3);
    await model.close();
  });

  it("sends train's parameters with each job and gives its request options to the job's follower", async () => {
    const model = await freshModel(backend);
    let progressCalls = 0;
    await run(
      wordTrainer(model, {
        maxSteps: 2,
        train: { lossFn: 'ppo', config: { kl_penalty_coef: 0.1 } },
        job: { onProgress: () => (progressCalls += 1) },
      }),
    );
    expect(jobsOf(backend, model).map((job) => [job.config?.['loss_fn'], job.config?.['kl_penalty_coef']])).toEqual([
      ['ppo', 0.1],
      ['ppo', 0.1],
    ]);
    // Each job's three events (started, one gradient step, ended) reached onProgress.
    expect(progressCalls).toBe(2 * 3);
    await model.close();
  });

  it('without a trainer rate, sends train.learningRate, else the backend default (none here)', async () => {
    const model = await freshModel(backend);
    const options = { model, scenarios: WORDS, rollout: chatRollout(model), groupSize: 2, groupsPerStep: 2 };
    await run(new RLTrainer({ ...options, maxSteps: 1, train: { learningRate: 2e-3 }, progress: false }));
    await run(new RLTrainer({ ...options, maxSteps: 2, progress: false }));
    expect(jobsOf(backend, model).map((job) => job.learningRate)).toEqual([2e-3, null]);
    await model.close();
  });
});

describe('validation and retention', () => {
  // Validation rewards `yes`, which the script answers at step 2 only: val/reward is 1 at step 2
  // and 0 at the others. Training rollouts ('train on ...') are rewarded by index, as elsewhere.
  const validating = (model: Awaited<ReturnType<typeof freshModel>>) =>
    chatRollout(model, ({ scenario, text, index }) =>
      scenario.startsWith('train on') ? index % 2 : text === 'yes' ? 1 : 0,
    );

  it('validates at the start and every `every` steps, scores baselines once, and keeps best and latest', async () => {
    const model = await freshModel(backend);
    const { baseURL, apiKey, fetch, client } = await backend.connect();
    const baseline = new PromptedModel({
      project: 'loops',
      name: 'baseline',
      model: 'policyloop/tiny-chat',
      baseURL,
      apiKey,
      fetch,
      dataDir: backend.dataDir,
    });
    const trainer = new RLTrainer({
      model,
      scenarios: WORDS.map((word) => `train on ${word}`),
      rollout: validating(model),
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 4,
      validation: { scenarios: WORDS.slice(0, 2), every: 2, groupSize: 2, baselines: [baseline] },
      keep: { best: true, latest: true },
    });
    const validations = recorded(trainer, 'validation:end');
    const summary = await run(trainer);

    const rows = (await model.history()).filter((row) => typeof row['val/reward'] === 'number');
    expect(rows.map((row) => [row.training_step, row['val/reward']]).sort()).toEqual([
      [0, 0],
      [2, 1],
      [4, 0],
    ]);
    expect(validations.map(({ step, model: name }) => `${name}@${step}`).sort()).toEqual(
      [`${model.name}@0`, `${model.name}@2`, `${model.name}@4`, 'baseline@0'].sort(),
    );
    const baselineRows = await baseline.history();
    expect(baselineRows).toEqual([expect.objectContaining({ training_step: 0, 'val/reward': 0 })]);
    // Every validation request sampled the checkpoint it validates; the baseline's, the base model.
    const validationSteps = samplesOf(backend, model)
      .filter((sample) => sample.body.messages[0]?.content === WORDS[0])
      .map((sample) => sample.step);
    expect(validationSteps.sort()).toEqual([0, 0, 2, 2, 4, 4]);
    const baselineSamples = backend.samples.filter((sample) => sample.body.model === 'policyloop/tiny-chat');
    expect(baselineSamples.map((sample) => sample.step)).toEqual([0, 0, 0, 0]);
    // Retention: the best by val/reward (step 2) and the latest are left.
    const checkpoints = (await client.checkpoints.list(model.id)).data.map((checkpoint) => checkpoint.step);
    expect(checkpoints.sort()).toEqual([2, 4]);
    expect(summary).toMatchObject({ bestStep: 2, bestMetric: 1, metric: 'val/reward' });
    await model.close();
  });

  it('with keep.latest false deletes the latest checkpoint at the end when it is not the best', async () => {
    const model = await freshModel(backend);
    const { client } = await backend.connect();
    await run(
      new RLTrainer({
        model,
        scenarios: WORDS.map((word) => `train on ${word}`),
        rollout: validating(model),
        groupSize: 2,
        groupsPerStep: 2,
        maxSteps: 3,
        validation: { scenarios: WORDS.slice(0, 2), every: 1 },
        keep: { best: true, latest: false },
      }),
    );
    const checkpoints = (await client.checkpoints.list(model.id)).data.map((checkpoint) => checkpoint.step);
    expect(checkpoints).toEqual([2]);
    await model.close();
  });
});

describe('retention as the run goes', () => {
  it('after each step deletes what keep does not keep, validated or not', async () => {
    // Validation every 3 steps; the script answers `yes` at step 3 only, so step 3 is the best.
    // Listed by the job of each step: the checkpoints left when that step trains.
    const listed = new Map<number, number[]>();
    let validated = (): void => undefined;
    const stepThreeValidated = new Promise<void>((resolve) => {
      validated = resolve;
    });
    const pruning: ScriptedBackend = await ScriptedBackend.start({
      sample: (request) => (request.step === 3 ? 'yes' : 'no'),
      train: async (job) => {
        // Step 4 trains once step 3's val/reward is known, so that it is the best from then on.
        if (job.step === 4) await stepThreeValidated;
        const { client } = await pruning.connect();
        listed.set(
          job.step,
          (await client.checkpoints.list(job.modelId)).data.map((checkpoint) => checkpoint.step),
        );
      },
    });
    try {
      const model = await freshModel(pruning);
      const trainer = new RLTrainer({
        model,
        scenarios: WORDS.map((word) => `train on ${word}`),
        rollout: chatRollout(model, ({ scenario, text, index }) =>
          scenario.startsWith('train on') ? index % 2 : text === 'yes' ? 1 : 0,
        ),
        groupSize: 2,
        groupsPerStep: 2,
        maxSteps: 6,
        maxStepsOffPolicy: 0,
        validation: { scenarios: WORDS.slice(0, 2), every: 3 },
        keep: { best: true, latest: true },
      });
      trainer.on('validation:end', ({ step }) => {
        if (step === 3) validated();
      });
      await run(trainer);
      // After step 4 (checkpoint 5), which no validation follows: only the best (3) and the latest.
      expect(listed.get(5)).toEqual([3, 5]);
      const { client } = await pruning.connect();
      expect((await client.checkpoints.list(model.id)).data.map((checkpoint) => checkpoint.step)).toEqual([3, 6]);
      await model.close();
    } finally {
      validated();
      await pruning.close();
    }
  });
});

describe('resuming', () => {
  it('after an abort, a second run continues from the model step: every step trained once, one row each', async () => {
    const model = await freshModel(backend);
    const controller = new AbortController();
    const options = {
      model,
      scenarios: WORDS,
      rollout: chatRollout(model),
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 5,
    };
    const first = new RLTrainer(options);
    first.on('step:start', ({ step }) => {
      if (step === 2) controller.abort(new Error('Ctrl-C'));
    });
    const error = await run(first, controller.signal).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toEqual(new Error('Ctrl-C'));
    // Nothing is left running: the rollouts launched ahead were stopped and waited for.
    expect(inFlight).toBe(0);
    // The job under way when the abort came finished, and its step was recorded.
    expect(await model.getStep()).toBe(3);

    const summary = await run(new RLTrainer(options));
    expect(summary).toMatchObject({ startStep: 3, step: 5, totals: { steps: 2 } });
    expect(jobsOf(backend, model).map((job) => job.step)).toEqual([0, 1, 2, 3, 4]);
    expect(await stepsWith(model, 'train/')).toEqual([0, 1, 2, 3, 4]);
    await model.close();
  });

  it('after a run that stopped waiting for its job, the next run finishes that step once and goes on', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // Its own backend: the job of step 1 waits until released, as a slow job on a busy service.
    const slow = await ScriptedBackend.start({ train: async (job) => (job.step === 1 ? held : undefined) });
    try {
      const model = await freshModel(slow);
      const options = { model, scenarios: WORDS, rollout: chatRollout(model), groupSize: 2, groupsPerStep: 2 };
      const first = new RLTrainer({ ...options, maxSteps: 3, job: { timeout: 200 }, progress: false });
      const error = await run(first).catch((caught: unknown) => caught);
      // The process gave up on the job (as a crash would); the service still runs it.
      expect(error).toBeInstanceOf(TrainingTimeoutError);
      expect(await model.getStep()).toBe(1);
      release();

      const summary = await run(new RLTrainer({ ...options, maxSteps: 3, progress: false }));
      expect(summary).toMatchObject({ startStep: 2, step: 3 });
      expect(jobsOf(slow, model).map((job) => job.step)).toEqual([0, 1, 2]);
      expect(await stepsWith(model, 'train/')).toEqual([0, 1, 2]);
      await model.close();
    } finally {
      release();
      await slow.close();
    }
  });
});

describe('stopping', () => {
  it('stops at a step budget and at a token budget, naming the reason', async () => {
    const model = await freshModel(backend);
    const options = {
      model,
      scenarios: WORDS,
      rollout: chatRollout(model),
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 100,
    };
    const bySteps = await run(new RLTrainer({ ...options, budget: { steps: 2 } }));
    expect(bySteps).toMatchObject({ step: 2, stopReason: 'budget_steps', totals: { steps: 2 } });
    const byTokens = await run(new RLTrainer({ ...options, budget: { tokens: 1 } }));
    expect(byTokens).toMatchObject({ startStep: 2, step: 3, stopReason: 'budget_tokens', totals: { steps: 1 } });
    expect(byTokens.totals.tokens).toBeGreaterThan(0);
    expect(jobsOf(backend, model)).toHaveLength(3);
    await model.close();
  });

  it('stops at a wall-time budget', async () => {
    const model = await freshModel(backend);
    const inner = chatRollout(model);
    const summary = await run(
      wordTrainer(model, {
        rollout: async (scenario, context) => {
          await new Promise((resolve) => setTimeout(resolve, 20));
          return inner(scenario, context);
        },
        groupSize: 2,
        groupsPerStep: 2,
        maxSteps: 1_000,
        budget: { seconds: 0.05 },
      }),
    );
    expect(summary.stopReason).toBe('budget_seconds');
    expect(summary.step).toBeLessThan(1_000);
    await model.close();
  });

  it.each([0, 1])(
    'reads an async iterable of scenarios once and stops when it runs out (maxStepsOffPolicy %i)',
    async (maxStepsOffPolicy) => {
      const model = await freshModel(backend);
      async function* words(): AsyncGenerator<string> {
        yield* WORDS.slice(0, 6);
      }
      const summary = await run(
        new RLTrainer({
          model,
          scenarios: words(),
          rollout: chatRollout(model),
          groupSize: 2,
          groupsPerStep: 2,
          maxSteps: 10,
          maxStepsOffPolicy,
        }),
      );
      expect(summary).toMatchObject({ step: 3, stopReason: 'scenarios_exhausted', totals: { steps: 3, rollouts: 12 } });
      expect(jobsOf(backend, model).flatMap((job) => job.groups.map((group) => group.trajectories.length))).toEqual([
        2, 2, 2, 2, 2, 2,
      ]);
      await model.close();
    },
  );
});

describe('groups without a learning signal', () => {
  it('trains only the groups whose rewards differ, and skips a batch that has none', async () => {
    const model = await freshModel(backend);
    const trainer = new RLTrainer({
      model,
      // A batch of two flat groups first, then one flat and one varied.
      scenarios: ['flat 1', 'flat 2', 'flat 3', 'varied'],
      rollout: chatRollout(model, ({ scenario, index }) => (scenario.startsWith('flat') ? 0.5 : index % 2)),
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 1,
      maxStepsOffPolicy: 0,
    });
    const dropped = recorded(trainer, 'groups:dropped');
    const ends = recorded(trainer, 'step:end');
    const summary = await run(trainer);
    expect(summary.totals).toMatchObject({ steps: 1, skippedBatches: 1, droppedZeroVariance: 3 });
    expect(dropped.map(({ reason, count, step }) => [reason, count, step])).toEqual([
      ['zero_variance', 2, 0],
      ['zero_variance', 1, 0],
    ]);
    expect(jobsOf(backend, model).map((job) => job.groups.length)).toEqual([1]);
    expect(ends[0]?.metrics['train/frac_reward_zero_std']).toBe(0.5);
    await model.close();
  });

  it('stops with NoLearningSignalError after collapseAfter equal-reward groups in a row, training nothing', async () => {
    const model = await freshModel(backend);
    const trainer = wordTrainer(model, {
      rollout: chatRollout(model, () => 0.5),
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 5,
      collapseAfter: 3,
    });
    const error = await run(trainer).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NoLearningSignalError);
    expect((error as Error).message).toMatch(/the last 3 groups/);
    expect(inFlight).toBe(0);
    expect(jobsOf(backend, model)).toEqual([]);
    expect(await model.getStep()).toBe(0);
    await model.close();
  });

  it('stops the same way when every group loses too many rollouts, instead of sampling forever', async () => {
    const model = await freshModel(backend);
    const rollout = chatRollout(model);
    const trainer = wordTrainer(model, {
      // The first rollout of every group throws: each group keeps one of two, under minGroupSize 2,
      // while the batch stays within its exception budget.
      rollout: async (scenario, context) => {
        if (context.index === 0) throw new Error(`the agent crashed on ${scenario}`);
        return rollout(scenario, context);
      },
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 3,
      collapseAfter: 4,
      gather: { maxRetries: 0, maxExceptions: 0.5 },
    });
    const dropped: number[] = [];
    trainer.on('groups:dropped', (event) => dropped.push(event.count));
    const error = await run(trainer).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NoLearningSignalError);
    expect(error).toMatchObject({ groups: 4, failedGroups: 4, step: 0 });
    expect((error as Error).message).toMatch(/fewer than `minGroupSize` rollouts finish/);
    expect(dropped).toEqual([2, 2]);
    expect(jobsOf(backend, model)).toEqual([]);
    await model.close();
  });
});
