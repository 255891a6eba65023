import { describe, expect, it } from 'vitest';
import { END_TOKEN_ID, decodeTokens, encodeText, tokenBytes, tokenString } from '../../src/engine/index.js';
import { buildRlData, buildSftSequences } from '../../src/engine/training-data.js';
import type { TrainingSequence } from '../../src/engine/training-data.js';
import type { SFTRow, TrajectoryGroup } from 'policyloop';
import type { Choice } from 'policyloop/schema';

/** A Choice whose logprobs say it sampled `text` then `<|end|>`, each token with logprob -1. */
function choiceOf(text: string, options: { end?: boolean; tokensAsIds?: boolean } = {}): Choice {
  const ids = [...encodeText(text), ...(options.end === false ? [] : [END_TOKEN_ID])];
  return {
    index: 0,
    finish_reason: 'stop',
    message: { role: 'assistant', content: text, refusal: null },
    logprobs: {
      content: ids.map((id) => ({
        token: tokenString(id, options.tokensAsIds ?? false),
        bytes: tokenBytes(id),
        logprob: -1,
        top_logprobs: [],
      })),
      refusal: null,
    },
  } as Choice;
}

function group(rewards: number[], prompt = 'p'): TrajectoryGroup {
  return {
    trajectories: rewards.map((reward, index) => ({
      messages_and_choices: [{ role: 'user', content: prompt }, choiceOf(`a${index}`)],
      reward,
      additional_histories: [],
      metrics: {},
      metadata: {},
      logs: [],
    })),
  } as TrajectoryGroup;
}

/** The trained tokens of a sequence, as text. */
function trained(sequence: TrainingSequence): string {
  return decodeTokens(sequence.tokens.filter((_, index) => sequence.mask[index] === 1));
}

/** The advantage carried by a sequence's trained tokens (all equal). */
function advantageOf(sequence: TrainingSequence): number {
  const values = new Set(sequence.weights.filter((_, index) => sequence.mask[index] === 1));
  expect(values.size).toBe(1);
  return [...values][0] as number;
}

describe('RL data', () => {
  it('uses reward minus the group mean, divided by the group std by default', () => {
    const data = buildRlData([group([0, 1, 2, 5])], null);
    // mean 2, population std sqrt((4 + 1 + 0 + 9) / 4)
    const std = Math.sqrt(14 / 4);
    expect(data.sequences.map(advantageOf).map((value) => value * std)).toEqual(
      [-2, -1, 0, 3].map((value) => expect.closeTo(value, 4)),
    );
    expect(data.rewardStdDev).toBeCloseTo(std, 10);
    expect(data.reward).toBe(2);
  });

  it('does not divide by the std when scale_rewards or normalize_advantages is false', () => {
    for (const config of [{ scale_rewards: false }, { normalize_advantages: false }]) {
      expect(buildRlData([group([0, 1, 2, 5])], config).sequences.map(advantageOf)).toEqual([-2, -1, 0, 3]);
    }
    // scale_rewards wins over normalize_advantages.
    expect(
      buildRlData([group([0, 2])], { scale_rewards: true, normalize_advantages: false }).sequences.map(advantageOf),
    ).toEqual([expect.closeTo(-1, 4), expect.closeTo(1, 4)]);
  });

  it('skips groups whose rewards are all equal, and counts them', () => {
    const data = buildRlData(
      [
        group([1, 1, 1], 'same'),
        group([0, 1], 'mixed'),
        group([0.5, 0.5], 'same too'),
        { trajectories: [] } as unknown as TrajectoryGroup,
      ],
      null,
    );
    expect(data.groupsSubmitted).toBe(4);
    expect(data.groupsTrainable).toBe(1);
    expect(data.trajectories).toBe(7);
    expect(data.sequences).toHaveLength(2);
    expect(data.sequences.every((sequence) => decodeTokens(sequence.tokens).includes('<|user|>mixed<|end|>'))).toBe(
      true,
    );
  });

  it('trains only the Choice tokens: the prompt, plain messages and plain assistant messages are context', () => {
    const trajectory = {
      messages_and_choices: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'q1' },
        choiceOf('first'),
        { role: 'user', content: 'q2' },
        { role: 'assistant', content: 'not sampled' },
        { role: 'tool', content: 'r', tool_call_id: 'c' },
        choiceOf('second', { tokensAsIds: true }),
      ],
      reward: 1,
    };
    const data = buildRlData(
      [{ trajectories: [trajectory, { ...trajectory, reward: 0 }] } as unknown as TrajectoryGroup],
      null,
    );
    const sequence = data.sequences[0] as TrainingSequence;
    expect(decodeTokens(sequence.tokens)).toBe(
      '<|system|>sys<|end|><|user|>q1<|end|><|assistant|>first<|end|><|user|>q2<|end|><|assistant|>not sampled<|end|><|tool|>r<|end|><|assistant|>second<|end|>',
    );
    expect(trained(sequence)).toBe('first<|end|>second<|end|>');
    // The sampling logprobs ride along on exactly the trained tokens.
    sequence.oldLogprobs.forEach((value, index) => expect(Number.isNaN(value)).toBe(sequence.mask[index] !== 1));
  });

  it('trains additional histories like the main conversation', () => {
    const withHistory = (reward: number): unknown => ({
      messages_and_choices: [{ role: 'user', content: 'main' }, choiceOf('m')],
      additional_histories: [{ messages_and_choices: [{ role: 'user', content: 'sub' }, choiceOf('s')] }],
      reward,
    });
    const data = buildRlData([{ trajectories: [withHistory(0), withHistory(1)] } as unknown as TrajectoryGroup], null);
    expect(data.sequences.map(trained)).toEqual(['m<|end|>', 's<|end|>', 'm<|end|>', 's<|end|>']);
  });

  it('fails a Choice without logprobs with a message that says how to fix it, unless allow_training_without_logprobs', () => {
    const bare = (reward: number): unknown => ({
      messages_and_choices: [
        { role: 'user', content: 'q' },
        { ...choiceOf('hi'), logprobs: null },
      ],
      reward,
    });
    const groups = [{ trajectories: [bare(0), bare(1)] } as unknown as TrajectoryGroup];
    expect(() => buildRlData(groups, null)).toThrow(
      'trajectory_groups[0].trajectories[0].messages_and_choices[1] is a Choice without logprobs: request chat completions with logprobs: true, or set experimental_config.allow_training_without_logprobs',
    );
    const data = buildRlData(groups, { allow_training_without_logprobs: true });
    expect(data.sequences.map(trained)).toEqual(['hi<|end|>', 'hi<|end|>']);
    expect(data.sequences[0]?.oldLogprobs.every((value) => Number.isNaN(value))).toBe(true);
  });

  it('accepts a Choice of zero tokens (logprobs content []) and trains nothing of it', () => {
    const empty = {
      ...choiceOf(''),
      message: { role: 'assistant', content: '', refusal: null },
      logprobs: { content: [], refusal: null },
    };
    const groups = [
      {
        trajectories: [0, 1].map((reward) => ({
          messages_and_choices: [{ role: 'user', content: 'q' }, empty],
          reward,
        })),
      } as unknown as TrajectoryGroup,
    ];
    const data = buildRlData(groups, null);
    expect(data.groupsTrainable).toBe(1);
    expect(data.sequences).toHaveLength(0);
    // An empty list beside a non-empty message still lacks logprobs.
    const inconsistent = { ...empty, message: { role: 'assistant', content: 'text', refusal: null } };
    expect(() =>
      buildRlData(
        [
          {
            trajectories: [0, 1].map((reward) => ({
              messages_and_choices: [{ role: 'user', content: 'q' }, inconsistent],
              reward,
            })),
          } as unknown as TrajectoryGroup,
        ],
        null,
      ),
    ).toThrow(/without logprobs/);
  });

  it('refuses logprob entries that are not tokens of this engine, naming the entry', () => {
    const foreign = {
      ...choiceOf('x'),
      logprobs: {
        content: [{ token: 'hello', bytes: [104, 101, 108, 108, 111], logprob: -1, top_logprobs: [] }],
        refusal: null,
      },
    };
    const groups = [
      {
        trajectories: [0, 1].map((reward) => ({
          messages_and_choices: [{ role: 'user', content: 'q' }, foreign],
          reward,
        })),
      } as unknown as TrajectoryGroup,
    ];
    expect(() => buildRlData(groups, null)).toThrow(
      /Cannot recover the token id of trajectory_groups\[0\]\.trajectories\[0\]\.messages_and_choices\[1\]\.logprobs\.content\[0\] \(token "hello"\)/,
    );
  });
});

describe('SFT data', () => {
  const row: SFTRow = {
    messages: [
      { role: 'system', content: 's' },
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: 'a1' },
      { role: 'user', content: 'q2' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }],
      },
    ],
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  } as SFTRow;

  it('learns every assistant turn (body and <|end|>) with assistant_turns "all"', () => {
    const [sequence] = buildSftSequences([row], 'all');
    expect(decodeTokens(sequence?.tokens ?? []).startsWith('<|tools|>{"type":"function","name":"f"')).toBe(true);
    expect(trained(sequence as TrainingSequence)).toBe(
      'a1<|end|><|tool_call|>{"name":"f","arguments":{"x":1}}<|/tool_call|><|end|>',
    );
  });

  it('learns only the last assistant turn with assistant_turns "last"', () => {
    const [sequence] = buildSftSequences([row], 'last');
    expect(trained(sequence as TrainingSequence)).toBe(
      '<|tool_call|>{"name":"f","arguments":{"x":1}}<|/tool_call|><|end|>',
    );
  });

  it('fails a row without an assistant message, naming it', () => {
    expect(() => buildSftSequences([row, { messages: [{ role: 'user', content: 'q' }] } as SFTRow], 'all')).toThrow(
      /SFT row 1 has no assistant message/,
    );
  });
});
