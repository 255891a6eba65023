/**
 * `generateTasks` against a stub chat-completions endpoint (node:http on 127.0.0.1, answering
 * from a list): the request asks for structured output with the tools in the prompt; good JSON
 * resolves; bad JSON then good is retried; always bad fails after 3 attempts with the last answer.
 * And the tools of an `mcpServer` (the real `server-memory`) are listed for it, its process gone.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateTasks, InvalidArgumentError, mcpServer, PromptedModel, TaskGenerationError } from 'policyloop';
import type { ToolDefinition } from 'policyloop/training';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MARK_VARIABLE, markedProcesses, newMark, referenceServer } from './support/mcp-harness.js';

/** The stub's answers, in order (the last repeats), and the bodies it received. */
let answers: string[] = [];
let bodies: Record<string, unknown>[] = [];
let server: Server;
let baseURL: string;

beforeAll(async () => {
  server = createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    request.on('end', () => {
      bodies.push(JSON.parse(text) as Record<string, unknown>);
      const content = answers[Math.min(bodies.length - 1, answers.length - 1)] ?? '';
      response.setHeader('content-type', 'application/json');
      response.end(
        JSON.stringify({
          id: `chatcmpl-${bodies.length}`,
          object: 'chat.completion',
          created: 0,
          model: 'writer',
          choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content }, logprobs: null }],
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(() => {
  answers = [];
  bodies = [];
});

const writer = () => new PromptedModel({ project: 'tasks', name: 'writer', model: 'writer', baseURL, apiKey: 'k' });

const weather: ToolDefinition = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

const good = JSON.stringify({
  tasks: [
    { task: 'Is it raining in Oslo?', difficulty: 1 },
    { task: 'Which is warmer today, Lima or Rome?', difficulty: 3 },
  ],
});

describe('generateTasks', () => {
  it('asks once with a JSON schema response format and the tools in the prompt, and resolves the tasks', async () => {
    answers = [good];
    const tasks = await generateTasks({ tools: [weather], model: writer(), count: 2, instructions: 'Cities only.' });
    expect(tasks).toEqual([
      { task: 'Is it raining in Oslo?', difficulty: 1 },
      { task: 'Which is warmer today, Lima or Rome?', difficulty: 3 },
    ]);
    expect(bodies).toHaveLength(1);
    const body = bodies[0] as { model: string; messages: { content: string }[]; response_format: unknown };
    expect(body.model).toBe('writer');
    expect(body.response_format).toMatchObject({
      type: 'json_schema',
      json_schema: { name: 'tasks', strict: true, schema: { required: ['tasks'] } },
    });
    const prompt = body.messages.map((message) => message.content).join('\n');
    expect(prompt).toContain('get_weather: The weather in a city');
    expect(prompt).toContain('Write 2 tasks.');
    expect(prompt).toContain('Cities only.');
  });

  it('asks again after bad JSON, then resolves the good answer', async () => {
    answers = ['Sure! Here are your tasks: {tasks: [', good];
    const tasks = await generateTasks({ tools: [weather], model: writer(), count: 2 });
    expect(tasks).toHaveLength(2);
    expect(bodies).toHaveLength(2);
  });

  it('asks again after the wrong shape (a difficulty of 9, too few tasks)', async () => {
    answers = [
      JSON.stringify({ tasks: [{ task: 'a', difficulty: 9 }] }),
      JSON.stringify({ tasks: [{ task: 'a', difficulty: 2 }] }),
      good,
    ];
    const tasks = await generateTasks({ tools: [weather], model: writer(), count: 2 });
    expect(tasks.map((task) => task.difficulty)).toEqual([1, 3]);
    expect(bodies).toHaveLength(3);
  });

  it('fails after 3 attempts in all with a TaskGenerationError carrying the last answer', async () => {
    answers = ['not json', 'still not json', '{"tasks": "nope"}'];
    const error = await generateTasks({ tools: [weather], model: writer(), count: 2 }).catch(
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(TaskGenerationError);
    expect(error).toMatchObject({ attempts: 3, raw: '{"tasks": "nope"}' });
    expect((error as Error).message).toMatch(/after 3 attempts, the answer is not \{"tasks"/);
    expect(bodies).toHaveLength(3);
  });

  it('lists the tools of an mcpServer source (started, then closed: no process left)', async () => {
    answers = [good];
    const mark = newMark();
    const memory = mcpServer(
      { command: process.execPath, args: [referenceServer('memory')], env: { [MARK_VARIABLE]: mark } },
      { name: 'memory', tools: ['create_entities', 'search_nodes'] },
    );
    await generateTasks({ tools: [memory, weather], model: writer(), count: 2 });
    const prompt = (bodies[0] as { messages: { content: string }[] }).messages.map((m) => m.content).join('\n');
    expect(prompt).toMatch(/- create_entities: /);
    expect(prompt).toMatch(/- search_nodes: /);
    expect(prompt).toMatch(/- get_weather: /);
    expect(prompt).not.toMatch(/- read_graph: /);
    expect(markedProcesses(mark)).toEqual([]);
  });

  it('refuses bad params before any request', async () => {
    await expect(generateTasks({ tools: [], model: writer(), count: 2 })).rejects.toThrow(InvalidArgumentError);
    await expect(generateTasks({ tools: [weather], model: writer(), count: 0 })).rejects.toThrow(/count/);
    await expect(generateTasks({ tools: [{ name: 'x' } as never], model: writer(), count: 1 })).rejects.toThrow(
      /tool definition/,
    );
    expect(bodies).toHaveLength(0);
  });
});
