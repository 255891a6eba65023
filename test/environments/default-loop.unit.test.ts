/**
 * The default agent loop of an environment, against the local service over a scripted engine
 * (`ScriptedBackend`: the real routes, store and recording; the engine answers from a script, so
 * the model's tool calls are deterministic). What is checked is what a user sees: the groups'
 * trajectories (messages, Choices and tool messages in order), metrics, rewards, and the requests
 * the service received.
 */
import {
  defineEnvironment,
  exactMatch,
  functionTool,
  gatherTrajectoryGroups,
  isChoice,
  PromptedModel,
  type Trajectory,
  type TrainableModel,
} from 'policyloop';
import { makeChoice, type ScriptedSampleRequest } from 'policyloop/testing';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { scriptedTurns } from '../support/scripted-models.js';

const scripted = scriptedTurns('env', 'loop');
const freshModel = (): Promise<TrainableModel> => scripted.freshModel();

/** The last message of a request. */
function lastMessage(request: ScriptedSampleRequest): { role?: string; content?: unknown } {
  const messages = request.body.messages as { role?: string; content?: unknown }[];
  return messages[messages.length - 1] ?? {};
}

/** A trajectory as the kinds of its items in order: `system`, `user`, `choice`, `tool`. */
function shape(trajectory: Trajectory): string[] {
  return trajectory.messages_and_choices.map((item) => (isChoice(item) ? 'choice' : item.role));
}

const add = functionTool({
  name: 'add',
  description: 'Adds two numbers',
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

describe('the default agent loop', () => {
  it('calls the tools the model asks for and answers with tool messages, all recorded in order', async () => {
    // Turn 1: call add(2, 3); turn 2: answer with what the tool said.
    scripted.script = (request) =>
      lastMessage(request).role === 'tool'
        ? String(lastMessage(request).content)
        : makeChoice(null, { toolCalls: [{ id: 'call_a', name: 'add', arguments: { a: 2, b: 3 } }] });
    const environment = defineEnvironment({
      name: 'adder',
      dataset: [{ prompt: 'What is 2+3?', answer: '5' }],
      systemPrompt: 'Use the tools.',
      tools: [add],
      reward: {
        correct: exactMatch((task) => String(task.answer)),
        turns: { fn: (t) => Number(t.metrics['num_turns'] ?? 0), weight: 0 },
      },
    });
    const model = await freshModel();
    const run = await environment.start({ model, sampling: { temperature: 0.5, max_tokens: 32 } });
    expect(run.rubric).toEqual([
      { name: 'correct', weight: 1 },
      { name: 'turns', weight: 0 },
    ]);
    const tasks = [];
    for await (const task of environment.dataset()) tasks.push(task);
    const [group] = await gatherTrajectoryGroups(tasks, run.rollout, { reward: run.reward, groupSize: 2 });
    await run.close();

    const trajectory = group!.trajectories[0]!;
    expect(shape(trajectory)).toEqual(['system', 'user', 'choice', 'tool', 'choice']);
    expect(trajectory.messages_and_choices[3]).toEqual({ role: 'tool', tool_call_id: 'call_a', content: '5' });
    expect(trajectory.metrics).toMatchObject({ num_turns: 2, tool_calls: 1, tool_errors: 0, correct: 1, turns: 2 });
    expect(trajectory.reward).toBe(1);
    expect(trajectory.tools?.map((tool) => tool.function.name)).toEqual(['add']);
    expect(trajectory.tools?.[0]?.function.parameters).toMatchObject({
      type: 'object',
      properties: { a: { type: 'number' }, b: { type: 'number' } },
    });
    // Every request carried the sampling, the tools and the model's name.
    const requests = scripted.backend.samples.filter((sample) => sample.body.model === model.inferenceName());
    expect(requests).toHaveLength(4);
    for (const { body } of requests) {
      expect(body).toMatchObject({ temperature: 0.5, max_tokens: 32 });
      expect((body.tools as unknown[] | undefined)?.length).toBe(1);
    }
    await model.close();
  });

  it('returns a throwing tool, an unknown tool and bad JSON arguments to the model as error tool messages', async () => {
    scripted.script = (request) => {
      const messages = request.body.messages as { role?: string }[];
      if (messages.some((message) => message.role === 'tool')) return 'done';
      return makeChoice(null, {
        toolCalls: [
          { id: 'c1', name: 'fail', arguments: {} },
          { id: 'c2', name: 'nope', arguments: {} },
          { id: 'c3', name: 'add', arguments: '{"a": 1,' },
          { id: 'c4', name: 'add', arguments: { a: 'one', b: 2 } },
          { id: 'c5', name: 'add', arguments: { a: 1, b: 2 } },
        ],
      });
    };
    const environment = defineEnvironment({
      name: 'errors',
      dataset: [{ prompt: 'go' }],
      tools: [
        add,
        functionTool({
          name: 'fail',
          parameters: { type: 'object', properties: {} },
          execute: () => {
            throw new Error('the disk is full');
          },
        }),
      ],
    });
    const model = await freshModel();
    const run = await environment.start({ model });
    const [group] = await gatherTrajectoryGroups([{ prompt: 'go' }], run.rollout);
    await run.close();
    const trajectory = group!.trajectories[0]!;
    expect(shape(trajectory)).toEqual(['user', 'choice', 'tool', 'tool', 'tool', 'tool', 'tool', 'choice']);
    const tools = trajectory.messages_and_choices.filter((item) => !isChoice(item) && item.role === 'tool') as {
      tool_call_id: string;
      content: string;
    }[];
    expect(tools.map((message) => message.tool_call_id)).toEqual(['c1', 'c2', 'c3', 'c4', 'c5']);
    expect(tools[0]!.content).toBe('Error: the disk is full');
    expect(tools[1]!.content).toMatch(/^Error: unknown tool `nope`; the tools are: `add`, `fail`$/);
    expect(tools[2]!.content).toMatch(/^Error: tool `add`: the arguments are not valid JSON/);
    expect(tools[3]!.content).toMatch(/^Error: invalid arguments for tool `add`: a: /);
    expect(tools[4]!.content).toBe('3');
    expect(trajectory.metrics).toMatchObject({ num_turns: 2, tool_calls: 5, tool_errors: 4 });
    await model.close();
  });

  it('stops after maxTurns even when the model keeps calling tools', async () => {
    scripted.script = () => makeChoice(null, { toolCalls: [{ name: 'add', arguments: { a: 1, b: 1 } }] });
    const environment = defineEnvironment({ name: 'loop', dataset: [{ prompt: 'go' }], tools: [add], maxTurns: 3 });
    const model = await freshModel();
    const run = await environment.start({ model });
    const [group] = await gatherTrajectoryGroups([{ prompt: 'go' }], run.rollout);
    await run.close();
    const trajectory = group!.trajectories[0]!;
    expect(trajectory.metrics).toMatchObject({ num_turns: 3, tool_calls: 3, tool_errors: 0 });
    expect(shape(trajectory)).toEqual(['user', 'choice', 'tool', 'choice', 'tool', 'choice', 'tool']);
    await model.close();
  });

  it('plays a task given as messages, without tools (no `tools` in the request)', async () => {
    scripted.script = () => 'Paris';
    const environment = defineEnvironment({
      name: 'single',
      dataset: [{ prompt: [{ role: 'user' as const, content: 'Capital of France?' }], answer: 'Paris' }],
      reward: exactMatch((task) => String(task.answer)),
    });
    const model = await freshModel();
    const run = await environment.start({ model });
    expect(run.rubric).toEqual([]);
    const [group] = await gatherTrajectoryGroups(
      [{ prompt: [{ role: 'user' as const, content: 'Capital of France?' }], answer: 'Paris' }],
      run.rollout,
      { reward: run.reward },
    );
    await run.close();
    const trajectory = group!.trajectories[0]!;
    expect(shape(trajectory)).toEqual(['user', 'choice']);
    expect(trajectory.reward).toBe(1);
    expect(trajectory.tools ?? null).toBeNull();
    expect(trajectory.metrics).toMatchObject({ num_turns: 1, tool_calls: 0 });
    const last = scripted.backend.samples.filter((sample) => sample.body.model === model.inferenceName()).at(-1);
    expect(last?.body.tools).toBeUndefined();
    await model.close();
  });

  it('plays with a PromptedModel too: context.model is the model evaluated', async () => {
    scripted.script = () => 'hello';
    const connection = await scripted.backend.connect();
    // The base model itself, as a prompted model on the service's chat completions.
    const prompted = new PromptedModel({
      name: 'prompted',
      project: 'env',
      model: 'policyloop/tiny-chat',
      baseURL: connection.inferenceBaseURL,
      apiKey: connection.apiKey,
      fetch: connection.fetch,
    });
    const seen: unknown[] = [];
    const environment = defineEnvironment({
      name: 'prompted',
      dataset: [{ prompt: 'hi', answer: 'hello' }],
      setup: (_task, context) => {
        seen.push(context.model);
      },
      reward: exactMatch((task) => String(task.answer)),
    });
    const run = await environment.start({ model: prompted });
    const [group] = await gatherTrajectoryGroups([{ prompt: 'hi', answer: 'hello' }], run.rollout, {
      reward: run.reward,
    });
    await run.close();
    expect(seen).toEqual([prompted]);
    expect(group!.trajectories[0]!.reward).toBe(1);
    expect(scripted.backend.samples.at(-1)?.body.model).toBe('policyloop/tiny-chat');
  });
});
