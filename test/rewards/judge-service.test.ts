/**
 * The relative judge with the local service's tiny model as judge: untrained, its answers are noise
 * (visible JudgeErrors, the parse fallback); trained by SFT on the answer format, it scores a
 * gathered group through the default JSON parsing.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatherTrajectoryGroups } from '../../src/rollout/gather-trajectory-groups.js';
import { JudgeError } from '../../src/rewards/reward-errors.js';
import { relativeJudge, type JudgeScore } from '../../src/rewards/relative-judge.js';
import { makeGroup, startTestService, type TestService } from '../../src/testing/index.js';

let service: TestService;
let client: OpenAI;

beforeAll(async () => {
  service = await startTestService();
  client = new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0 });
});

afterAll(async () => {
  await service?.close();
});

const group = () =>
  makeGroup([
    { user: 'What is 2+2?', answer: '4', reward: 1 },
    { user: 'What is 2+2?', answer: '5', reward: 0 },
  ]);

/** A prompt short enough for the tiny model's 256-token context. */
const compactPrompt = (conversations: readonly (readonly { content?: unknown }[])[]) => [
  { role: 'system' as const, content: 'Score each answer 0..1 as JSON {"scores":[...]}.' },
  {
    role: 'user' as const,
    content: conversations
      .map((messages, index) => `${index + 1}: ${String(messages[messages.length - 1]?.content)}`)
      .join('\n'),
  },
];

describe('relativeJudge with the local model', () => {
  it('raises a visible JudgeError with the service error when the prompt does not fit the judge', async () => {
    const judge = relativeJudge({ client, model: service.baseModel });
    const error = await judge(group()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(JudgeError);
    expect(error).toMatchObject({ reason: 'request', retryable: false });
    expect((error as JudgeError).cause).toMatchObject({ status: 422 });
  });

  it('raises a visible JudgeError carrying the raw answer when the judge answers noise', async () => {
    const judge = relativeJudge({
      client,
      model: service.baseModel,
      buildMessages: compactPrompt,
      requestParams: { max_tokens: 24 },
    });
    const scored = group();
    const error = await judge(scored).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(JudgeError);
    expect((error as JudgeError).reason).toBe('parse');
    expect(typeof (error as JudgeError).raw).toBe('string');
    expect(scored.trajectories.map((trajectory) => trajectory.reward)).toEqual([1, 0]);
  });

  it('fails the gather with the JudgeError instead of dropping the group', async () => {
    const judge = relativeJudge({
      client,
      model: service.baseModel,
      buildMessages: compactPrompt,
      requestParams: { max_tokens: 16 },
    });
    await expect(
      gatherTrajectoryGroups(['q'], async () => ({ reward: 1 }), { groupSize: 2, scoreGroup: judge }),
    ).rejects.toBeInstanceOf(JudgeError);
  });

  it('scores through the parse fallback when one is given', async () => {
    // A deliberately simple fallback: the longer the judge's answer, the higher the first score.
    const parse = (content: string, count: number): JudgeScore[] =>
      Array.from({ length: count }, (_unused, index) => ({
        trajectory_id: String(index + 1),
        explanation: `fallback over ${content.length} characters`,
        score: index === 0 ? Math.min(1, content.length / 100) : 0,
      }));
    const judge = relativeJudge({
      client,
      model: service.baseModel,
      buildMessages: compactPrompt,
      requestParams: { max_tokens: 16 },
      parse,
    });
    const scored = await judge(group());
    expect(scored.trajectories[1]?.reward).toBe(0);
    expect(scored.trajectories.map((trajectory) => trajectory.metrics['independent_reward'])).toEqual([1, 0]);
    expect(scored.trajectories[0]?.logs[0]).toMatch(/^judge: fallback over \d+ characters$/);
  });

  it('scores a gathered group through the default JSON answer of a local model trained to judge', async () => {
    // Teach the tiny model the judge's answer format for this prompt (it samples noise before training).
    const answer = {
      scores: [
        { trajectory_id: '1', explanation: 'right sum', score: 0.9 },
        { trajectory_id: '2', explanation: 'wrong sum', score: 0.1 },
      ],
    };
    const prompt = compactPrompt([[{ content: '4' }], [{ content: '5' }]]);
    const row = JSON.stringify({ messages: [...prompt, { role: 'assistant', content: JSON.stringify(answer) }] });
    const trained = await client.post<{ id: string; entity: string }>('/preview/models', {
      body: { project: 'judge', name: 'json-judge', base_model: service.baseModel, return_existing: true },
    });
    const job = await client.post<{ id: string }>('/preview/sft-training-jobs', {
      body: {
        model_id: trained.id,
        training_data_url: `data:application/jsonl;base64,${Buffer.from(Array(160).fill(row).join('\n')).toString('base64')}`,
        config: { learning_rate: 1e-2, batch_size: 8 },
      },
    });
    for (let polls = 0; ; polls += 1) {
      const status = await client.get<{ status: string }>(`/preview/training-jobs/${job.id}`);
      if (status.status === 'COMPLETED') break;
      if (status.status === 'FAILED' || polls > 600)
        throw new Error(`SFT job did not complete: ${JSON.stringify(status)}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }

    const judge = relativeJudge({
      client,
      model: `wandb-artifact:///${trained.entity}/judge/json-judge`,
      buildMessages: compactPrompt,
      requestParams: { temperature: 0, max_tokens: 160 },
    });
    const groups = await gatherTrajectoryGroups(
      ['What is 2+2?'],
      // Hand-built answers ('4' right, '5' wrong) stand for what an agent would have produced.
      async (_question, { index }) => ({
        messages_and_choices: group().trajectories[index]?.messages_and_choices ?? [],
        reward: index === 0 ? 1 : 0,
      }),
      { groupSize: 2, scoreGroup: judge },
    );
    const [scored] = groups;
    expect(scored?.trajectories.map((trajectory) => trajectory.reward)).toEqual([0.9, 0.1]);
    expect(scored?.trajectories.map((trajectory) => trajectory.metrics['independent_reward'])).toEqual([1, 0]);
    expect(scored?.trajectories.map((trajectory) => trajectory.metrics['judge_score'])).toEqual([0.9, 0.1]);
    expect(scored?.trajectories.map((trajectory) => trajectory.logs.at(-1))).toEqual([
      'judge: right sum',
      'judge: wrong sum',
    ]);
  });

  it('wraps an HTTP error of the judge request (unknown model) in JudgeError', async () => {
    const judge = relativeJudge({ client, model: 'no-such-model' });
    const error = await judge(group()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(JudgeError);
    expect(error).toMatchObject({ reason: 'request' });
    expect((error as JudgeError).cause).toBeInstanceOf(OpenAI.APIError);
  });
});
