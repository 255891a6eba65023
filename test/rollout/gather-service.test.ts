/**
 * Gathering against the real local service: captured completions of the tiny model, reward
 * composition, failures under and over the exception budget, abort with requests in flight, and
 * policy versions read from the service's checkpoints, then dropped as stale after a training step.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APIUserAbortError } from 'policyloop';
import { TrainingClient } from 'policyloop/client';
import { captureCompletions, ExceptionBudgetExceededError, gatherTrajectoryGroups, type RolloutFn } from 'policyloop';
import { dropStaleGroups } from 'policyloop/training';
import { choicesOf, completionTokenCount, lengthPenalty, regexMatch } from 'policyloop';
import { isChoice } from 'policyloop';
import type { ModelResponse } from 'policyloop/schema';
import { startTestService, type TestService } from 'policyloop/testing';

let service: TestService;
let training: TrainingClient;
let openai: ReturnType<typeof captureCompletions<OpenAI>>;
let model: ModelResponse;

beforeAll(async () => {
  service = await startTestService();
  training = new TrainingClient({ baseURL: service.baseURL, apiKey: service.apiKey });
  openai = captureCompletions(new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0 }), {
    defaults: { logprobs: true, max_tokens: 12 },
  });
  model = await training.models.create({
    project: 'gather',
    name: 'agent',
    base_model: service.baseModel,
    return_existing: true,
  });
});

afterAll(async () => {
  await service?.close();
});

const ask: RolloutFn<string> = async (question) => {
  await openai.chat.completions.create({ model: service.baseModel, messages: [{ role: 'user', content: question }] });
};

async function currentStep(): Promise<number> {
  const page = await training.checkpoints.list(model.id, { limit: 1, order: 'desc' });
  return page.data[0]?.step ?? 0;
}

describe('gathering against the local service', () => {
  it('scores captured trajectories with combined rewards, keeps failures under budget, and the service accepts the groups', async () => {
    const groups = await gatherTrajectoryGroups(
      ['q1', 'q2'],
      async (question, context) => {
        await ask(question, context);
        if (question === 'q2' && context.index === 0) throw new Error('tool backend down');
      },
      {
        groupSize: 3,
        concurrency: 3,
        maxExceptions: 1,
        reward: {
          tokens: { fn: (trajectory) => completionTokenCount(trajectory) ?? -1, weight: 0 },
          short: { fn: lengthPenalty({ target: 4, unit: 'tokens' }), weight: 1 },
          anything: { fn: regexMatch(/[\s\S]*/), weight: 0.5 },
        },
      },
    );
    expect(groups.map((group) => group.trajectories.length)).toEqual([3, 2]);
    expect(groups[1]?.exceptions).toEqual([expect.objectContaining({ type: 'Error', message: 'tool backend down' })]);
    for (const trajectory of groups.flatMap((group) => group.trajectories)) {
      const tokens = trajectory.metrics['tokens'] as number;
      expect(tokens).toBeGreaterThan(0);
      expect(tokens).toBe(choicesOf(trajectory)[0]?.logprobs?.content?.length);
      const expected = 0.5 * 1 + (tokens <= 4 ? 0 : -Math.min(1, (tokens - 4) / 4));
      expect(trajectory.reward).toBeCloseTo(expected, 12);
      expect(trajectory.messages_and_choices.map((item) => (isChoice(item) ? 'choice' : item.role))).toEqual([
        'user',
        'choice',
      ]);
    }
    await training.models.log(model.id, { split: 'train', trajectory_groups: groups });
  });

  it('over the budget rejects with every failure and aborts requests in flight', async () => {
    let aborted = 0;
    let ended = 0;
    let bothEnded = (): void => undefined;
    const longRolloutsEnded = new Promise<void>((resolve) => {
      bothEnded = resolve;
    });
    const error = await gatherTrajectoryGroups(
      ['a', 'b', 'c', 'd'],
      async (question, context) => {
        if (question === 'a' || question === 'b') throw new Error(`failed ${question}`);
        try {
          // Long generations, so that these are still running when the budget is exceeded.
          for (let turn = 0; turn < 50; turn += 1) {
            await openai.chat.completions.create({
              model: service.baseModel,
              messages: [{ role: 'user', content: question }],
              max_tokens: 200,
            });
          }
        } catch (caught) {
          if (context.signal.aborted) aborted += 1;
          throw caught;
        } finally {
          if (++ended === 2) bothEnded();
        }
      },
      { concurrency: 4, maxExceptions: 0.25 },
    ).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ExceptionBudgetExceededError);
    expect((error as ExceptionBudgetExceededError).exceptions.map((exception) => exception.message).sort()).toEqual([
      'failed a',
      'failed b',
    ]);
    // The gather rejects without waiting for its rollouts; wait until the two long ones have ended.
    await longRolloutsEnded;
    expect(aborted).toBe(2);
  });

  it('rejects with APIUserAbortError (cause: the reason) when aborted while completions are in flight', async () => {
    const controller = new AbortController();
    const reason = new Error('stopped by user');
    let sent = 0;
    // The user stops the gather once both rollouts have a completion on its way to the service.
    const client = captureCompletions(
      new OpenAI({
        baseURL: service.baseURL,
        apiKey: service.apiKey,
        maxRetries: 0,
        fetch: (input, init) => {
          const response = fetch(input, init);
          if (++sent === 2) controller.abort(reason);
          return response;
        },
      }),
      { defaults: { logprobs: true } },
    );
    const promise = gatherTrajectoryGroups(
      ['x', 'y'],
      async (question) => {
        for (let turn = 0; turn < 50; turn += 1) {
          await client.chat.completions.create({
            model: service.baseModel,
            messages: [{ role: 'user', content: question }],
            max_tokens: 200,
          });
        }
      },
      { signal: controller.signal },
    );
    const error = await promise.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
  });

  it('stamps the step read from the service, and a training step later makes those groups stale', async () => {
    const before = await currentStep();
    const groups = await gatherTrajectoryGroups(['s1', 's2'], ask, { groupSize: 2, sampledStep: currentStep });
    for (const trajectory of groups.flatMap((group) => group.trajectories)) {
      expect(trajectory.initial_policy_version).toBe(before);
      expect(trajectory.final_policy_version).toBe(before);
    }
    // One short SFT job: the model's step (= policy version) moves on by one.
    const row = JSON.stringify({
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello' },
      ],
    });
    const job = await training.jobs.createSFT({
      model_id: model.id,
      training_data_url: `data:application/jsonl;base64,${Buffer.from(`${row}\n${row}`).toString('base64')}`,
    });
    for (let polls = 0; ; polls += 1) {
      const status = await training.jobs.retrieve(job.id);
      if (status.status === 'COMPLETED') break;
      if (status.status === 'FAILED' || polls > 600)
        throw new Error(`SFT job did not complete: ${JSON.stringify(status)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const after = await currentStep();
    expect(after).toBe(before + 1);
    expect(dropStaleGroups(groups, after, 1).dropped).toEqual([]);
    const { fresh, dropped } = dropStaleGroups(groups, after, 0);
    expect(fresh).toEqual([]);
    expect(dropped).toEqual(groups);
  });
});
