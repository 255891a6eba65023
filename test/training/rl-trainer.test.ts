/**
 * RLTrainer against the real local service on loopback: learning with the pipeline on, the
 * staleness bound on what reached the training endpoint, collapse, budgets, abort with nothing
 * left in flight, baselines beside the trained model, and a kill -9 mid-job followed by a rerun.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capitalsReward } from '../../examples/tasks/uppercase.js';
import { APIUserAbortError, TrainingClient } from 'policyloop/client';
import { finalAssistantText } from '../../src/rewards/trajectory-text.js';
import type { RolloutFn } from '../../src/rollout/rollout-function.js';
import { startTestService } from 'policyloop/testing';
import type { TestService } from 'policyloop/testing';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { NoLearningSignalError } from '../../src/training/errors.js';
import { PromptedModel } from '../../src/training/prompted-model.js';
import { RLTrainer } from '../../src/training/rl-trainer.js';
import { TrainableModel } from '../../src/training/trainable-model.js';
import type { GroupsDroppedEvent, StepEndEvent, ValidationEndEvent } from 'policyloop/training';

const BASE_MODEL = 'policyloop/tiny-chat';
const WORDS = ['cat', 'dog', 'sun', 'map', 'owl', 'bee', 'fig', 'ink'];
let dataDir: string;
let backend: LocalBackend;
let modelCount = 0;
/** Bodies of the training jobs the service received, and requests not answered yet. */
const jobBodies: {
  trajectory_groups: { trajectories: { initial_policy_version?: number | null }[] }[];
  experimental_config?: Record<string, unknown>;
}[] = [];
let inFlight = 0;

const recordingFetch: typeof globalThis.fetch = async (input, init) => {
  inFlight += 1;
  try {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (init?.method === 'POST' && url.pathname.endsWith('/preview/training-jobs')) {
      jobBodies.push(JSON.parse(String(init.body)));
    }
    return await fetch(input, init);
  } finally {
    inFlight -= 1;
  }
};

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-rl-trainer-'));
  backend = await LocalBackend.start({ dataDir, fetch: recordingFetch });
});

afterAll(async () => {
  await backend?.close();
  await rm(dataDir, { recursive: true, force: true });
});

async function freshModel(): Promise<TrainableModel> {
  modelCount += 1;
  return new TrainableModel({ project: 'trainer', name: `model-${modelCount}`, baseModel: BASE_MODEL }).register(
    backend,
  );
}

/** The quickstart's rollout: one completion of the word, through the model's client. */
function wordRollout(model: TrainableModel): RolloutFn<string> {
  const client = model.openai();
  return async (word) => {
    await client.chat.completions.create({
      model: model.inferenceName(),
      messages: [{ role: 'user', content: word }],
      max_tokens: 6,
      temperature: 1,
    });
  };
}

const capitals = (trajectory: Parameters<typeof finalAssistantText>[0]): number =>
  capitalsReward(finalAssistantText(trajectory));

describe('RLTrainer', () => {
  it('learns with the pipeline on, never training a group more than maxStepsOffPolicy steps stale', async () => {
    const model = await freshModel();
    const firstJob = jobBodies.length;
    const ends: StepEndEvent[] = [];
    const trainer = new RLTrainer({
      model,
      scenarios: WORDS,
      rollout: wordRollout(model),
      reward: capitals,
      groupSize: 8,
      groupsPerStep: 8,
      maxSteps: 14,
      maxStepsOffPolicy: 1,
      progress: false,
    });
    trainer.on('step:end', (event) => ends.push(event));
    const summary = await trainer.run();
    expect(summary).toMatchObject({ step: 14, startStep: 0, stopReason: 'max_steps' });
    expect(summary.totals, JSON.stringify(summary)).toMatchObject({ steps: 14, rollouts: 14 * 64, droppedStale: 0 });
    expect(summary.totals.tokens).toBeGreaterThan(0);

    // What reached the training endpoint: job i trains step i; no trajectory older than step i - 1,
    // and from the second step on the batch was sampled while the previous step trained.
    const bodies = jobBodies.slice(firstJob);
    expect(bodies).toHaveLength(14);
    for (const [step, body] of bodies.entries()) {
      const versions = body.trajectory_groups.flatMap((group) =>
        group.trajectories.map((trajectory) => trajectory.initial_policy_version),
      );
      for (const version of versions) expect(step - Number(version)).toBeLessThanOrEqual(1);
      if (step > 0) expect(new Set(versions)).toEqual(new Set([step - 1]));
    }

    // Learning: the mean reward of the last steps is well above the first ones'.
    const rewards = ends.map((event) => event.metrics['train/reward'] ?? Number.NaN);
    const first = (rewards[0]! + rewards[1]!) / 2;
    const last = (rewards.at(-1)! + rewards.at(-2)!) / 2;
    expect(last - first).toBeGreaterThanOrEqual(0.2);
    expect(Object.keys(ends[1]?.metrics ?? {})).toEqual(
      expect.arrayContaining(['time/sample', 'time/train', 'time/step', 'idle/service', 'train/frac_reward_zero_std']),
    );

    // Exactly one train/* row per trained step.
    const trainRows = (await model.history()).filter((row) => Object.keys(row).some((key) => key.startsWith('train/')));
    expect(trainRows.map((row) => row.training_step)).toEqual([...Array(14).keys()]);
    await model.close();
  }, 60_000);

  it('with maxStepsOffPolicy 0 samples every batch from the step it trains', async () => {
    const model = await freshModel();
    const firstJob = jobBodies.length;
    let progressCalls = 0;
    const trainer = new RLTrainer({
      model,
      scenarios: WORDS,
      rollout: wordRollout(model),
      reward: capitals,
      groupSize: 4,
      groupsPerStep: 4,
      maxSteps: 3,
      maxStepsOffPolicy: 0,
      progress: false,
      // A training parameter and a request option, each in its own object, each reaching its place.
      train: { lossFn: 'ppo' },
      job: { onProgress: () => (progressCalls += 1) },
    });
    await trainer.run();
    const bodies = jobBodies.slice(firstJob);
    expect(
      bodies.map(
        (body) => new Set(body.trajectory_groups.flatMap((g) => g.trajectories.map((t) => t.initial_policy_version))),
      ),
    ).toEqual([new Set([0]), new Set([1]), new Set([2])]);
    expect(bodies.map((body) => body.experimental_config?.['loss_fn'])).toEqual(['ppo', 'ppo', 'ppo']);
    expect(progressCalls).toBeGreaterThanOrEqual(3);
    await model.close();
  });

  it('stops with "no learning signal" after collapseAfter groups in a row with equal rewards', async () => {
    const model = await freshModel();
    const firstJob = jobBodies.length;
    const dropped: GroupsDroppedEvent[] = [];
    const trainer = new RLTrainer({
      model,
      scenarios: WORDS,
      rollout: wordRollout(model),
      reward: () => 0.5,
      groupSize: 2,
      groupsPerStep: 2,
      maxSteps: 5,
      collapseAfter: 5,
      progress: false,
    });
    trainer.on('groups:dropped', (event) => dropped.push(event));
    const error = await trainer.run().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NoLearningSignalError);
    expect((error as Error).message).toMatch(/No learning signal: the last 5 groups/);
    expect(dropped.every((event) => event.reason === 'zero_variance' && event.step === 0)).toBe(true);
    expect(jobBodies.length).toBe(firstJob);
    expect(await model.getStep()).toBe(0);
    expect(inFlight).toBe(0);
    await model.close();
  });

  it('stops cleanly at a step budget and at a token budget, naming the reason', async () => {
    const model = await freshModel();
    const options = {
      model,
      scenarios: WORDS,
      rollout: wordRollout(model),
      reward: capitals,
      groupSize: 4,
      groupsPerStep: 2,
      maxSteps: 100,
      progress: false,
    };
    const bySteps = await new RLTrainer({ ...options, budget: { steps: 2 } }).run();
    expect(bySteps).toMatchObject({ step: 2, stopReason: 'budget_steps', totals: { steps: 2 } });
    const byTokens = await new RLTrainer({ ...options, budget: { tokens: 1 } }).run();
    expect(byTokens).toMatchObject({ step: 3, startStep: 2, stopReason: 'budget_tokens', totals: { steps: 1 } });
    expect(byTokens.totals.tokens).toBeGreaterThan(0);
    expect(await model.getStep()).toBe(3);
    expect(inFlight).toBe(0);
    await model.close();
  });

  it('reads an async iterable of scenarios once, in order, and says when it ran out', async () => {
    const model = await freshModel();
    async function* words(): AsyncGenerator<string> {
      for (const word of WORDS.slice(0, 6)) yield word;
    }
    const summary = await new RLTrainer({
      model,
      scenarios: words(),
      rollout: wordRollout(model),
      reward: capitals,
      groupSize: 4,
      groupsPerStep: 2,
      maxSteps: 10,
      progress: false,
    }).run();
    expect(summary).toMatchObject({ stopReason: 'scenarios_exhausted', totals: { rollouts: 24 } });
    // 6 scenarios, 2 a batch: 3 batches, each trained or (sampled rewards all equal in every
    // group, which a temperature-1 tiny model does now and then) skipped.
    expect(summary.totals.steps + summary.totals.skippedBatches).toBe(3);
    expect(summary.step).toBe(summary.totals.steps);
    expect(inFlight).toBe(0);
    await model.close();
  });

  it('on abort stops sampling, lets the running job finish and record its step, and leaves nothing in flight', async () => {
    const model = await freshModel();
    const controller = new AbortController();
    const trainer = new RLTrainer({
      model,
      scenarios: WORDS,
      rollout: wordRollout(model),
      reward: capitals,
      groupSize: 4,
      groupsPerStep: 4,
      maxSteps: 50,
      maxStepsOffPolicy: 2,
      progress: false,
    });
    trainer.on('step:start', ({ step }) => {
      if (step === 1) controller.abort(new Error('user pressed Ctrl-C'));
    });
    const error = await trainer.run({ signal: controller.signal }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toEqual(new Error('user pressed Ctrl-C'));
    expect(inFlight).toBe(0);
    // The job of step 1 ran to its end and its row is there: steps 0 and 1 trained, one row each.
    expect(await model.getStep()).toBe(2);
    const trainRows = (await model.history()).filter((row) => typeof row['train/reward'] === 'number');
    expect(trainRows.map((row) => row.training_step)).toEqual([0, 1]);
    await model.close();
  });

  it('validates at the start and every `every` steps, logs baselines beside the model, and keeps best and latest', async () => {
    const model = await freshModel();
    const { baseURL } = await backend.connect();
    const baseline = new PromptedModel({
      project: 'trainer',
      name: `baseline-${modelCount}`,
      model: BASE_MODEL,
      baseURL: baseURL,
      apiKey: (await backend.connect()).apiKey,
      dataDir,
    });
    const validations: ValidationEndEvent[] = [];
    const trainer = new RLTrainer({
      model,
      scenarios: WORDS,
      rollout: wordRollout(model),
      reward: capitals,
      groupSize: 4,
      groupsPerStep: 4,
      maxSteps: 4,
      validation: { scenarios: WORDS.slice(0, 4), every: 2, groupSize: 2, baselines: [baseline] },
      keep: { best: true, latest: true },
      progress: false,
    });
    trainer.on('validation:end', (event) => validations.push(event));
    const summary = await trainer.run();
    const valRows = (await model.history()).filter((row) => typeof row['val/reward'] === 'number');
    // Validations run in the background, so their rows may land in any order.
    expect(valRows.map((row) => row.training_step).sort()).toEqual([0, 2, 4]);
    const baselineRows = await baseline.history();
    expect(baselineRows).toHaveLength(1);
    expect(baselineRows[0]).toMatchObject({ training_step: 0, 'val/data/step_num_trajectories': 8 });
    expect(validations.map((event) => event.model).sort()).toEqual(
      [baseline.name, model.name, model.name, model.name].sort(),
    );
    // Retention: the latest and the best by val/reward are left.
    const { client } = await backend.connect();
    const steps = (await client.checkpoints.list(model.id)).data.map((checkpoint) => checkpoint.step);
    const value = (step: number): number => Number(valRows.find((row) => row.training_step === step)?.['val/reward']);
    const bestCheckpoint = value(2) > value(4) ? 2 : 4; // ties go to the later step
    expect(new Set(steps)).toEqual(new Set([bestCheckpoint, 4]));
    // The summary's best is over every validated step, the base model's (step 0) included.
    const best = [0, 2, 4].reduce((a, b) => (value(b) >= value(a) ? b : a));
    expect(summary).toMatchObject({ bestStep: best, bestMetric: value(best), metric: 'val/reward' });
    await model.close();
  });
});

describe('RLTrainer after kill -9', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service?.close();
  });

  const runChild = (maxSteps: number, dir: string) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(import.meta.dirname, 'support', 'rl-trainer-child.ts')],
      {
        env: {
          ...process.env,
          POLICYLOOP_TEST_URL: service.baseURL,
          POLICYLOOP_TEST_KEY: service.apiKey,
          POLICYLOOP_TEST_DIR: dir,
          MAX_STEPS: String(maxSteps),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string }>((resolve) =>
      child.on('exit', (code, signal) => resolve({ code, signal, output })),
    );
    return { child, exited };
  };

  it('reruns to one train/* row per step, and no step trained twice', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'policyloop-crash-'));
    const client = new TrainingClient({ baseURL: service.baseURL, apiKey: service.apiKey });
    const historyFile = path.join(dir, 'crash', 'models', 'capitals', 'history.jsonl');
    const journal = path.join(dir, 'crash', 'models', 'capitals', 'pending-job.json');
    try {
      const first = runChild(3, dir);
      // Wait for the second step's job to be on the service (its id in the journal), then kill.
      let jobId: string | undefined;
      for (let attempt = 0; attempt < 2_000 && jobId === undefined; attempt += 1) {
        const text = await readFile(journal, 'utf8').catch(() => '');
        const pending = text === '' ? undefined : (JSON.parse(text) as { step: number; jobId: string | null });
        if (pending?.step === 1 && pending.jobId !== null) jobId = pending.jobId;
        else await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(jobId).toBeDefined();
      first.child.kill('SIGKILL');
      expect((await first.exited).signal).toBe('SIGKILL');
      const job = await client.jobs.retrieve(jobId as string);
      expect(['PENDING', 'RUNNING', 'COMPLETED']).toContain(job.status);

      const second = runChild(3, dir);
      const result = await second.exited;
      expect(result.code, result.output).toBe(0);
      const summary = JSON.parse(result.output.trim().split('\n').at(-1) ?? '{}') as { step: number };
      expect(summary.step).toBe(3);
      const rows = (await readFile(historyFile, 'utf8'))
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, number>);
      const trainSteps = rows
        .filter((row) => Object.keys(row).some((key) => key.startsWith('train/')))
        .map((row) => row.training_step);
      expect(trainSteps).toEqual([0, 1, 2]);
      const model = await client.models.create({
        project: 'crash',
        name: 'capitals',
        base_model: BASE_MODEL,
        return_existing: true,
      });
      const checkpoints = (await client.checkpoints.list(model.id)).data.map((checkpoint) => checkpoint.step);
      expect(checkpoints).toEqual([1, 2, 3]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
