/**
 * MCP servers in an environment, played by the default agent loop against the local service over
 * a scripted engine (`ScriptedBackend`: the model's tool calls are deterministic) with the real
 * reference servers: every rollout gets its own server, its tool results are recorded as tool
 * messages, its temporary folder is removed, and no server process is left after a rollout
 * ends, throws, or is aborted. The start refuses colliding tool names and a missing command
 * before any rollout.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import {
  APIUserAbortError,
  defineEnvironment,
  finalAssistantText,
  functionTool,
  gatherTrajectoryGroups,
  InvalidArgumentError,
  isChoice,
  McpServerError,
  mcpServer,
  RLTrainer,
  type Trajectory,
  type TrainableModel,
} from 'policyloop';
import { makeChoice, type ScriptedSampleRequest } from 'policyloop/testing';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { eventually, MARK_VARIABLE, markedProcesses, newMark, referenceServer } from './support/mcp-harness.js';
import { type ScriptedAnswer, scriptedTurns } from '../support/scripted-models.js';

const scripted = scriptedTurns('mcp', 'env');
const freshModel = (): Promise<TrainableModel> => scripted.freshModel();

type Message = { role?: string; content?: unknown; tool_call_id?: string };

function messagesOf(request: ScriptedSampleRequest): Message[] {
  return request.body.messages as Message[];
}

/** The tool messages of a trajectory. */
function toolMessages(trajectory: Trajectory): Message[] {
  return trajectory.messages_and_choices.filter(
    (item): item is never => !isChoice(item) && (item as Message).role === 'tool',
  ) as Message[];
}

/** A per-rollout memory server whose folders are recorded, its processes marked. */
function recordedMemory(mark: string, tempDirs: string[], name = 'memory') {
  return mcpServer(
    ({ task, tempDir }) => {
      if (task !== undefined) tempDirs.push(tempDir);
      return {
        command: process.execPath,
        args: [referenceServer('memory')],
        env: { MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl'), [MARK_VARIABLE]: mark },
      };
    },
    { name },
  );
}

/**
 * The scripted agent: first it stores an entity named after its place in the group, then it
 * reads the graph, then it answers with what it read.
 */
const rememberThenRead: ScriptedAnswer = (request) => {
  const messages = messagesOf(request);
  const toolTurns = messages.filter((message) => message.role === 'tool').length;
  if (toolTurns === 0) {
    return makeChoice(null, {
      toolCalls: [
        {
          id: 'call_create',
          name: 'create_entities',
          arguments: { entities: [{ name: `note-${request.repeat}`, entityType: 'note', observations: ['hi'] }] },
        },
      ],
    });
  }
  if (toolTurns === 1) return makeChoice(null, { toolCalls: [{ id: 'call_read', name: 'read_graph', arguments: {} }] });
  return String(messages.at(-1)?.content ?? '');
};

/** The entity names in a `read_graph` text. */
function entities(text: string): string[] {
  return (JSON.parse(text) as { entities: { name: string }[] }).entities.map((entity) => entity.name);
}

describe('an environment of MCP servers, played by the default loop', () => {
  it('gives each rollout its own server: each sees only its own entity; results are recorded as tool messages; folders and processes are gone', async () => {
    scripted.script = rememberThenRead;
    const mark = newMark();
    const tempDirs: string[] = [];
    const environment = defineEnvironment({
      name: 'notes',
      dataset: [{ prompt: 'Remember a note, then tell me what you remember.' }],
      tools: [recordedMemory(mark, tempDirs)],
    });
    const model = await freshModel();
    const run = await environment.start({ model });
    const [group] = await gatherTrajectoryGroups(
      [{ prompt: 'Remember a note, then tell me what you remember.' }],
      run.rollout,
      {
        groupSize: 3,
      },
    );
    await run.close();
    const trajectories = group?.trajectories ?? [];
    expect(trajectories).toHaveLength(3);
    const seen = trajectories.map((trajectory) => entities(finalAssistantText(trajectory))).sort();
    expect(seen).toEqual([['note-0'], ['note-1'], ['note-2']]);
    for (const trajectory of trajectories) {
      const tools = toolMessages(trajectory);
      expect(tools.map((message) => message.tool_call_id)).toEqual(['call_create', 'call_read']);
      expect(String(tools[0]?.content)).toContain('"entityType": "note"');
      // The model saw every MCP tool offered, under the server's names.
      const offered = (trajectory.tools ?? []).map((tool) => (tool as { function: { name: string } }).function.name);
      expect(offered).toEqual(expect.arrayContaining(['create_entities', 'read_graph']));
    }
    expect(tempDirs).toHaveLength(3);
    expect(new Set(tempDirs).size).toBe(3);
    for (const tempDir of tempDirs) expect(existsSync(tempDir)).toBe(false);
    expect(markedProcesses(mark)).toEqual([]);
    await model.close();
  });

  it('a rollout that throws after its tools opened leaves no process and no folder', async () => {
    scripted.script = rememberThenRead;
    const mark = newMark();
    const tempDirs: string[] = [];
    const environment = defineEnvironment({
      name: 'throws',
      dataset: [{ prompt: 'anything' }],
      tools: [recordedMemory(mark, tempDirs)],
      setup: async (_task, context) => {
        expect((await context.tools.call('read_graph', {})).isError).toBe(false);
        expect(markedProcesses(mark)).not.toEqual([]);
        throw new Error('setup failed on purpose');
      },
    });
    const model = await freshModel();
    const run = await environment.start({ model });
    await expect(
      gatherTrajectoryGroups([{ prompt: 'anything' }], run.rollout, { groupSize: 2, maxRetries: 0 }),
    ).rejects.toThrow();
    await run.close();
    expect(tempDirs).toHaveLength(2);
    for (const tempDir of tempDirs) expect(existsSync(tempDir)).toBe(false);
    expect(markedProcesses(mark)).toEqual([]);
    await model.close();
  });

  it('an aborted run stops the servers of the rollouts in flight, a tool call hanging included', async () => {
    const mark = newMark();
    // The agent calls a tool that takes 60 s; the run is aborted while it waits.
    let calls = 0;
    scripted.script = () => {
      calls += 1;
      return makeChoice(null, {
        toolCalls: [{ name: 'trigger-long-running-operation', arguments: { duration: 60, steps: 60 } }],
      });
    };
    const environment = defineEnvironment({
      name: 'slow',
      dataset: [{ prompt: 'wait' }],
      tools: [
        mcpServer(
          { command: process.execPath, args: [referenceServer('everything')], env: { [MARK_VARIABLE]: mark } },
          { name: 'everything', tools: ['trigger-long-running-operation'] },
        ),
      ],
    });
    const model = await freshModel();
    const run = await environment.start({ model });
    const controller = new AbortController();
    const gathered = gatherTrajectoryGroups([{ prompt: 'wait' }], run.rollout, {
      groupSize: 2,
      signal: controller.signal,
    });
    expect(await eventually(() => markedProcesses(mark).length === 2)).toBe(true);
    // Both rollouts' models asked for the tool before the abort.
    expect(await eventually(() => calls >= 2)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 300));
    controller.abort();
    await expect(gathered).rejects.toBeInstanceOf(APIUserAbortError);
    await run.close();
    expect(markedProcesses(mark)).toEqual([]);
    await model.close();
  });
});

describe('starting an environment of MCP servers', () => {
  it('refuses two servers offering one tool name, naming both, and stops them', async () => {
    const mark = newMark();
    const environment = defineEnvironment({
      name: 'twice',
      dataset: [{ prompt: 'x' }],
      tools: [recordedMemory(mark, [], 'memory-a'), recordedMemory(mark, [], 'memory-b')],
    });
    const model = await freshModel();
    const error = await environment.start({ model }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as Error).message).toMatch(/`create_entities` is offered by both `memory-a` and `memory-b`/);
    expect(markedProcesses(mark)).toEqual([]);
    // A function tool of a server's tool name collides too.
    const withFunction = defineEnvironment({
      name: 'clash',
      dataset: [{ prompt: 'x' }],
      tools: [
        functionTool({ name: 'read_graph', parameters: z.object({}), execute: () => 'mine' }),
        recordedMemory(mark, [], 'memory'),
      ],
    });
    await expect(withFunction.start({ model })).rejects.toThrow(/`read_graph` is offered by both .* and `memory`/);
    await model.close();
  });

  it('renaming with options.tools resolves the collision', async () => {
    scripted.script = rememberThenRead;
    const mark = newMark();
    const renamed = mcpServer(
      ({ tempDir }) => ({
        command: process.execPath,
        args: [referenceServer('memory')],
        env: { MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl'), [MARK_VARIABLE]: mark },
      }),
      { name: 'memory-b', tools: { read_graph: 'read_graph_b' } },
    );
    const environment = defineEnvironment({
      name: 'renamed',
      dataset: [{ prompt: 'x' }],
      tools: [recordedMemory(mark, [], 'memory-a'), renamed],
    });
    const model = await freshModel();
    const run = await environment.start({ model });
    await run.close();
    expect(markedProcesses(mark)).toEqual([]);
    await model.close();
  });

  it('a missing command fails the trainer before any rollout, naming the server', async () => {
    const environment = defineEnvironment({
      name: 'missing',
      dataset: [{ prompt: 'x' }],
      tools: [mcpServer({ command: 'policyloop-missing-mcp-server' }, { name: 'ghost' })],
      reward: () => 1,
    });
    const model = await freshModel();
    const before = scripted.backend.samples.length;
    const trainer = new RLTrainer({ model, environment, groupSize: 2, groupsPerStep: 1, maxSteps: 1, progress: false });
    const error = await trainer.run().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(McpServerError);
    expect(error).toMatchObject({ server: 'ghost', reason: 'spawn' });
    expect(scripted.backend.samples.length).toBe(before);
    await model.close();
  });
});
