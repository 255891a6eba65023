/**
 * Capture against the real local service over loopback: multi-turn chats, concurrent rollouts on
 * one client, and a model (SFT-trained here to call tools) making parallel tool calls.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureCompletions } from '../../src/rollout/capture-completions.js';
import { gatherTrajectoryGroups } from '../../src/rollout/gather-trajectory-groups.js';
import { recordTrajectory } from '../../src/rollout/rollout-scope.js';
import type { RolloutFn } from '../../src/rollout/rollout-function.js';
import { isChoice, Trajectory, type Choice } from '../../src/schema/index.js';
import { startTestService, type TestService } from '../../src/testing/index.js';

let service: TestService;

beforeAll(async () => {
  service = await startTestService();
});

afterAll(async () => {
  await service?.close();
});

function shape(trajectory: Trajectory): string[] {
  return trajectory.messages_and_choices.map((item) => (isChoice(item) ? 'choice' : item.role));
}

function hasLogprobs(choice: Choice): boolean {
  return (
    (choice.logprobs?.content?.length ?? 0) > 0 &&
    choice.logprobs?.content?.every((token) => Number.isFinite(token.logprob)) === true
  );
}

async function api(path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${service.baseURL}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${service.apiKey}`, 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const json = (await response.json()) as Record<string, unknown>;
  if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

describe('capture against the local service', () => {
  it('records concurrent multi-turn rollouts on one shared client into their own trajectories, with logprobs', async () => {
    const client = captureCompletions(new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0 }), {
      defaults: { model: service.baseModel, logprobs: true, max_tokens: 8 },
    });
    const rollout: RolloutFn<string> = async (topic, { index }) => {
      const messages: OpenAI.ChatCompletionMessageParam[] = [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: `Tell me about ${topic} (${index}).` },
      ];
      for (let turn = 0; turn < 3; turn += 1) {
        const completion = await client.chat.completions.create({ model: service.baseModel, messages });
        const message = completion.choices[0]?.message;
        if (message === undefined) throw new Error('no choice');
        messages.push(message, { role: 'user', content: `More about ${topic}, turn ${turn + 1}.` });
      }
    };
    const groups = await gatherTrajectoryGroups(['cats', 'dogs'], rollout, { groupSize: 2, concurrency: 4 });
    for (const [groupIndex, group] of groups.entries()) {
      const topic = groupIndex === 0 ? 'cats' : 'dogs';
      expect(group.trajectories).toHaveLength(2);
      for (const [index, trajectory] of group.trajectories.entries()) {
        expect(shape(trajectory)).toEqual(['system', 'user', 'choice', 'user', 'choice', 'user', 'choice']);
        const users = trajectory.messages_and_choices.filter((item) => !isChoice(item) && item.role === 'user');
        expect(users[0]).toMatchObject({ content: `Tell me about ${topic} (${index}).` });
        expect(users.slice(1).every((item) => !isChoice(item) && String(item.content).includes(topic))).toBe(true);
        expect(trajectory.messages_and_choices.filter(isChoice).every(hasLogprobs)).toBe(true);
        expect(trajectory.additional_histories).toEqual([]);
      }
    }
    // What was captured is what the service accepts for logging (the wire contract).
    const model = await api('/preview/models', {
      project: 'capture',
      name: 'multi-turn',
      base_model: service.baseModel,
      return_existing: true,
    });
    await api(`/preview/models/${String(model['id'])}/log`, { split: 'train', trajectory_groups: groups });
  });

  it('keeps the openai SDK helpers: .withResponse() returns the response and the completion is recorded', async () => {
    const client = captureCompletions(new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0 }));
    const { result, trajectory } = await recordTrajectory(async () => {
      const { data, response } = await client.chat.completions
        .create({
          model: service.baseModel,
          messages: [{ role: 'user', content: 'hi' }],
          logprobs: true,
          max_tokens: 4,
        })
        .withResponse();
      return { status: response.status, content: data.choices[0]?.message.content };
    });
    expect(result.status).toBe(200);
    const choices = Trajectory.parse(trajectory).messages_and_choices.filter(isChoice);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.message.content).toBe(result.content);
  });

  it('records a streamed completion with its logprobs once the stream is read', async () => {
    const client = captureCompletions(new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0 }));
    const { result, trajectory } = await recordTrajectory(async () => {
      const stream = await client.chat.completions.create({
        model: service.baseModel,
        messages: [{ role: 'user', content: 'stream please' }],
        logprobs: true,
        max_tokens: 8,
        stream: true,
      });
      let text = '';
      let tokens = 0;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        tokens += chunk.choices[0]?.logprobs?.content?.length ?? 0;
      }
      return { text, tokens };
    });
    const choices = Trajectory.parse(trajectory).messages_and_choices.filter(isChoice);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.message.content ?? '').toBe(result.text);
    expect(result.tokens).toBeGreaterThan(0);
    expect(choices[0]?.logprobs?.content).toHaveLength(result.tokens);
  });

  it('records parallel tool calls, the tool results sent back and the final answer of a tool-calling model', async () => {
    const tools: OpenAI.ChatCompletionFunctionTool[] = [
      {
        type: 'function',
        function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
      },
    ];
    // Teach the tiny model one tool-calling conversation (it samples noise before training).
    const calls = [
      { id: 'a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      { id: 'b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
    ];
    const callRow = {
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, tool_calls: calls },
      ],
      tools,
    };
    const answerRow = {
      messages: [
        ...callRow.messages,
        { role: 'tool', tool_call_id: 'a', content: '21' },
        { role: 'tool', tool_call_id: 'b', content: '9' },
        { role: 'assistant', content: 'Paris' },
      ],
      tools,
    };
    const lines = Array.from({ length: 160 }, (_unused, index) =>
      JSON.stringify(index % 2 === 0 ? callRow : answerRow),
    ).join('\n');
    const model = await api('/preview/models', {
      project: 'capture',
      name: 'tools',
      base_model: service.baseModel,
      return_existing: true,
    });
    const job = await api('/preview/sft-training-jobs', {
      model_id: model['id'],
      training_data_url: `data:application/jsonl;base64,${Buffer.from(lines).toString('base64')}`,
      config: { learning_rate: 1e-2, batch_size: 8, assistant_turns: 'all' },
    });
    for (let polls = 0; ; polls += 1) {
      const status = await api(`/preview/training-jobs/${String(job['id'])}`, undefined);
      if (status['status'] === 'COMPLETED') break;
      if (status['status'] === 'FAILED' || polls > 600)
        throw new Error(`SFT job did not complete: ${JSON.stringify(status)}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }

    const client = captureCompletions(new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0 }), {
      defaults: { logprobs: true, temperature: 0, max_tokens: 150 },
    });
    const inference = `wandb-artifact:///${String(model['entity'])}/capture/tools`;
    const rollout: RolloutFn<string> = async () => {
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'weather?' }];
      for (let turn = 0; turn < 3; turn += 1) {
        const completion = await client.chat.completions.create({ model: inference, messages, tools });
        const message = completion.choices[0]?.message;
        if (message === undefined) throw new Error('no choice');
        messages.push(message);
        if (!message.tool_calls?.length) return;
        for (const call of message.tool_calls) {
          if (call.type !== 'function') continue;
          const { city } = JSON.parse(call.function.arguments) as { city: string };
          messages.push({ role: 'tool', tool_call_id: call.id, content: city === 'Paris' ? '21' : '9' });
        }
      }
    };
    const [group] = await gatherTrajectoryGroups(['weather'], rollout);
    const trajectory = group?.trajectories[0] as Trajectory;
    expect(shape(trajectory)).toEqual(['user', 'choice', 'tool', 'tool', 'choice']);
    const callChoice = trajectory.messages_and_choices[1] as Choice;
    expect(callChoice.finish_reason).toBe('tool_calls');
    expect(
      callChoice.message.tool_calls?.map((call) => (call.type === 'function' ? call.function.arguments : '')),
    ).toEqual(['{"city":"Paris"}', '{"city":"Oslo"}']);
    const toolMessages = trajectory.messages_and_choices.slice(2, 4);
    expect(
      toolMessages.map((item) => (isChoice(item) || item.role !== 'tool' ? undefined : item.tool_call_id)),
    ).toEqual(callChoice.message.tool_calls?.map((call) => call.id));
    expect(trajectory.tools).toEqual(tools);
    expect(trajectory.messages_and_choices.filter(isChoice).every(hasLogprobs)).toBe(true);
  });
});
