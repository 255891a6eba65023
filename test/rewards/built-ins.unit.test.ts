import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  assistantTexts,
  exactMatch,
  extractJson,
  finalAssistantText,
  lengthPenalty,
  normalizeAnswer,
  normalizedMatch,
  regexMatch,
  toolCalledWith,
  toolCallsOf,
  validJson,
} from 'policyloop';
import { makeChoice, makeTrajectory } from 'policyloop/testing';

const answer = (text: string) => makeTrajectory({ user: 'q', answer: text });

describe('reading trajectories', () => {
  it('finds the final assistant text, skipping tool results after it', () => {
    const trajectory = makeTrajectory({
      messages_and_choices: [
        { role: 'user', content: 'q' },
        makeChoice('first'),
        { role: 'user', content: 'more' },
        makeChoice('second', { toolCalls: [{ name: 'lookup', arguments: { id: 7 } }] }),
        { role: 'tool', tool_call_id: 'call_1', content: 'found' },
      ],
    });
    expect(finalAssistantText(trajectory)).toBe('second');
    expect(assistantTexts(trajectory)).toEqual(['first', 'second']);
    expect(toolCallsOf(trajectory)).toEqual([
      { id: 'call_1', name: 'lookup', arguments: { id: 7 }, rawArguments: '{"id":7}' },
    ]);
    expect(finalAssistantText(makeTrajectory({ user: 'only a question' }))).toBe('');
  });
});

describe('match rewards', () => {
  it('exactMatch compares the trimmed final answer with a fixed or per-scenario value', () => {
    expect(exactMatch('4')(answer(' 4\n'), undefined)).toBe(1);
    expect(exactMatch('4')(answer('4.'), undefined)).toBe(0);
    expect(exactMatch((scenario: { answer: string }) => scenario.answer)(answer('7'), { answer: '7' })).toBe(1);
  });

  it('normalizedMatch ignores case, spacing, quotes and a final period', () => {
    expect(normalizeAnswer('  "Paris."  ')).toBe('paris');
    expect(normalizedMatch('Paris')(answer('  PARIS. '), undefined)).toBe(1);
    expect(normalizedMatch('New York')(answer('new   york'), undefined)).toBe(1);
    expect(normalizedMatch('Paris')(answer('Lyon'), undefined)).toBe(0);
    expect(normalizedMatch('Paris', { caseSensitive: true })(answer('paris'), undefined)).toBe(0);
  });

  it('regexMatch tests the final answer, also with a global regex used twice', () => {
    const reward = regexMatch(/\d+/g);
    expect(reward(answer('it is 42'), undefined)).toBe(1);
    expect(reward(answer('it is 42'), undefined)).toBe(1);
    expect(regexMatch('^yes$')(answer('no'), undefined)).toBe(0);
  });
});

describe('validJson', () => {
  it('scores JSON answers, fenced or bare, and checks a zod schema when given', () => {
    expect(extractJson('```json\n{"a": 1}\n```')).toEqual({ ok: true, value: { a: 1 } });
    expect(validJson()(answer('{"city": "Paris"}'), undefined)).toBe(1);
    expect(validJson()(answer('The answer is {"city": "Paris"}'), undefined)).toBe(0);
    const schema = z.object({ city: z.string(), temperature: z.number() });
    expect(validJson(schema)(answer('```json\n{"city": "Paris", "temperature": 21}\n```'), undefined)).toBe(1);
    expect(validJson(schema)(answer('{"city": "Paris"}'), undefined)).toBe(0);
  });
});

describe('toolCalledWith', () => {
  const called = makeTrajectory({
    messages_and_choices: [
      { role: 'user', content: 'weather?' },
      makeChoice(null, {
        toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris', units: 'C', days: [1, 2] } }],
      }),
    ],
  });

  it('scores 1 when the tool was called with arguments containing the expected ones', () => {
    expect(toolCalledWith('get_weather')(called, undefined)).toBe(1);
    expect(toolCalledWith('get_weather', { city: 'Paris' })(called, undefined)).toBe(1);
    expect(toolCalledWith('get_weather', { city: 'Paris', days: [1, 2] })(called, undefined)).toBe(1);
    expect(toolCalledWith('get_weather', { city: 'Oslo' })(called, undefined)).toBe(0);
    expect(toolCalledWith('get_weather', { country: 'FR' })(called, undefined)).toBe(0);
    expect(toolCalledWith('search')(called, undefined)).toBe(0);
  });

  it('accepts a test of the arguments against the scenario', () => {
    const reward = toolCalledWith<{ city: string }>(
      'get_weather',
      (args, scenario) => (args as { city?: string }).city === scenario.city,
    );
    expect(reward(called, { city: 'Paris' })).toBe(1);
    expect(reward(called, { city: 'Rome' })).toBe(0);
  });
});

describe('lengthPenalty', () => {
  it('is 0 up to the target, then falls linearly to -1 at twice the target', () => {
    const penalty = lengthPenalty({ target: 10 });
    expect(penalty(answer('x'.repeat(10)), undefined)).toBe(0);
    expect(penalty(answer('x'.repeat(15)), undefined)).toBe(-0.5);
    expect(penalty(answer('x'.repeat(50)), undefined)).toBe(-1);
  });

  it('counts generated tokens from logprobs, and fails clearly without them', () => {
    const penalty = lengthPenalty({ target: 2, unit: 'tokens' });
    expect(penalty(makeTrajectory({ answer: makeChoice('a b c d', { logprobs: [-1, -1, -1, -1] }) }), undefined)).toBe(
      -1,
    );
    expect(() => penalty(makeTrajectory({ answer: makeChoice('a b', { logprobs: false }) }), undefined)).toThrow(
      'request `logprobs: true`',
    );
  });

  it('rejects a target that is not positive', () => {
    expect(() => lengthPenalty({ target: 0 })).toThrow('Expected `target` to be a positive number, got 0');
    expect(() => lengthPenalty({ target: 10, scope: 'last' as never })).toThrow(
      'Expected `scope` to be one of "final", "all", got "last"',
    );
    expect(() => lengthPenalty({ target: 10, units: 'tokens' } as never)).toThrow(
      'Unknown option `units`; did you mean `unit`?',
    );
  });
});
