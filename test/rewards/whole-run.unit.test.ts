/**
 * The trajectory readers read the whole run: the main conversation and the sub-agents' histories,
 * in the order the turns happened (the recorder's `turn_order`), or the main conversation alone.
 */
import { describe, expect, it } from 'vitest';
import {
  assistantTexts,
  choicesOf,
  exactMatch,
  finalAssistantText,
  gatherTrajectoryGroups,
  recordTrajectory,
  relativeJudge,
  runItems,
  toolCalledWith,
  toolCallsOf,
  Trajectory,
} from 'policyloop';
import { toSFTRows, TrajectoryRecorder } from 'policyloop/training';
import { makeChoice, scriptedChatClient } from 'policyloop/testing';

/** An agent that asks a sub-agent (agent as a tool) and answers after it: main, sub, main. */
function agentAsTool(recorder = new TrajectoryRecorder()): TrajectoryRecorder {
  recorder.addMessage({ role: 'system', content: 'Main.' }, { role: 'user', content: 'What is 3+4?' });
  recorder.addChoice(makeChoice(null, { toolCalls: [{ name: 'ask_expert', arguments: { q: '3+4' } }] }));
  const expert = recorder.addHistory();
  expert.addMessage({ role: 'system', content: 'Expert.' }, { role: 'user', content: '3+4' });
  expert.addChoice(makeChoice(null, { toolCalls: [{ name: 'calculator', arguments: { expression: '3+4' } }] }));
  expert.addMessage({ role: 'tool', tool_call_id: 'call_1', content: '7' });
  expert.addChoice(makeChoice('expert: 7'));
  recorder.addMessage({ role: 'tool', tool_call_id: 'call_1', content: 'expert: 7' });
  recorder.addChoice(makeChoice('The answer is 7.'));
  return recorder;
}

/** A handoff: the main agent hands off, the specialist finishes the run. */
function handoff(answer = 'Booked 12A.'): TrajectoryRecorder {
  const recorder = new TrajectoryRecorder();
  recorder.addMessage({ role: 'user', content: 'Seat 12A please.' });
  recorder.addChoice(makeChoice(null, { toolCalls: [{ name: 'transfer_to_seat_agent' }] }));
  const seat = recorder.addHistory();
  seat.addMessage({ role: 'system', content: 'Seats.' }, { role: 'user', content: 'Seat 12A please.' });
  seat.addChoice(makeChoice(null, { toolCalls: [{ name: 'update_seat', arguments: { seat: '12A' } }] }));
  seat.addMessage({ role: 'tool', tool_call_id: 'call_1', content: 'booked' });
  seat.addChoice(makeChoice(answer));
  return recorder;
}

describe('the trajectory readers read the whole run', () => {
  it('take a handoff run’s final answer and tool calls from the specialist, or the main conversation’s when asked', () => {
    const trajectory = Trajectory.parse(handoff().toTrajectory());
    expect(finalAssistantText(trajectory)).toBe('Booked 12A.');
    expect(finalAssistantText(trajectory, { mainOnly: true })).toBe('');
    expect(toolCallsOf(trajectory).map((call) => call.name)).toEqual(['transfer_to_seat_agent', 'update_seat']);
    expect(toolCalledWith('update_seat', { seat: '12A' })(trajectory, undefined)).toBe(1);
    expect(toolCalledWith('update_seat', undefined, { mainOnly: true })(trajectory, undefined)).toBe(0);
    expect(exactMatch('Booked 12A.')(trajectory, undefined)).toBe(1);
    expect(choicesOf(trajectory)).toHaveLength(3);
    expect(choicesOf(trajectory, { mainOnly: true })).toHaveLength(1);
  });

  it('follow the order the turns happened in when the main agent answers after its sub-agent', () => {
    const trajectory = Trajectory.parse(agentAsTool().toTrajectory());
    expect(trajectory['turn_order']).toEqual([0, 0, 0, 1, 1, 1, 1, 1, 0, 0]);
    expect(finalAssistantText(trajectory)).toBe('The answer is 7.');
    expect(assistantTexts(trajectory)).toEqual(['', '', 'expert: 7', 'The answer is 7.']);
    expect(toolCallsOf(trajectory).map((call) => call.name)).toEqual(['ask_expert', 'calculator']);
    expect(runItems(trajectory).map(({ history }) => history)).toEqual([0, 0, 0, 1, 1, 1, 1, 1, 0, 0]);
  });

  it('keep the order through a gather, so a reward reads the main agent’s answer after its sub-agent', async () => {
    const groups = await gatherTrajectoryGroups(
      ['q'],
      async (_scenario, { trajectory }) => {
        agentAsTool(trajectory);
      },
      { reward: exactMatch('The answer is 7.') },
    );
    const trajectory = groups[0]?.trajectories[0] as Trajectory;
    expect(trajectory.reward).toBe(1);
    expect(finalAssistantText(trajectory)).toBe('The answer is 7.');
  });

  it('read the main conversation, then each history, when no usable order was recorded', () => {
    const recorded = Trajectory.parse(agentAsTool().toTrajectory());
    const { turn_order: _order, ...withoutOrder } = recorded;
    expect(finalAssistantText(withoutOrder)).toBe('expert: 7');
    // An order that no longer counts the items (a conversation edited by hand) is not used.
    const edited = { ...recorded, turn_order: [0, 1] };
    expect(runItems(edited).map(({ history }) => history)).toEqual([0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
  });

  it('keep no order for a run without sub-agents', () => {
    const recorder = new TrajectoryRecorder();
    recorder.addMessage({ role: 'user', content: 'hi' }).addChoice(makeChoice('hello'));
    expect('turn_order' in recorder.toTrajectory()).toBe(false);
  });

  it('recordTrajectory hands reward functions a trajectory they take as it is', async () => {
    const { trajectory } = await recordTrajectory((recorder) => {
      recorder.addMessage({ role: 'user', content: '2+2?' }).addChoice(makeChoice('4'));
    });
    // Typed `Trajectory`: no `Trajectory.parse` between the recording and the reward.
    const reward: number | Promise<number> = exactMatch('4')(trajectory, undefined);
    expect(reward).toBe(1);
    expect(trajectory.metrics).toEqual({});
  });
});

describe('SFT rows keep the sub-agents', () => {
  it('give each conversation its own row, with its own system prompt and tools', () => {
    const recorder = handoff();
    recorder.tools = [{ type: 'function', function: { name: 'transfer_to_seat_agent' } }];
    const seat = recorder.additionalHistories[0];
    if (seat === undefined) throw new Error('no history');
    seat.tools = [{ type: 'function', function: { name: 'update_seat' } }];
    const rows = toSFTRows([recorder.toTrajectory()]);
    expect(rows).toHaveLength(2);
    expect(rows[0]?.messages.map((message) => message.role)).toEqual(['user', 'assistant']);
    expect(rows[0]?.tools).toEqual([{ type: 'function', function: { name: 'transfer_to_seat_agent' } }]);
    expect(rows[1]?.messages[0]).toEqual({ role: 'system', content: 'Seats.' });
    expect(rows[1]?.messages.at(-1)).toEqual({ role: 'assistant', content: 'Booked 12A.' });
    expect(rows[1]?.tools).toEqual([{ type: 'function', function: { name: 'update_seat' } }]);
  });
});

describe('the judge reads the whole run', () => {
  it('shows the specialist’s turns after the handoff, a repeated user message once', async () => {
    const client = scriptedChatClient([
      JSON.stringify({
        scores: [
          { trajectory_id: '1', explanation: 'a', score: 1 },
          { trajectory_id: '2', explanation: 'b', score: 0 },
        ],
      }),
    ]);
    const first = Trajectory.parse(handoff().toTrajectory());
    const second = Trajectory.parse(handoff('Booked 14B.').toTrajectory());
    await relativeJudge({ client, model: 'judge' })({ trajectories: [first, second] });
    const sent = JSON.stringify(client.requests[0]?.body);
    expect(sent).toContain('Booked 12A.');
    expect(sent).toContain('Booked 14B.');
    expect(sent).toContain('update_seat');
    expect(sent.split('Seat 12A please.').length - 1).toBeLessThanOrEqual(2);
  });
});
