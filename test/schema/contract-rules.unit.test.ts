/**
 * The contract's rules as a user of the schemas sees them: defaults, constant tags, open objects,
 * metric value types, the leniency of response schemas, and the inferred TypeScript shapes that
 * the rest of the code base relies on.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { isChoice, Trajectory, TrajectoryGroup } from 'policyloop';
import {
  ChatCompletionContentPart,
  ChatCompletionMessage,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionRequestBody,
  ChatCompletionToolParam,
  CheckpointListQuery,
  CheckpointPage,
  CheckpointResponse,
  Choice,
  CreateSFTTrainingJob,
  GradientStepData,
  isTerminalEventType,
  LogRequest,
  Metrics,
  ModelCreate,
  PageQuery,
  SFTTrainingConfig,
  TrainingJobEventPage,
  TrainingJobResponse,
  type MessageOrChoice,
} from 'policyloop/schema';
import { artGroup, artTrajectory, JOB_ID, MODEL_ID, textChoice, toolCallChoice } from './corpus/fixtures.js';

describe('defaults', () => {
  it('an empty object is a Trajectory with the documented defaults', () => {
    expect(Trajectory.parse({})).toEqual({
      messages_and_choices: [],
      additional_histories: [],
      reward: 0,
      metrics: {},
      metadata: {},
      logs: [],
    });
  });

  it('fills the defaults of requests and pages', () => {
    expect(ModelCreate.parse({ project: 'p', name: 'n', base_model: 'b' }).return_existing).toBe(false);
    expect(SFTTrainingConfig.parse({})).toEqual({ assistant_turns: 'all' });
    expect(SFTTrainingConfig.parse({ metric_logging: {} }).metric_logging).toEqual({ enabled: false });
    expect(CheckpointPage.parse({ data: [], has_more: false })).toEqual({
      object: 'list',
      data: [],
      first_id: '',
      last_id: '',
      has_more: false,
    });
    expect(PageQuery.parse({})).toEqual({ limit: 20 });
    expect(CheckpointListQuery.parse({ limit: '5' })).toEqual({ limit: 5, order: 'asc' });
  });

  it('keeps the values a trajectory carries, null policy versions included', () => {
    const parsed = Trajectory.parse(artTrajectory);
    expect(parsed.initial_policy_version).toBeNull();
    expect(parsed.metadata).toEqual(artTrajectory.metadata);
    expect(parsed.messages_and_choices).toHaveLength(artTrajectory.messages_and_choices.length);
  });
});

describe('constant tags', () => {
  it.each([
    ['message role', ChatCompletionMessageParam, { role: 'critic', content: 'x' }, ['role']],
    ['content part type', ChatCompletionContentPart, { type: 'video_url', video_url: {} }, ['type']],
    ['tool call type', ChatCompletionMessageToolCall, { id: 'c', type: 'web_search' }, ['type']],
    ['tool type', ChatCompletionToolParam, { type: 'file_search' }, ['type']],
  ] as const)('a wrong %s is rejected at the tag', (_label, schema, value, path) => {
    const result = schema.safeParse(value);
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(path);
  });

  it('a message with the wrong role for its schema is rejected', () => {
    expect(ChatCompletionMessage.safeParse({ role: 'user', content: 'x' }).success).toBe(false);
    expect(ChatCompletionMessageParam.safeParse({ role: 'assistant', content: 'x' }).success).toBe(true);
  });

  it('tells choices from messages in messages_and_choices', () => {
    const items: MessageOrChoice[] = Trajectory.parse(artTrajectory).messages_and_choices;
    expect(items.map((item) => (isChoice(item) ? 'choice' : item.role))).toEqual([
      'system',
      'user',
      'choice',
      'tool',
      'tool',
      'choice',
    ]);
  });

  it('knows which event types are terminal', () => {
    expect(
      ['training_started', 'gradient_step', 'training_ended', 'training_failed'].filter((type) =>
        isTerminalEventType(type as never),
      ),
    ).toEqual(['training_ended', 'training_failed']);
  });
});

describe('open and closed objects', () => {
  it('Choice and ChatCompletionMessage keep additional properties', () => {
    const parsed = Choice.parse(textChoice);
    expect(parsed).toHaveProperty('stop_reason', null);
    expect(parsed.message).toHaveProperty('reasoning_content', null);
    expect(
      ChatCompletionMessage.parse({ role: 'assistant', content: 'x', provider_specific: { a: 1 } }),
    ).toHaveProperty('provider_specific', { a: 1 });
  });

  it('keeps unknown keys of a trajectory and drops those of other request bodies', () => {
    expect(Trajectory.parse({ judge_explanation: 'ok' })).toHaveProperty('judge_explanation', 'ok');
    expect(LogRequest.parse({ split: 'train', trajectory_groups: [], extra: 1 })).not.toHaveProperty('extra');
  });

  it('rejects unknown keys in the closed SFT bodies', () => {
    const result = CreateSFTTrainingJob.safeParse({
      model_id: MODEL_ID,
      training_data_url: 'file:///a',
      config: { epochs: 3 },
    });
    expect(result.error?.issues[0]).toMatchObject({ code: 'unrecognized_keys', keys: ['epochs'], path: ['config'] });
  });

  it('drops an echoed response message’s tool_calls: null from a chat request', () => {
    const parsed = ChatCompletionRequestBody.parse({
      model: 'm',
      messages: [{ role: 'assistant', content: 'x', tool_calls: null }],
    });
    expect(parsed.messages[0]).toEqual({ role: 'assistant', content: 'x' });
  });
});

describe('metrics', () => {
  it('accept numbers, integers and booleans only', () => {
    expect(Metrics.parse({ a: 1, b: 0.5, c: true, d: -3 })).toEqual({ a: 1, b: 0.5, c: true, d: -3 });
    for (const bad of ['x', null, [1], { nested: 1 }])
      expect(Metrics.safeParse({ a: bad }).success, JSON.stringify(bad)).toBe(false);
  });

  it('apply to trajectories and groups; checkpoints and gradient steps take numbers only', () => {
    expect(Trajectory.safeParse({ metrics: { verdict: 'good' } }).success).toBe(false);
    expect(TrajectoryGroup.safeParse({ trajectories: [], metrics: { ok: true } }).success).toBe(true);
    expect(TrajectoryGroup.safeParse({ trajectories: [], metrics: { ok: 'yes' } }).success).toBe(false);
    expect(CheckpointResponse.safeParse({ id: MODEL_ID, step: 1, metrics: { ok: true } }).success).toBe(false);
    expect(GradientStepData.safeParse({ loss: 0.5, converged: false }).success).toBe(false);
  });

  it('name the offending field', () => {
    const result = TrajectoryGroup.safeParse({ trajectories: [{ metrics: { verdict: 'good' } }] });
    expect(result.error?.issues[0]?.path).toEqual(['trajectories', 0, 'metrics', 'verdict']);
    expect(result.error?.issues[0]?.message).toBe('Expected a metric value (number or boolean), got string');
  });
});

describe('responses', () => {
  it('a training job parses in the short and the full form', () => {
    expect(TrainingJobResponse.parse({ id: JOB_ID })).toEqual({ id: JOB_ID });
    expect(
      TrainingJobResponse.parse({ id: JOB_ID, model_id: MODEL_ID, status: 'COMPLETED', progress: 1, future_field: 1 }),
    ).toHaveProperty('future_field', 1);
  });

  it('an events page parses with its events in order', () => {
    const page = TrainingJobEventPage.parse({
      object: 'list',
      data: [{ id: JOB_ID, type: 'training_ended', data: {} }],
      first_id: JOB_ID,
      last_id: JOB_ID,
      has_more: false,
    });
    expect(page.data.map((event) => event.type)).toEqual(['training_ended']);
  });
});

describe('inferred types', () => {
  it('keep the shapes the rest of the code base relies on', () => {
    const trajectory = Trajectory.parse({});
    expectTypeOf(trajectory.reward).toEqualTypeOf<number>();
    expectTypeOf(trajectory.initial_policy_version).toEqualTypeOf<number | null | undefined>();
    expectTypeOf(trajectory.metrics).toEqualTypeOf<Record<string, number | boolean>>();
    expectTypeOf(TrajectoryGroup.parse(artGroup).trajectories).toEqualTypeOf<Trajectory[]>();
    expectTypeOf(Choice.parse(toolCallChoice).finish_reason).toEqualTypeOf<
      'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call'
    >();
    expectTypeOf(
      ChatCompletionRequestBody.parse({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).messages,
    ).toEqualTypeOf<ChatCompletionMessageParam[]>();
    expectTypeOf(TrainingJobResponse.parse({ id: JOB_ID }).status).toEqualTypeOf<
      'PENDING' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | undefined
    >();
    expect(trajectory.reward).toBe(0);
  });
});
