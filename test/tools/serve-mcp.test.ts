/**
 * `serveMcp`: a rollout's tools (a per-rollout `server-memory` and a function tool) served at a
 * loopback MCP URL, reached by a framework's own MCP client (the Agents SDK's
 * `MCPServerStreamableHttp`) inside an environment's rollout: it lists every tool of the
 * environment, and its calls land on that rollout's own server.
 */
import path from 'node:path';
import { MCPServerStreamableHttp } from '@openai/agents';
import { defineEnvironment, functionTool, gatherTrajectoryGroups, mcpServer, TrainableModel } from 'policyloop';
import { serveMcp } from 'policyloop/training';
import { ScriptedBackend } from 'policyloop/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { MARK_VARIABLE, markedProcesses, newMark, referenceServer } from './support/mcp-harness.js';

let backend: ScriptedBackend;
beforeAll(async () => {
  backend = await ScriptedBackend.start({ sample: () => 'done' });
});
afterAll(async () => {
  await backend?.close();
});

it("a framework's MCP client reaches the rollout's own servers through serveMcp", async () => {
  const mark = newMark();
  const seen: { tools: string[]; graph: string; echoed: string }[] = [];
  const urls: string[] = [];
  const environment = defineEnvironment({
    name: 'bridged',
    dataset: [{ id: 1 }, { id: 2 }],
    tools: [
      mcpServer(
        ({ tempDir }) => ({
          command: process.execPath,
          args: [referenceServer('memory')],
          env: { [MARK_VARIABLE]: mark, MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl') },
        }),
        { name: 'memory', tools: ['create_entities', 'read_graph'] },
      ),
      functionTool({
        name: 'shout',
        parameters: z.object({ text: z.string() }),
        execute: ({ text }) => text.toUpperCase(),
      }),
    ],
    rollout: async (task, context) => {
      const endpoint = await serveMcp(context.tools, { signal: context.signal });
      urls.push(endpoint.url);
      const client = new MCPServerStreamableHttp({ url: endpoint.url, name: 'environment' });
      try {
        await client.connect();
        const tools = (await client.listTools()).map((tool) => tool.name).sort();
        await client.callTool('create_entities', {
          entities: [{ name: `task-${task.id}`, entityType: 'task', observations: [] }],
        });
        const graph = await client.callTool('read_graph', {});
        const echoed = await client.callTool('shout', { text: 'hi' });
        const text = (content: unknown) => (content as { text?: string }[]).map((part) => part.text ?? '').join('');
        seen.push({ tools, graph: text(graph), echoed: text(echoed) });
      } finally {
        await client.close();
        await endpoint.close();
      }
    },
  });
  const model = await new TrainableModel({
    project: 'mcp',
    name: 'bridged',
    baseModel: 'policyloop/tiny-chat',
  }).register(backend);
  const run = await environment.start({ model });
  await gatherTrajectoryGroups([{ id: 1 }, { id: 2 }], run.rollout, { groupSize: 1 });
  await run.close();
  expect(seen).toHaveLength(2);
  for (const rollout of seen) {
    expect(rollout.tools).toEqual(['create_entities', 'read_graph', 'shout']);
    expect(rollout.echoed).toBe('HI');
    // Each rollout's graph holds its own entity only.
    expect((JSON.parse(rollout.graph) as { entities: unknown[] }).entities).toHaveLength(1);
  }
  expect(seen.map((rollout) => JSON.parse(rollout.graph).entities[0].name).sort()).toEqual(['task-1', 'task-2']);
  expect(new Set(urls).size).toBe(2);
  for (const url of urls) await expect(fetch(url, { method: 'POST' })).rejects.toThrow();
  expect(markedProcesses(mark)).toEqual([]);
  await model.close();
});
