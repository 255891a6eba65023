/**
 * An MCP environment trained with `RLTrainer` on the local service (the real engine, not a
 * script): two RL steps whose rollouts each start a `server-memory` of their own (the `setup`
 * stores the task in it through `context.tools`, so every rollout really uses its server), the
 * rubric's means in the history, and no server process left when the run ends.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { defineEnvironment, finalAssistantText, LocalBackend, mcpServer, RLTrainer, TrainableModel } from 'policyloop';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MARK_VARIABLE, markedProcesses, newMark, referenceServer } from './support/mcp-harness.js';

let backend: LocalBackend;
let dataDir: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'mcp-training-'));
  backend = await LocalBackend.start({ dataDir });
});
afterAll(async () => {
  await backend?.close();
  await rm(dataDir, { recursive: true, force: true });
});

it('trains two RL steps on an environment of per-rollout MCP servers; none is left after', async () => {
  const mark = newMark();
  const stored: string[] = [];
  const environment = defineEnvironment({
    name: 'mcp-memory',
    dataset: ['tea', 'jazz', 'milk', 'rain'].map((word) => ({ prompt: `Remember ${word}.`, info: { word } })),
    systemPrompt: 'Use the tools.',
    maxTurns: 2,
    tools: [
      mcpServer(
        ({ tempDir }) => ({
          command: process.execPath,
          args: [referenceServer('memory')],
          env: { [MARK_VARIABLE]: mark, MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl') },
        }),
        { name: 'memory', tools: ['create_entities', 'read_graph'] },
      ),
    ],
    setup: async (task, context) => {
      const word = String(task.info?.['word']);
      const created = await context.tools.call('create_entities', {
        entities: [{ name: word, entityType: 'word', observations: [] }],
      });
      if (created.isError) throw new Error(created.content);
      const graph = await context.tools.call('read_graph', {});
      // Only this rollout's word: its server is its own.
      stored.push((JSON.parse(graph.content) as { entities: { name: string }[] }).entities.map((e) => e.name).join());
    },
    reward: {
      brevity: (trajectory) => 1 - Math.min(finalAssistantText(trajectory).length, 60) / 60,
      turns: { fn: (trajectory) => Number(trajectory.metrics['num_turns'] ?? 0), weight: 0 },
    },
  });
  const model = await new TrainableModel({
    project: 'mcp',
    name: 'memory-agent',
    baseModel: 'policyloop/agent-chat',
  }).register(backend);
  const trainer = new RLTrainer({
    model,
    environment,
    groupSize: 4,
    groupsPerStep: 2,
    maxSteps: 2,
    sampling: { max_tokens: 8 },
    validation: false,
    progress: false,
  });
  const summary = await trainer.run();
  expect(summary.step).toBe(2);
  expect(await model.getStep()).toBe(2);
  const rows = (await model.history()).filter((row) => row['train/reward'] !== undefined);
  expect(rows).toHaveLength(2);
  for (const row of rows) expect(row['train/brevity']).toEqual(expect.any(Number));
  expect(stored.length).toBeGreaterThanOrEqual(16);
  expect(stored.every((names) => ['tea', 'jazz', 'milk', 'rain'].includes(names))).toBe(true);
  expect(markedProcesses(mark)).toEqual([]);
  await model.close();
});
