/** Corpus of trajectories, histories, groups and log requests. */
import { cases, type CorpusCase } from './case.js';
import {
  artGroup,
  artTrajectory,
  artTrajectoryWithHistory,
  bareChoice,
  MODEL_ID,
  mixedMessagesAndChoices,
  textChoice,
  weatherTool,
} from './fixtures.js';

const history = { messages_and_choices: [{ role: 'user', content: 'Summarise.' }, bareChoice] };

export const trajectoryCases: CorpusCase[] = [
  ...cases('MessageOrChoice', true, [
    ['system', { role: 'system', content: 'x' }],
    ['choice', textChoice],
    ['assistant-context', { role: 'assistant', content: 'context only' }],
  ]),
  ...cases('MessageOrChoice', false, [
    ['neither', { content: 'x' }],
    ['bad-user-no-choice-keys', { role: 'user', content: 5 }],
  ]),
  ...cases('Metrics', true, [
    ['numbers-and-booleans', { reward: 1, latency: 0.25, correct: true, turns: 3 }],
    ['empty', {}],
  ]),
  ...cases('Metrics', false, [
    ['string-value', { verdict: 'good' }],
    ['null-value', { reward: null }],
    ['nested', { inner: { a: 1 } }],
    ['array', [1, 2]],
  ]),
  ...cases('AdditionalHistory', true, [
    ['plain', history],
    ['with-tools', { ...history, tools: [weatherTool] }],
    ['null-tools', { ...history, tools: null }],
  ]),
  ...cases('AdditionalHistory', false, [
    ['missing-messages', { tools: [] }],
    ['bad-item', { messages_and_choices: [{ content: 'no role, no choice' }] }],
    ['messages-object', { messages_and_choices: {} }],
  ]),
  ...cases('TrajectoryMetadataValue', true, [
    ['string', 'paris-1'],
    ['number', 1.5],
    ['boolean', false],
    ['null', null],
  ]),
  ...cases('TrajectoryMetadataValue', false, [
    ['object', { name: 'x' }],
    ['array', ['a']],
  ]),
  ...cases('Trajectory', true, [
    ['empty', {}],
    ['art-dump', artTrajectory],
    ['art-with-history-and-versions', artTrajectoryWithHistory],
    ['mixed-only', { messages_and_choices: mixedMessagesAndChoices, reward: -1 }],
    ['start-time-utc', { reward: 1, start_time: '2025-06-01T12:00:00.123456Z' }],
    ['start-time-offset', { start_time: '2025-06-01T14:00:00+02:00' }],
    // Python's `datetime.now().isoformat()`: no offset. ART and pydantic send and accept it.
    ['start-time-naive', { start_time: '2025-06-01T12:00:00.123456' }],
    ['exchanges', { exchanges: { turn_1: { request: {}, response: {} } } }],
    ['metadata-flat', { metadata: { a: 1, b: 'x', c: true, d: null, e: 1.5 } }],
    ['extra-key', { reward: 1, judge_explanation: 'good' }],
    ['tools-null', { tools: null }],
    ['integer-metric', { metrics: { steps: 12 } }],
  ]),
  ...cases('Trajectory', false, [
    ['reward-string', { reward: '1.0' }],
    ['reward-null', { reward: null }],
    ['metrics-string', { metrics: { verdict: 'good' } }],
    ['metrics-null', { metrics: { a: null } }],
    ['policy-version-float', { initial_policy_version: 1.5 }],
    ['policy-version-string', { final_policy_version: '3' }],
    ['logs-numbers', { logs: [1, 2] }],
    ['messages-not-array', { messages_and_choices: 'hi' }],
    ['bad-message', { messages_and_choices: [{ role: 'user' }] }],
    ['start-time-not-a-date', { start_time: 'yesterday' }],
    ['tools-custom', { tools: [{ type: 'custom', custom: { name: 'python' } }] }],
    ['exchanges-not-object', { exchanges: 'none' }],
    // The newer document opens `metadata` to any JSON value; the primary one (and so we) takes scalars.
    ['metadata-nested', { metadata: { tags: ['a', 'b'], source: { name: 'x' } } }],
    ['metadata-array', { metadata: { tags: ['a', 'b'] } }],
    ['not-an-object', []],
  ]),
  ...cases('PydanticException', true, [
    ['plain', { type: 'ValueError', message: 'bad', traceback: 'Traceback ...' }],
  ]),
  ...cases('PydanticException', false, [
    ['missing-traceback', { type: 'ValueError', message: 'bad' }],
    ['traceback-null', { type: 'ValueError', message: 'bad', traceback: null }],
  ]),
  ...cases('TrajectoryException', true, [['alias', { type: 'KeyError', message: "'x'", traceback: '' }]]),
  ...cases('TrajectoryGroup', true, [
    ['art-dump', artGroup],
    ['trajectories-only', { trajectories: [{}] }],
    ['empty-trajectories', { trajectories: [] }],
    ['empty-extras', { trajectories: [artTrajectory], exceptions: [], metadata: {}, metrics: {}, logs: [] }],
  ]),
  ...cases('TrajectoryGroup', false, [
    // The newer document makes `trajectories` optional; the primary one requires it.
    ['missing-trajectories', { exceptions: [] }],
    ['trajectories-object', { trajectories: {} }],
    ['bad-trajectory', { trajectories: [{ reward: 'high' }] }],
    ['metrics-string', { trajectories: [], metrics: { judge: 'ok' } }],
    ['exception-missing-message', { trajectories: [], exceptions: [{ type: 'E', traceback: '' }] }],
  ]),
  ...cases('LogRequest', true, [
    ['art-with-model-id', { model_id: MODEL_ID, split: 'train', trajectory_groups: [artGroup] }],
    ['plain', { split: 'val', trajectory_groups: [{ trajectories: [{ reward: 1 }] }] }],
    ['empty-groups', { split: 'train', trajectory_groups: [] }],
  ]),
  ...cases('LogRequest', false, [
    ['missing-split', { trajectory_groups: [] }],
    ['missing-groups', { split: 'train' }],
    ['split-number', { split: 1, trajectory_groups: [] }],
    ['bad-group', { split: 'train', trajectory_groups: [{ trajectories: [{ reward: 'x' }] }] }],
  ]),
];
