import { afterEach, describe, expect, it, vi } from 'vitest';
import { APIUserAbortError, InvalidArgumentError } from 'policyloop';
import { gatherTrajectoryGroups } from 'policyloop';
import { JudgeError, relativeJudge } from 'policyloop';
import type { JudgeScore } from 'policyloop/training';
import { makeGroup, scriptedChatClient } from 'policyloop/testing';

const scores = (...values: [number, string][]) =>
  JSON.stringify({
    scores: values.map(([score, explanation], index) => ({ trajectory_id: String(index + 1), explanation, score })),
  });

function sampleGroup() {
  return makeGroup([
    { system: 'Answer with a number.', user: 'What is 2+2?', answer: '4', reward: 1 },
    { system: 'Answer with a number.', user: 'What is 2+2?', answer: 'five', reward: 0 },
    { system: 'Answer with a number.', user: 'What is 2+2?', answer: '4, I think', reward: 0.5 },
  ]);
}

describe('relativeJudge', () => {
  it('replaces rewards with the judge scores, keeps the previous reward as a metric and logs the explanation', async () => {
    const client = scriptedChatClient([
      scores([0.9, 'correct and brief'], [0.1, 'wrong'], [0.7, 'correct but hedged']),
    ]);
    const group = await relativeJudge({ client, model: 'judge-model', rubric: 'Correct answers first.' })(
      sampleGroup(),
    );
    expect(group.trajectories.map((trajectory) => trajectory.reward)).toEqual([0.9, 0.1, 0.7]);
    expect(group.trajectories.map((trajectory) => trajectory.metrics['independent_reward'])).toEqual([1, 0, 0.5]);
    expect(group.trajectories.map((trajectory) => trajectory.metrics['judge_score'])).toEqual([0.9, 0.1, 0.7]);
    expect(group.trajectories[1]?.logs).toContain('judge: wrong');
  });

  it('sends the shared context once, every trajectory once, the rubric and the model', async () => {
    const client = scriptedChatClient([scores([1, 'a'], [0, 'b'], [0.5, 'c'])]);
    await relativeJudge({ client, model: 'judge-model', rubric: 'RUBRIC-TEXT', requestParams: { temperature: 0 } })(
      sampleGroup(),
    );
    const body = client.requests[0]?.body;
    expect(body).toMatchObject({ model: 'judge-model', temperature: 0 });
    const [system, user] = (body?.messages ?? []) as { content: string }[];
    expect(system?.content).toContain('RUBRIC-TEXT');
    expect(user?.content.match(/What is 2\+2\?/g)).toHaveLength(1);
    expect(user?.content).toContain('<trajectory id="3">');
    expect(user?.content).toContain('five');
  });

  it('puts scores in trajectory order when the judge lists them out of order', async () => {
    const answer = JSON.stringify({
      scores: [
        { trajectory_id: '3', explanation: 'c', score: 0.3 },
        { trajectory_id: '1', explanation: 'a', score: 0.1 },
        { trajectory_id: '2', explanation: 'b', score: 0.2 },
      ],
    });
    const group = await relativeJudge({ client: scriptedChatClient([answer]), model: 'j' })(sampleGroup());
    expect(group.trajectories.map((trajectory) => trajectory.reward)).toEqual([0.1, 0.2, 0.3]);
  });

  it('finds the JSON object inside prose around it', async () => {
    const client = scriptedChatClient([`Here are my scores:\n${scores([1, 'a'], [0, 'b'], [0.5, 'c'])}\nThanks.`]);
    const group = await relativeJudge({ client, model: 'j' })(sampleGroup());
    expect(group.trajectories.map((trajectory) => trajectory.reward)).toEqual([1, 0, 0.5]);
  });

  it('scores identical trajectories with one judged copy', async () => {
    const client = scriptedChatClient([scores([0.6, 'fine'])]);
    const group = makeGroup([
      { user: 'q', answer: 'a' },
      { user: 'q', answer: 'a' },
    ]);
    await relativeJudge({ client, model: 'j' })(group);
    expect(group.trajectories.map((trajectory) => trajectory.reward)).toEqual([0.6, 0.6]);
  });

  it('raises JudgeError with the raw answer on bad JSON, and leaves the group unchanged', async () => {
    const group = sampleGroup();
    const error = await relativeJudge({ client: scriptedChatClient(['I like the first one best.']), model: 'j' })(
      group,
    ).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(JudgeError);
    expect(error).toMatchObject({ reason: 'parse', raw: 'I like the first one best.', expectedScores: 3 });
    expect(group.trajectories.map((trajectory) => trajectory.reward)).toEqual([1, 0, 0.5]);
    expect(group.trajectories[0]?.metrics['independent_reward']).toBeUndefined();
  });

  it('raises JudgeError on a wrong number of scores and on scores outside 0..1', async () => {
    await expect(
      relativeJudge({ client: scriptedChatClient([scores([1, 'a'], [0, 'b'])]), model: 'j' })(sampleGroup()),
    ).rejects.toMatchObject({
      reason: 'count',
      message: 'Expected 3 scores from the judge, got 2',
    });
    await expect(
      relativeJudge({ client: scriptedChatClient([scores([1, 'a'], [7, 'b'], [0, 'c'])]), model: 'j' })(sampleGroup()),
    ).rejects.toMatchObject({
      reason: 'range',
    });
  });

  it('wraps a failed request in JudgeError with the HTTP error as cause', async () => {
    const httpError = Object.assign(new Error('503 Service Unavailable'), { status: 503 });
    const error = await relativeJudge({ client: scriptedChatClient([httpError]), model: 'j', maxRetries: 0 })(
      sampleGroup(),
    ).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(JudgeError);
    expect(error).toMatchObject({ reason: 'request', cause: httpError });
    expect((error as Error).message).toContain('503 Service Unavailable');
  });

  it('retries a retryable failed request up to maxRetries, asking the client for no retries of its own', async () => {
    const httpError = Object.assign(new Error('503 Service Unavailable'), { status: 503 });
    const client = scriptedChatClient([httpError, scores([1, 'a'], [0, 'b'], [0.5, 'c'])]);
    const group = await relativeJudge({ client, model: 'j', maxRetries: 1, retryDelay: 0 })(sampleGroup());
    expect(group.trajectories.map((trajectory) => trajectory.reward)).toEqual([1, 0, 0.5]);
    expect(client.requests).toHaveLength(2);
    const twice = scriptedChatClient([httpError, httpError, scores([1, 'a'], [0, 'b'], [0.5, 'c'])]);
    const error = await relativeJudge({ client: twice, model: 'j', maxRetries: 1, retryDelay: 0 })(sampleGroup()).catch(
      (caught: unknown) => caught,
    );
    expect(error).toMatchObject({ reason: 'request', retryable: true });
    expect((error as Error).message).toContain('gave up after 2 attempts');
    expect(twice.requests).toHaveLength(2);
  });

  it('uses the parse fallback when the answer is not JSON, and still checks what it returns', async () => {
    const parse = (content: string, count: number): JudgeScore[] =>
      content
        .split(',')
        .slice(0, count)
        .map((part, index) => ({
          trajectory_id: String(index + 1),
          explanation: 'parsed from text',
          score: Number(part),
        }));
    const group = await relativeJudge({ client: scriptedChatClient(['0.8,0.2,0.5']), model: 'j', parse })(
      sampleGroup(),
    );
    expect(group.trajectories.map((trajectory) => trajectory.reward)).toEqual([0.8, 0.2, 0.5]);
    await expect(
      relativeJudge({ client: scriptedChatClient(['0.8,0.2']), model: 'j', parse })(sampleGroup()),
    ).rejects.toMatchObject({ reason: 'count' });
    const throwing = () => {
      throw new Error('no numbers');
    };
    await expect(
      relativeJudge({ client: scriptedChatClient(['??']), model: 'j', parse: throwing })(sampleGroup()),
    ).rejects.toThrow('`parse` fallback failed (no numbers)');
  });

  it('as a gather scoreGroup: a judge failure rejects the gather instead of dropping the group', async () => {
    const judge = relativeJudge({ client: scriptedChatClient(['not json']), model: 'j' });
    await expect(
      gatherTrajectoryGroups(['q'], async () => ({ reward: 1 }), { groupSize: 2, scoreGroup: judge }),
    ).rejects.toBeInstanceOf(JudgeError);
  });
});

describe('relativeJudge aborts and timeouts', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const never = () => new Promise<never>(() => undefined);

  it('an abort during the judge request rejects with APIUserAbortError whose cause is the reason', async () => {
    let asked!: () => void;
    const requested = new Promise<void>((resolve) => {
      asked = resolve;
    });
    const client = scriptedChatClient([
      () => {
        asked();
        return never();
      },
    ]);
    const controller = new AbortController();
    const judged = relativeJudge({ client, model: 'j' })(sampleGroup(), { signal: controller.signal }).catch(
      (caught: unknown) => caught,
    );
    await requested;
    const reason = new Error('stop judging');
    controller.abort(reason);
    const error = await judged;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
  });

  it('an abort during the backoff between retries rejects with APIUserAbortError and sends nothing more', async () => {
    vi.useFakeTimers();
    const httpError = Object.assign(new Error('503 Service Unavailable'), { status: 503 });
    const client = scriptedChatClient([httpError, scores([1, 'a'], [0, 'b'], [0.5, 'c'])]);
    const controller = new AbortController();
    const judged = relativeJudge({ client, model: 'j', timeout: Number.POSITIVE_INFINITY, retryDelay: 60_000 })(
      sampleGroup(),
      { signal: controller.signal },
    ).catch((caught: unknown) => caught);
    // The only timer once the first request failed is the backoff's.
    for (let tick = 0; tick < 50 && vi.getTimerCount() === 0; tick += 1) await Promise.resolve();
    expect(vi.getTimerCount()).toBe(1);
    const reason = new Error('stop judging');
    controller.abort(reason);
    const error = await judged;
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    expect(client.requests).toHaveLength(1);
  });

  it('a request that outlives the timeout fails with JudgeError of reason timeout, not the abort error', async () => {
    vi.useFakeTimers();
    const client = scriptedChatClient([never]);
    const judged = relativeJudge({ client, model: 'j', timeout: 1_000, maxRetries: 0 })(sampleGroup()).catch(
      (caught: unknown) => caught,
    );
    await vi.advanceTimersByTimeAsync(1_000);
    const error = await judged;
    expect(error).toBeInstanceOf(JudgeError);
    expect(error).not.toBeInstanceOf(APIUserAbortError);
    expect(error).toMatchObject({ reason: 'timeout', retryable: true });
  });

  it.each([
    [{ timeout: 0 }, 'timeout'],
    [{ maxRetries: -1 }, 'maxRetries'],
    [{ retryDelay: Number.NaN }, 'retryDelay'],
    [{ model: '' }, 'model'],
    [{ client: {} }, 'client'],
    [{ parse: 'json' }, 'parse'],
  ])('refuses %o when the judge is made, naming `%s`', (bad, name) => {
    const client = scriptedChatClient([]);
    let error: unknown;
    try {
      relativeJudge({ client, model: 'j', ...(bad as object) } as never);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).argument).toBe(name);
    expect((error as Error).message).toMatch(/^Expected `\w+` to be .+, got .+$/);
    expect(client.requests).toHaveLength(0);
  });

  it('refuses a misspelt option when the judge is made, naming the nearest one', () => {
    const client = scriptedChatClient([]);
    expect(() => relativeJudge({ client, model: 'j', rubrik: 'Correct first.' } as never)).toThrow(
      'Unknown option `rubrik`; did you mean `rubric`?',
    );
    expect(client.requests).toHaveLength(0);
  });

  it('as a scoreGroup, takes the gather context (scenario, groupIndex, signal) as its call options', async () => {
    const client = scriptedChatClient([scores([0.9, 'right'], [0.1, 'wrong'], [0.5, 'close'])]);
    const judge = relativeJudge({ client, model: 'j' });
    const { signal } = new AbortController();
    const group = await judge(sampleGroup(), { scenario: 1, groupIndex: 0, signal } as never);
    expect(group.trajectories.map((trajectory) => trajectory.reward)).toEqual([0.9, 0.1, 0.5]);
    await expect(judge(sampleGroup(), { signal: 'stop' } as never)).rejects.toThrow(
      'Expected `signal` to be an AbortSignal, got "stop"',
    );
  });
});
