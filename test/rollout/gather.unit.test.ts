import { describe, expect, it, vi } from 'vitest';
import { captureCompletions } from '../../src/rollout/capture-completions.js';
import {
  ExceptionBudgetExceededError,
  gatherTrajectoryGroups,
  InvalidTrajectoryError,
  RolloutTimeoutError,
  type RolloutFn,
} from 'policyloop';
import { GatherEmitter, type GatherProgressEvent } from 'policyloop/training';
import { RewardFunctionError, exactMatch, finalAssistantText } from 'policyloop';
import { APIUserAbortError, InvalidArgumentError, PolicyloopError } from 'policyloop';
import { isChoice } from 'policyloop';
import { makeChoice, scriptedChatClient } from 'policyloop/testing';

interface Question {
  readonly question: string;
  readonly answer: string;
}

const questions: Question[] = [
  { question: '1+1', answer: '2' },
  { question: '2+2', answer: '4' },
  { question: '3+3', answer: '6' },
];

/** A "model" that answers sums correctly except when told to be wrong. */
function sumClient() {
  return captureCompletions(
    scriptedChatClient(
      [
        (request) => {
          const last = request.body.messages[request.body.messages.length - 1] as { content: string };
          const [a, b] = last.content.split('+').map(Number);
          return String((a ?? 0) + (b ?? 0));
        },
      ],
      { loop: true },
    ),
    { defaults: { logprobs: true } },
  );
}

describe('gatherTrajectoryGroups', () => {
  it('runs N scenarios x G rollouts into ordered, rewarded groups of captured trajectories', async () => {
    const client = sumClient();
    const rollout: RolloutFn<Question> = async (scenario, context) => {
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: scenario.question }] });
      context.trajectory.metadata['index'] = context.index;
    };
    const groups = await gatherTrajectoryGroups(questions, rollout, {
      groupSize: 3,
      concurrency: 4,
      reward: { correct: exactMatch((scenario: Question) => scenario.answer) },
    });
    expect(groups).toHaveLength(3);
    groups.forEach((group, groupIndex) => {
      expect(group.trajectories.map((trajectory) => trajectory.metadata['index'])).toEqual([0, 1, 2]);
      expect(group.exceptions).toEqual([]);
      for (const trajectory of group.trajectories) {
        expect(finalAssistantText(trajectory)).toBe(questions[groupIndex]?.answer);
        expect(trajectory.reward).toBe(1);
        expect(trajectory.metrics['correct']).toBe(1);
        expect(trajectory.messages_and_choices.filter(isChoice)).toHaveLength(1);
      }
    });
  });

  it('never runs more rollouts at once than `concurrency`', async () => {
    let running = 0;
    let peak = 0;
    await gatherTrajectoryGroups(
      questions,
      async () => {
        running += 1;
        peak = Math.max(peak, running);
        await new Promise((resolve) => setTimeout(resolve, 5));
        running -= 1;
      },
      { groupSize: 4, concurrency: 2 },
    );
    expect(peak).toBe(2);
  });

  it('lets timers and I/O run between rollouts that never wait for I/O', async () => {
    // 200 rollouts that only await microtasks: without a turn of the event loop between two
    // rollouts, the whole gather would run before any timer or I/O callback.
    const ticks: number[] = [];
    let done = 0;
    const ticker = setInterval(() => ticks.push(done), 0);
    try {
      await gatherTrajectoryGroups(
        Array.from({ length: 50 }, (_, index) => index),
        async () => {
          await Promise.resolve();
          done += 1;
        },
        { groupSize: 4, concurrency: 2 },
      );
    } finally {
      clearInterval(ticker);
    }
    expect(done).toBe(200);
    // The timer ran while the gather was under way, not only once it had ended.
    expect(ticks.some((count) => count > 0 && count < 200)).toBe(true);
  });

  it("finishes under a test's fake timers: the turns between rollouts are not timers", async () => {
    vi.useFakeTimers();
    try {
      const groups = await gatherTrajectoryGroups(
        questions,
        async () => {
          await Promise.resolve();
          return { reward: 1 };
        },
        { groupSize: 3, concurrency: 2 },
      );
      expect(groups.map((group) => group.trajectories.length)).toEqual([3, 3, 3]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps failures within the budget in group.exceptions as {type, message, traceback}', async () => {
    const groups = await gatherTrajectoryGroups(
      questions,
      async (scenario, { index }) => {
        if (scenario.answer === '4' && index === 1) throw new TypeError('tool exploded');
        return { reward: 0.5 };
      },
      { groupSize: 2, maxExceptions: 1 },
    );
    expect(groups.map((group) => group.trajectories.length)).toEqual([2, 1, 2]);
    expect(groups[1]?.exceptions).toEqual([
      { type: 'TypeError', message: 'tool exploded', traceback: expect.stringContaining('tool exploded') },
    ]);
    expect(groups[0]?.exceptions).toEqual([]);
  });

  it('accepts a fraction of all rollouts as the budget', async () => {
    const failing = new Set(['0:0', '1:0']);
    const run = (maxExceptions: number) =>
      gatherTrajectoryGroups(
        questions,
        async (_scenario, { groupIndex, index }) => {
          if (failing.has(`${groupIndex}:${index}`)) throw new Error('boom');
        },
        { groupSize: 2, maxExceptions },
      );
    // 2 failures of 6 rollouts = 33%.
    const groups = await run(0.34);
    expect(groups.flatMap((group) => group.exceptions ?? [])).toHaveLength(2);
    await expect(run(0.3)).rejects.toBeInstanceOf(ExceptionBudgetExceededError);
  });

  it('over the budget stops, aborts the rollouts still running, and carries every failure', async () => {
    const aborted: number[] = [];
    let started = 0;
    const promise = gatherTrajectoryGroups(
      [1, 2, 3, 4, 5, 6, 7, 8],
      async (scenario, { signal }) => {
        started += 1;
        if (scenario <= 2) throw new Error(`failure ${scenario}`);
        await new Promise<void>((resolve) => {
          signal.addEventListener('abort', () => {
            aborted.push(scenario);
            resolve();
          });
        });
      },
      { concurrency: 4, maxExceptions: 1 },
    );
    const error = await promise.then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ExceptionBudgetExceededError);
    const budgetError = error as ExceptionBudgetExceededError;
    expect(budgetError.exceptions.map((exception) => exception.message)).toEqual(['failure 1', 'failure 2']);
    expect(budgetError.message).toContain('more than the exception budget of 1 of 8 rollouts');
    expect(aborted.sort()).toEqual([3, 4]);
    // The queued rollouts never started.
    expect(started).toBe(4);
  });

  it('rejects with APIUserAbortError (cause: the reason) when the caller aborts; running rollouts see the reason', async () => {
    const controller = new AbortController();
    const reason = new Error('user stop');
    const seen: unknown[] = [];
    let started = 0;
    const promise = gatherTrajectoryGroups(
      questions,
      async (_scenario, { signal }) => {
        const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
        started += 1;
        if (started === 6) controller.abort(reason);
        await aborted;
        seen.push(signal.reason);
      },
      { groupSize: 2, signal: controller.signal },
    );
    const error = await promise.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIUserAbortError);
    expect((error as APIUserAbortError).cause).toBe(reason);
    expect(seen).toEqual(Array.from({ length: 6 }, () => reason));
  });

  it('rejects at once when the signal is already aborted', async () => {
    let ran = false;
    const controller = new AbortController();
    controller.abort();
    await expect(
      gatherTrajectoryGroups(
        questions,
        async () => {
          ran = true;
        },
        { signal: controller.signal },
      ),
    ).rejects.toMatchObject({ name: 'APIUserAbortError', cause: { name: 'AbortError' } });
    expect(ran).toBe(false);
  });

  it('leaves no unhandled rejection when a rollout aborts the gather itself and then fails', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const controller = new AbortController();
      let failLater: (error: Error) => void = () => {};
      const promise = gatherTrajectoryGroups(
        ['only'],
        async () => {
          // A request is under way when the user stops (here: synchronously, before the rollout's
          // first await), and it rejects after the gather has already given up on it.
          const request = new Promise<never>((_resolve, reject) => {
            failLater = reject;
          });
          controller.abort(new Error('user stop'));
          await request;
        },
        { signal: controller.signal },
      );
      await expect(promise).rejects.toBeInstanceOf(APIUserAbortError);
      failLater(new Error('Request was aborted.'));
      // Node reports unhandled rejections after the microtask queue drains.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('fails a rollout that outlives its timeout with RolloutTimeoutError, even if it ignores its signal', async () => {
    const errors: unknown[] = [];
    const events = new GatherEmitter<string>();
    events.on('rollout:error', ({ error }) => errors.push(error));
    const groups = await gatherTrajectoryGroups(
      ['slow', 'fast'],
      async (scenario) => {
        // Never settles, whatever its signal says.
        if (scenario === 'slow') await new Promise<never>(() => undefined);
      },
      { timeout: 30, maxExceptions: 1, events },
    );
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(RolloutTimeoutError);
    expect(groups[0]?.exceptions?.[0]?.type).toBe('RolloutTimeoutError');
    expect(groups[1]?.trajectories).toHaveLength(1);
  });

  it('retries a failed rollout and keeps the successful attempt', async () => {
    const attempts: number[] = [];
    const events = new GatherEmitter<string>();
    const willRetry: boolean[] = [];
    events.on('rollout:error', (event) => willRetry.push(event.willRetry));
    const groups = await gatherTrajectoryGroups(
      ['flaky'],
      async (_scenario, { attempt, trajectory }) => {
        attempts.push(attempt);
        if (attempt < 2) throw new Error('connection reset');
        trajectory.metrics['attempt'] = attempt;
      },
      { maxRetries: 2, retryDelay: 1, events },
    );
    expect(attempts).toEqual([0, 1, 2]);
    expect(willRetry).toEqual([true, true]);
    expect(groups[0]?.trajectories[0]?.metrics['attempt']).toBe(2);
  });

  it('does not retry a reward function that throws, and names it in the error', async () => {
    let attempts = 0;
    const promise = gatherTrajectoryGroups(
      ['x'],
      async () => {
        attempts += 1;
      },
      {
        maxRetries: 3,
        retryDelay: 1,
        reward: {
          parsesAnswer: () => {
            throw new Error('no answer');
          },
        },
      },
    );
    const error = (await promise.catch((caught: unknown) => caught)) as ExceptionBudgetExceededError;
    expect(error).toBeInstanceOf(ExceptionBudgetExceededError);
    expect(attempts).toBe(1);
    expect(error.errors[0]).toBeInstanceOf(RewardFunctionError);
    expect(error.exceptions[0]).toMatchObject({
      type: 'RewardFunctionError',
      message: 'Reward function `parsesAnswer` threw: no answer',
    });
  });

  it('counts an invalid returned trajectory as a failed rollout with the path of the problem', async () => {
    const groups = await gatherTrajectoryGroups(['x'], async () => ({ reward: 'high' as unknown as number }), {
      maxExceptions: 1,
    });
    expect(groups[0]?.exceptions?.[0]?.type).toBe(InvalidTrajectoryError.name);
    expect(groups[0]?.exceptions?.[0]?.message).toContain('reward');
  });

  it('stamps initial and final policy versions read at the start and end of each rollout', async () => {
    let step = 3;
    const groups = await gatherTrajectoryGroups(
      ['a'],
      async () => {
        step = 4;
      },
      { sampledStep: () => step },
    );
    expect(groups[0]?.trajectories[0]).toMatchObject({ initial_policy_version: 3, final_policy_version: 4 });
    expect(Date.parse(groups[0]?.trajectories[0]?.start_time ?? '')).not.toBeNaN();
  });

  it('emits typed events with running progress and the reward mean', async () => {
    const events = new GatherEmitter<number>();
    const log: string[] = [];
    const progress: GatherProgressEvent[] = [];
    events.on('rollout:start', ({ groupIndex, index }) => log.push(`start ${groupIndex}.${index}`));
    events.on('rollout:end', ({ groupIndex, index, trajectory }) =>
      log.push(`end ${groupIndex}.${index} ${trajectory.reward}`),
    );
    events.on('group:end', ({ groupIndex, group }) => log.push(`group ${groupIndex} ${group.trajectories.length}`));
    events.on('progress', (event) => progress.push(event));
    await gatherTrajectoryGroups([0, 1], async (scenario) => ({ reward: scenario }), {
      groupSize: 2,
      concurrency: 1,
      events,
    });
    // With concurrency 1 the rollouts run in order; a group ends after its own rollouts.
    expect(log.filter((line) => !line.startsWith('group'))).toEqual([
      'start 0.0',
      'end 0.0 0',
      'start 0.1',
      'end 0.1 0',
      'start 1.0',
      'end 1.0 1',
      'start 1.1',
      'end 1.1 1',
    ]);
    expect(log.indexOf('group 0 2')).toBeGreaterThan(log.indexOf('end 0.1 0'));
    expect(log.indexOf('group 1 2')).toBe(log.length - 1);
    expect(progress.map((event) => [event.done, event.total])).toEqual([
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 4],
    ]);
    expect(progress[3]?.rewardMean).toBe(0.5);
  });

  it('scores each finished group with scoreGroup, and a scorer failure rejects the gather', async () => {
    const groups = await gatherTrajectoryGroups([1], async () => ({ reward: 1 }), {
      groupSize: 2,
      scoreGroup: (group) => {
        group.trajectories.forEach((trajectory, index) => {
          trajectory.reward = index;
        });
      },
    });
    expect(groups[0]?.trajectories.map((trajectory) => trajectory.reward)).toEqual([0, 1]);
    await expect(
      gatherTrajectoryGroups([1], async () => undefined, {
        scoreGroup: () => {
          throw new Error('judge down');
        },
      }),
    ).rejects.toThrow('judge down');
    await expect(
      gatherTrajectoryGroups([1], async () => undefined, {
        timeout: 20,
        scoreGroup: () => new Promise<void>(() => undefined),
      }),
    ).rejects.toThrow('scoreGroup of group 0 did not finish within its timeout of 20 ms');
  });

  it('rejects bad options before running anything', async () => {
    let ran = false;
    const rollout = async () => {
      ran = true;
    };
    await expect(gatherTrajectoryGroups([1], rollout, { groupSize: 0 })).rejects.toThrow(
      'Expected `groupSize` to be an integer >= 1, got 0',
    );
    await expect(gatherTrajectoryGroups([1], rollout, { maxExceptions: -1 })).rejects.toBeInstanceOf(PolicyloopError);
    await expect(gatherTrajectoryGroups([1], rollout, { timeout: Number.NaN })).rejects.toThrow(
      'Expected `timeout` to be a positive number of milliseconds, at most 2147483647 (or Infinity), got NaN',
    );
    const scorer = gatherTrajectoryGroups([1], rollout, { scoreGroup: 'judge' as never });
    await expect(scorer).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(scorer).rejects.toMatchObject({
      argument: 'scoreGroup',
      message: 'Expected `scoreGroup` to be a function, got "judge"',
    });
    expect(ran).toBe(false);
  });

  it('refuses a misspelt option before running anything, naming the nearest one', async () => {
    let ran = false;
    const rollout = async () => {
      ran = true;
    };
    const misspelt = gatherTrajectoryGroups([1], rollout, { groupsize: 4 } as never);
    await expect(misspelt).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(misspelt).rejects.toMatchObject({
      argument: 'groupsize',
      message: 'Unknown option `groupsize`; did you mean `groupSize`?',
    });
    await expect(gatherTrajectoryGroups([1], rollout, { retries: 2 } as never)).rejects.toThrow(
      'Unknown option `retries`; did you mean `maxRetries`?',
    );
    await expect(gatherTrajectoryGroups([1], rollout, { colour: 'red' } as never)).rejects.toThrow(
      /^Unknown option `colour`$/,
    );
    expect(ran).toBe(false);
  });

  it('is silent: writes nothing to stderr unless a progress bar is asked for in a terminal', async () => {
    const writes: unknown[] = [];
    const original = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: unknown) => {
      writes.push(chunk);
      return true;
    }) as typeof process.stderr.write;
    try {
      await gatherTrajectoryGroups([1, 2], async () => undefined, { progress: false });
      // Many concurrent rollouts listening on the gather's signal must not make Node warn either.
      await gatherTrajectoryGroups(
        Array.from({ length: 40 }, (_unused, index) => index),
        async (_scenario, { signal }) => {
          signal.addEventListener('abort', () => undefined);
          await new Promise((resolve) => setTimeout(resolve, 5));
        },
        { concurrency: 40 },
      );
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.stderr.write = original;
    }
    expect(writes).toEqual([]);
  });

  it('lets rollouts build trajectories by hand, with sub-agent histories, and merges returned fields over recorded ones', async () => {
    const groups = await gatherTrajectoryGroups(['task'], async (_scenario, { trajectory }) => {
      trajectory.addMessage({ role: 'user', content: 'plan this' }).addChoice(makeChoice('step 1'));
      trajectory.addHistory().addMessage({ role: 'user', content: 'sub-task' }).addChoice(makeChoice('sub answer'));
      trajectory.metrics['recorded'] = 1;
      trajectory.log('planned');
      return { metrics: { returned: 2 }, metadata: { source: 'hand' } };
    });
    const trajectory = groups[0]?.trajectories[0];
    expect(
      trajectory?.messages_and_choices.map((item) => (isChoice(item) ? item.message.content : item.content)),
    ).toEqual(['plan this', 'step 1']);
    expect(trajectory?.additional_histories[0]?.messages_and_choices).toHaveLength(2);
    expect(trajectory?.metrics).toEqual({ recorded: 1, returned: 2 });
    expect(trajectory?.metadata).toEqual({ source: 'hand' });
    expect(trajectory?.logs).toEqual(['planned']);

    const replaced = await gatherTrajectoryGroups(['task'], async (_scenario, { trajectory: recorder }) => {
      recorder.addMessage({ role: 'user', content: 'ignored' });
      return { messages_and_choices: [{ role: 'user', content: 'mine' }, makeChoice('built by hand')], reward: 0.25 };
    });
    expect(replaced[0]?.trajectories[0]?.messages_and_choices).toHaveLength(2);
    expect(replaced[0]?.trajectories[0]?.reward).toBe(0.25);
  });
});
