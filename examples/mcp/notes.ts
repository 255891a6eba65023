/**
 * An environment over the official MCP reference servers: the agent keeps notes in a knowledge
 * graph (`server-memory`) and in files (`server-filesystem`), each rollout with servers of its own
 * whose state lives in that rollout's temporary folder, so no rollout sees another's notes. With
 * `everythingUrl` (a `server-everything` started with `streamableHttp`), its `echo` and `get-sum`
 * tools come over streamable HTTP too, a fresh MCP session per rollout.
 *
 * The default agent loop plays each task: the model sees every tool under the server's own name
 * (a few of each server, chosen with `tools`, so that a small model's context holds them), its
 * calls are run, and the results come back as tool messages. The rubric: `used_tool` (a tool call
 * that did not fail), `brevity` (the shorter the final answer, the better: a small shaping term)
 * and `turns` (a metric).
 *
 * Evaluate: npx policyloop eval examples/mcp/notes.ts -m policyloop/agent-chat -n 4
 *           (with the HTTP server: --env-args '{"everythingUrl":"http://127.0.0.1:3001/mcp"}')
 * Train:    npx tsx examples/mcp/train.ts
 */
import path from 'node:path';
import { defineEnvironment, finalAssistantText, isChoice, mcpServer, type PromptTask } from 'policyloop';
import type { Trajectory } from 'policyloop';
import { referenceServer } from './reference-servers.js';

/** What `loadEnvironment` (and `policyloop eval --env-args`) may pass. */
export interface NotesArgs {
  /** The MCP endpoint of a running `server-everything streamableHttp`, e.g. `http://127.0.0.1:3001/mcp`. */
  everythingUrl?: string | undefined;
}

const tasks: PromptTask[] = [
  { prompt: 'Remember that Ada likes tea.' },
  { prompt: 'Save "buy milk" in todo.txt.' },
  { prompt: 'Note that the meeting is at 3pm.' },
  { prompt: 'What do you remember?' },
  { prompt: 'List the files you have.' },
  { prompt: "Remember that Bo is Ada's brother." },
];
const held: PromptTask[] = [{ prompt: 'Remember that Cy likes jazz.' }, { prompt: 'Write "hi" to a.txt.' }];

/** Whether a tool message of the trajectory answered without an error. */
function usedTool(trajectory: Trajectory): number {
  return trajectory.messages_and_choices.some(
    (item) => !isChoice(item) && item.role === 'tool' && !String(item.content).startsWith('Error'),
  )
    ? 1
    : 0;
}

/** The notes environment; `everythingUrl` adds `server-everything` over streamable HTTP. */
export function notesEnvironment(args: NotesArgs = {}) {
  const memory = mcpServer(
    ({ tempDir }) => ({
      ...referenceServer('memory'),
      env: { MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl') },
    }),
    { name: 'memory', tools: ['create_entities', 'read_graph'] },
  );
  const files = mcpServer(
    // The filesystem server may touch only the folder it is given: the rollout's own.
    ({ tempDir }) => ({ ...referenceServer('filesystem', [tempDir]), cwd: tempDir }),
    { name: 'files', tools: ['write_file', 'list_directory'], timeout: 10_000 },
  );
  const everything =
    args.everythingUrl === undefined
      ? []
      : [mcpServer({ url: args.everythingUrl }, { name: 'everything', tools: ['echo', 'get-sum'] })];
  return defineEnvironment({
    name: 'mcp-notes',
    dataset: tasks,
    evalDataset: held,
    systemPrompt: 'Use the tools, then reply briefly.',
    maxTurns: 3,
    tools: [memory, files, ...everything],
    reward: {
      used_tool: usedTool,
      brevity: { fn: (trajectory) => 1 - Math.min(finalAssistantText(trajectory).length, 80) / 80, weight: 0.2 },
      turns: { fn: (trajectory) => Number(trajectory.metrics['num_turns'] ?? 0), weight: 0 },
    },
  });
}

/** What `loadEnvironment('examples/mcp/notes.ts', args)` and `policyloop eval` call. */
export function loadEnvironment(args: NotesArgs = {}) {
  return notesEnvironment(args);
}
