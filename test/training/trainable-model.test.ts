/**
 * The model handle against the real local service on loopback: registration, the OpenAI client,
 * history rows, RL and SFT round trips, failed jobs, the logprobs check, staleness, retention,
 * and log delivery under injected failures.
 */
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TrajectoryGroupInput } from 'policyloop/schema';
import { InvalidArgumentError } from 'policyloop/client';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { MissingLogprobsError, TrainingJobFailedError, TrainingTimeoutError } from '../../src/training/errors.js';
import { TrainableModel } from '../../src/training/trainable-model.js';
import { APIUserAbortError } from 'policyloop/client';
import type { GroupsDroppedEvent } from '../../src/training/model-events.js';
import type { JobProgress } from '../../src/training/follow-job.js';
import { checksumGroups } from './support/checksum-groups.js';

const BASE_MODEL = 'policyloop/tiny-chat';
let dataDir: string;
let backend: LocalBackend;
let modelCount = 0;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-training-'));
  backend = await LocalBackend.start({ dataDir });
});

afterAll(async () => {
  await backend?.close();
  await rm(dataDir, { recursive: true, force: true });
});

async function freshModel(on: LocalBackend = backend): Promise<TrainableModel> {
  modelCount += 1;
  return new TrainableModel({ project: 'tests', name: `model-${modelCount}`, baseModel: BASE_MODEL }).register(on);
}

/** A hand-written group whose rewards differ; `logprobs: false` leaves them out of the Choices. */
function handGroup(options: { logprobs: boolean; sampledStep?: number }): TrajectoryGroupInput {
  return {
    trajectories: [0, 1].map((reward) => ({
      reward,
      initial_policy_version: options.sampledStep ?? null,
      messages_and_choices: [
        { role: 'user' as const, content: 'hi' },
        {
          index: 0,
          finish_reason: 'stop' as const,
          message: { role: 'assistant' as const, content: 'a' },
          ...(options.logprobs
            ? { logprobs: { content: [{ token: 'a', bytes: [97], logprob: -1, top_logprobs: [] }] } }
            : {}),
        },
      ],
    })),
  };
}

describe('registration and the OpenAI client', () => {
  it('registers get-or-create, starts at step 0, and names the model for inference', async () => {
    const model = await freshModel();
    const again = await new TrainableModel({ project: 'tests', name: model.name, baseModel: BASE_MODEL }).register(
      backend,
    );
    expect(again.id).toBe(model.id);
    expect(await model.getStep()).toBe(0);
    expect(model.inferenceName()).toBe(`wandb-artifact:///${model.entity}/tests/${model.name}`);
    expect(model.inferenceName(2)).toBe(`wandb-artifact:///${model.entity}/tests/${model.name}:step2`);
  });

  it('refuses a name that exists with another base model', async () => {
    const model = await freshModel();
    const other = new TrainableModel({ project: 'tests', name: model.name, baseModel: 'policyloop/small-chat' });
    await expect(other.register(backend)).rejects.toThrow(/exists with base model policyloop\/tiny-chat/);
  });

  it('hands out a client that requests logprobs and this model by default', async () => {
    const model = await freshModel();
    const client = model.openai();
    const completion = await client.chat.completions.create({
      model: '',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 4,
    });
    expect(completion.choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
    const plain = await client.chat.completions.create({
      model: model.inferenceName(),
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 4,
      logprobs: false,
    });
    expect(plain.choices[0]?.logprobs ?? null).toBeNull();
  });

  it('throws a clear error when used before registration', () => {
    const model = new TrainableModel({ project: 'tests', name: 'unregistered', baseModel: BASE_MODEL });
    expect(() => model.openai()).toThrow(/not registered: call `await model.register\(backend\)` first/);
    expect(() => new TrainableModel({ project: 'a/b', name: 'x', baseModel: BASE_MODEL })).toThrow(/directory/);
  });
});

describe('RL and SFT round trips', () => {
  it('RL: logs train metrics at the sampling step, trains, and moves to step 1', async () => {
    const model = await freshModel();
    const groups = await checksumGroups(model);
    expect(
      groups.every((group) => group.trajectories.every((trajectory) => trajectory.initial_policy_version === 0)),
    ).toBe(true);
    const val = await model.log({ groups, split: 'val' });
    expect(val).toMatchObject({ training_step: 0, 'val/data/step_num_trajectories': 8 });
    expect(typeof val['val/reward']).toBe('number');

    const progress: JobProgress[] = [];
    const ended: number[] = [];
    model.on('job:end', (event) => ended.push(event.step));
    const result = await model.train(groups, {}, { onProgress: (p) => progress.push(p) });
    expect(result.step).toBe(1);
    expect(ended).toEqual([1]);
    expect(await model.getStep()).toBe(1);
    expect(progress.at(-1)?.event.type).toBe('training_ended');

    // The service keeps the history: one row per step, every split's metrics in it.
    const history = await model.history();
    expect(history.map((row) => row.training_step)).toEqual([0]);
    expect(history[0]).toMatchObject({
      'val/reward': val['val/reward'],
      'train/reward': val['val/reward'],
      'train/data/step_num_groups_submitted': 2,
    });
    expect(typeof history[0]?.['train/loss']).toBe('number');
    // The result's metrics are named and valued as in the history.
    expect(result.metrics['train/reward']).toBe(val['val/reward']);
    expect(result.metrics['train/loss']).toBe(history[0]?.['train/loss']);
    expect(result.metrics['loss']).toBeUndefined();
    const lines = (await readFile(model.files.history, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(2);

    // The new checkpoint answers, latest and pinned.
    const pinned = model.openai({ step: 1 });
    const reply = await pinned.chat.completions.create({
      model: '',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 2,
    });
    expect(reply.model).toContain(':step1');
    expect((await model.flushLogs()).sentGroups).toBe(4);
    await model.close();
  });

  it('SFT from trajectories writes JSONL into the data dir; SFT from a JSONL path works too', async () => {
    const model = await freshModel();
    const first = await model.trainSFT([
      {
        messages_and_choices: [
          { role: 'user', content: 'capital of France?' },
          { role: 'assistant', content: 'Paris' },
        ],
      },
      {
        messages: [
          { role: 'user', content: '2+2?' },
          { role: 'assistant', content: '4' },
        ],
      },
    ]);
    expect(first.step).toBe(1);
    const written = await readdir(model.files.sftData);
    expect(written).toHaveLength(1);
    const rows = (await readFile(path.join(model.files.sftData, written[0] ?? ''), 'utf8')).trim().split('\n');
    expect(JSON.parse(rows[0] ?? '{}')).toEqual({
      messages: [
        { role: 'user', content: 'capital of France?' },
        { role: 'assistant', content: 'Paris' },
      ],
    });

    const file = path.join(dataDir, 'hand-written.jsonl');
    await writeFile(
      file,
      `${JSON.stringify({
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
        ],
      })}\n`,
    );
    const second = await model.trainSFT(file, { learningRate: 0.001 });
    expect(second.step).toBe(2);
    expect((await model.history()).some((row) => typeof row['sft/loss'] === 'number')).toBe(true);
    expect(second.metrics['sft/loss']).toEqual(expect.any(Number));
  });

  it('a failed job raises TrainingJobFailedError with the job and the service message', async () => {
    const model = await freshModel();
    const error = await model
      .trainSFT('data:application/jsonl,this%20is%20not%20json')
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TrainingJobFailedError);
    const failed = error as TrainingJobFailedError;
    expect(failed.job.status).toBe('FAILED');
    expect(failed.serviceMessage).toMatch(/not valid JSON/);
    expect(await model.getStep()).toBe(0);
  });
});

describe('aborts and timeouts while following a job', () => {
  it('an abort while train follows its job rejects with APIUserAbortError whose cause is the reason', async () => {
    const model = await freshModel();
    const groups = await checksumGroups(model);
    const controller = new AbortController();
    const reason = new Error('enough training');
    const request = { signal: controller.signal, onProgress: () => controller.abort(reason) };
    const error = await model.train(groups, {}, request).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    expect(error).not.toBeInstanceOf(TrainingTimeoutError);
  });

  it('a timeout while train follows its job rejects with TrainingTimeoutError, not the abort error', async () => {
    const model = await freshModel();
    const groups = await checksumGroups(model);
    const error = await model.train(groups, {}, { timeout: 1 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TrainingTimeoutError);
    expect(error).not.toBeInstanceOf(APIUserAbortError);
  });
});

describe('checks before upload', () => {
  it('names the group and trajectory of a Choice without logprobs and uploads nothing', async () => {
    const model = await freshModel();
    let submitted = 0;
    model.on('job:submitted', () => (submitted += 1));
    const error = await model
      .train([handGroup({ logprobs: true }), handGroup({ logprobs: false })])
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(MissingLogprobsError);
    expect((error as MissingLogprobsError).location).toEqual({
      groupIndex: 1,
      trajectoryIndex: 0,
      historyIndex: null,
      itemIndex: 1,
    });
    expect((error as Error).message).toMatch(/trajectory 0 of group 1 .* messages_and_choices\[1\]/);
    expect(submitted).toBe(0);
    expect(await model.history()).toEqual([]);
  });

  it('drops groups sampled more than maxStepsOffPolicy steps ago, and refuses when none is left', async () => {
    const model = await freshModel();
    await model.trainSFT([
      {
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
        ],
      },
    ]);
    await model.trainSFT([
      {
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'b' },
        ],
      },
    ]);
    expect(await model.getStep()).toBe(2);
    const dropped: GroupsDroppedEvent[] = [];
    model.on('groups:dropped', (event) => dropped.push(event));
    await expect(
      model.train([handGroup({ logprobs: true, sampledStep: 0 })], { maxStepsOffPolicy: 1 }),
    ).rejects.toThrow(/all 1 were more than 1 steps stale/);
    const result = await model.train(
      [handGroup({ logprobs: true, sampledStep: 0 }), handGroup({ logprobs: true, sampledStep: 1 })],
      { maxStepsOffPolicy: 1 },
    );
    expect(result).toMatchObject({ step: 3, droppedGroups: 1 });
    expect(dropped.map((event) => [event.count, event.step])).toEqual([
      [1, 2],
      [1, 2],
    ]);
    await model.close();
  });

  it('takes the staleness bound as maxStepsOffPolicy, and reports a drop in the one payload', async () => {
    const model = await freshModel();
    const row = {
      messages: [
        { role: 'user' as const, content: 'a' },
        { role: 'assistant' as const, content: 'b' },
      ],
    };
    await model.trainSFT([row]);
    await model.trainSFT([row]);
    const dropped: GroupsDroppedEvent[] = [];
    model.on('groups:dropped', (event) => dropped.push(event));
    const result = await model.train(
      [handGroup({ logprobs: true, sampledStep: 0 }), handGroup({ logprobs: true, sampledStep: 1 })],
      { maxStepsOffPolicy: 1 },
    );
    expect(result).toMatchObject({ step: 3, droppedGroups: 1 });
    expect(dropped).toEqual([
      {
        reason: 'stale',
        count: 1,
        step: 2,
        groupIndexes: [0],
        maxStepsOffPolicy: 1,
      },
    ]);
    await model.close();
  });
});

describe('bad training input is refused before anything happens', () => {
  /** Runs `attempt` on a fresh model and checks that nothing happened: no job, no history, no log, step 0. */
  async function refused(attempt: (model: TrainableModel) => Promise<unknown>): Promise<InvalidArgumentError> {
    const model = await freshModel();
    let submitted = 0;
    model.on('job:submitted', () => (submitted += 1));
    const error = await attempt(model).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect(submitted).toBe(0);
    expect(await model.history()).toEqual([]);
    expect(await model.getStep()).toBe(0);
    expect((await model.flushLogs()).sentGroups).toBe(0);
    await model.close();
    return error as InvalidArgumentError;
  }
  const choiceGroup = handGroup({ logprobs: true });
  const choiceTrajectory = choiceGroup.trajectories[0];

  it('refuses groups that are not an array, saying how to pass one group', async () => {
    const error = await refused((model) => model.train({ trajectories: [] } as never));
    expect(error.message).toMatch(
      /Expected `groups` to be an array of trajectory groups .*got \{"trajectories":\[\]\}/,
    );
    expect(error.message).toMatch(/pass it in an array: `train\(\[group\]\)`/);
  });

  it('names an unknown trajectory key with its group and trajectory, and suggests the likely one', async () => {
    const error = await refused((model) =>
      model.train([
        choiceGroup,
        {
          trajectories: [
            { ...choiceTrajectory, reward: 0 },
            { messages: [{ role: 'user', content: 'hi' }], reward: 1 },
          ],
        },
      ] as TrajectoryGroupInput[]),
    );
    expect(error.message).toContain(
      'groups[1].trajectories[1]: Unknown key `messages` in trajectory 1 of group 1: did you mean `messages_and_choices`?',
    );
    expect(error.argument).toBe('groups');
  });

  it('names an unknown group key, and suggests by edit distance', async () => {
    const error = await refused((model) =>
      model.train([{ ...choiceGroup, metadta: { id: 1 } }, { trajectory: [] }] as unknown as TrajectoryGroupInput[]),
    );
    expect(error.message).toContain('Unknown key `metadta` in group 0: did you mean `metadata`?');
    expect(error.message).toContain('Unknown key `trajectory` in group 1: did you mean `trajectories`?');
  });

  it('refuses a batch in which no trajectory has a Choice', async () => {
    const error = await refused((model) => model.train([{ trajectories: [{ reward: 1 }, { reward: 0 }] }]));
    expect(error.message).toMatch(/Expected a trajectory with a Choice .*got none in 2 trajectories of 1 groups/);
  });

  it('refuses a batch whose groups all have equal rewards', async () => {
    const equal = (reward: number) => ({
      trajectories: choiceGroup.trajectories.map((trajectory) => ({ ...trajectory, reward })),
    });
    const error = await refused((model) => model.train([equal(1), equal(0)]));
    expect(error.message).toMatch(/got 2 groups whose rewards are all equal \(group 0: all 1, group 1: all 0\)/);
  });

  it('trains the rest of a batch without its equal-reward groups, and counts them in the metrics', async () => {
    const model = await freshModel();
    const equal = { trajectories: choiceGroup.trajectories.map((trajectory) => ({ ...trajectory, reward: 1 })) };
    const dropped: GroupsDroppedEvent[] = [];
    const sizes: Array<number | null> = [];
    model.on('groups:dropped', (event) => dropped.push(event));
    model.on('job:submitted', (event) => sizes.push(event.size));
    const result = await model.train([equal, choiceGroup]);
    expect(result).toMatchObject({ step: 1, droppedGroups: 1 });
    expect(dropped).toEqual([{ reason: 'zero_variance', count: 1, step: 0, groupIndexes: [0] }]);
    expect(sizes).toEqual([1]);
    expect(result.metrics['train/frac_reward_zero_std']).toBe(0.5);
    const [trainRow] = await model.history();
    expect(trainRow).toMatchObject({ 'train/frac_reward_zero_std': 0.5, 'train/data/step_num_groups_submitted': 2 });
    expect((await model.log({ groups: [equal, choiceGroup], send: false }))['val/frac_reward_zero_std']).toBe(0.5);
    await model.close();
  });
});

describe('checkpoint retention', () => {
  it('keeps the latest and the best by val/reward from the history, deleting the rest', async () => {
    const model = await freshModel();
    const row = {
      messages: [
        { role: 'user' as const, content: 'q' },
        { role: 'assistant' as const, content: 'a' },
      ],
    };
    const valRewards = [0.1, 0.9, 0.4, 0.6];
    for (const [index, reward] of valRewards.entries()) {
      await model.trainSFT([row]);
      await model.log({
        groups: [{ trajectories: [{ reward }, { reward }] }],
        split: 'val',
        step: index + 1,
        send: false,
      });
    }
    expect(await model.getStep()).toBe(4);
    await expect(model.pruneCheckpoints({ keepBestBy: 'val/typo' })).rejects.toThrow(/nothing was deleted/);
    const result = await model.pruneCheckpoints({ keepBestBy: 'val/reward', keepLatest: true });
    expect(result).toMatchObject({ kept: [2, 4], deleted: [1, 3], bestStep: 2, notFoundSteps: [] });
    const { client } = await backend.connect();
    const page = await client.checkpoints.list(model.id);
    expect(page.data.map((checkpoint) => checkpoint.step)).toEqual([2, 4]);
    expect(await model.getStep()).toBe(4);
  });
});

describe('log delivery under injected failures', () => {
  it('spools what the service could not take and a replay delivers it, losing nothing', async () => {
    let logRequests = 0;
    const acknowledged: string[] = [];
    const flaky: typeof globalThis.fetch = async (input, init) => {
      const url = String(input);
      if (url.endsWith('/log')) {
        logRequests += 1;
        // The first three log requests fail as a dropped connection would.
        if (logRequests <= 3) throw new TypeError('fetch failed: connection reset');
        const response = await fetch(input, init);
        if (response.ok) {
          const body = JSON.parse(String(init?.body)) as { trajectory_groups: Array<{ metadata?: { id?: string } }> };
          acknowledged.push(...body.trajectory_groups.map((group) => String(group.metadata?.id)));
        }
        return response;
      }
      return fetch(input, init);
    };
    const flakyBackend = await LocalBackend.start({ dataDir: path.join(dataDir, 'flaky'), fetch: flaky });
    try {
      const model = new TrainableModel({ project: 'tests', name: 'flaky-logs', baseModel: BASE_MODEL });
      await model.register(flakyBackend);
      model.configureLogging({ maxRetries: 1, maxBatchGroups: 2 });
      const spooled: number[] = [];
      model.on('batch:spooled', (event) => spooled.push(event.groupCount));
      const ids = ['g0', 'g1', 'g2', 'g3', 'g4', 'g5'];
      await model.log({
        groups: ids.map((id, index) => ({ trajectories: [{ reward: index % 2 }, { reward: 1 }], metadata: { id } })),
        split: 'val',
      });
      const stats = await model.flushLogs();
      // Batch 1 failed twice (spooled), batch 2 failed once then went through, batch 3 went through.
      expect(spooled).toEqual([2]);
      expect(stats).toMatchObject({ sentGroups: 4, spooledGroups: 2 });
      expect(acknowledged).toEqual(['g2', 'g3', 'g4', 'g5']);
      const replay = await model.replaySpool();
      expect(replay).toMatchObject({ replayedGroups: 2, respooledBatches: 0 });
      expect([...acknowledged].sort()).toEqual(ids);
      await model.close();
    } finally {
      await flakyBackend.close();
    }
  });
});
