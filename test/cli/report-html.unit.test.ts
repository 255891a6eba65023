/**
 * The report's sample trajectories: the whole run in order (a sub-agent conversation under its own
 * heading), tool calls written as calls, a system prompt the samples share shown once, and the
 * step a trajectory was sampled at when it is not the step it trained.
 */
import { describe, expect, it } from 'vitest';
import { reportHtml, toolCallText } from '../../src/cli/report-html.js';
import { Trajectory } from 'policyloop';
import { TrajectoryRecorder } from 'policyloop/training';
import { makeChoice } from 'policyloop/testing';

const SYSTEM = 'You are the triage agent of an airline. '.repeat(10);

function handoffRun(seat: string): Trajectory {
  const recorder = new TrajectoryRecorder();
  recorder.addMessage({ role: 'system', content: SYSTEM }, { role: 'user', content: `Seat ${seat} please.` });
  recorder.addChoice(makeChoice(null, { toolCalls: [{ name: 'transfer_to_seat_agent' }] }));
  const seatAgent = recorder.addHistory();
  seatAgent.addMessage({ role: 'system', content: 'Seats.' }, { role: 'user', content: `Seat ${seat} please.` });
  seatAgent.addChoice(makeChoice(null, { toolCalls: [{ name: 'update_seat', arguments: { seat } }] }));
  seatAgent.addMessage({ role: 'tool', tool_call_id: 'call_1', content: 'booked' });
  seatAgent.addChoice(makeChoice(`Booked ${seat}.`));
  return Trajectory.parse({ ...recorder.toTrajectory(), initial_policy_version: 3 });
}

describe('report samples', () => {
  it('write tool calls as calls', () => {
    expect(
      toolCallText({ type: 'function', function: { name: 'update_seat', arguments: '{"seat":"12A","n":2}' } }),
    ).toBe('update_seat(seat: "12A", n: 2)');
    expect(toolCallText({ type: 'function', function: { name: 'f', arguments: 'not json' } })).toBe('f(not json)');
  });

  it('show the sub-agent’s turns, a shared system prompt once, and the step the samples were sampled at', () => {
    const html = reportHtml({
      title: 'agents/handoff',
      facts: [],
      history: [{ training_step: 4, recorded_at: '2026-11-24T00:00:00Z', 'train/reward': 1 }],
      samples: [{ split: 'train', step: 4, trajectories: [handoffRun('12A'), handoffRun('3C')] }],
      generatedAt: '2026-11-24T00:00:00Z',
    });
    expect(html.split(SYSTEM.trim()).length - 1).toBe(1);
    expect(html).toContain('system · prompt 1 (above)');
    expect(html).toContain('sub-agent conversation 1');
    expect(html).toContain('→ update_seat(seat: &quot;12A&quot;)');
    expect(html).toContain('Booked 3C.');
    expect(html).toContain('sampled at step 3');
    expect(html).not.toContain('"tool_calls"');
  });
});
