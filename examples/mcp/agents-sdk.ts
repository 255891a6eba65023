/**
 * An OpenAI Agents SDK agent with its own MCP client, on an environment's per-rollout MCP
 * servers: the environment's rollout serves the rollout's tools (`context.tools`: a
 * `server-memory` of its own, in its temporary folder) at a loopback URL with `serveMcp`, and the
 * agent connects with `MCPServerStreamableHttp`, as it would to any MCP server. Its model calls go
 * through `model.fetch()`, so they are recorded. Offline, on the local service; the fresh model
 * answers in noise, and the reward is a stand-in.
 * Run: npx tsx examples/mcp/agents-sdk.ts
 */
import path from 'node:path';
import { rm } from 'node:fs/promises';
import { Agent, MCPServerStreamableHttp, OpenAIChatCompletionsModel, run, setTracingDisabled } from '@openai/agents';
import OpenAI from 'openai';
import {
  defineEnvironment,
  finalAssistantText,
  gatherTrajectoryGroups,
  LocalBackend,
  mcpServer,
  TrainableModel,
} from 'policyloop';
import { serveMcp } from 'policyloop/training';
import { referenceServer } from './reference-servers.js';

setTracingDisabled(true);

const environment = defineEnvironment({
  name: 'agents-sdk-notes',
  dataset: [{ note: 'Ada likes tea' }, { note: 'Bo likes jazz' }],
  tools: [
    mcpServer(
      ({ tempDir }) => ({
        ...referenceServer('memory'),
        env: { MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl') },
      }),
      { name: 'memory', tools: ['create_entities', 'read_graph'] },
    ),
  ],
  rollout: async (task, context) => {
    const endpoint = await serveMcp(context.tools, { signal: context.signal });
    const memory = new MCPServerStreamableHttp({ url: endpoint.url, name: 'memory' });
    try {
      await memory.connect();
      const client = new OpenAI({
        baseURL: context.model.inferenceBaseURL,
        apiKey: context.model.inferenceApiKey,
        fetch: context.model.fetch(),
      });
      const agent = new Agent({
        name: 'notes',
        instructions: 'Store the note.',
        model: new OpenAIChatCompletionsModel(client, context.model.inferenceName()),
        modelSettings: { maxTokens: 16 },
        mcpServers: [memory],
      });
      await run(agent, `Remember: ${task.note}`, { maxTurns: 2 });
    } finally {
      await memory.close();
      await endpoint.close();
    }
  },
  // A stand-in reward (a short reply): use a real, verifiable one in your agent.
  reward: (trajectory) => 1 - Math.min(finalAssistantText(trajectory).length, 80) / 80,
});

const dataDir = '.policyloop/mcp-agents-sdk';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'mcp-agents-sdk', baseModel: 'policyloop/agent-chat' });
await model.register(backend);
const started = await environment.start({ model });
try {
  const groups = await gatherTrajectoryGroups([{ note: 'Ada likes tea' }], started.rollout, {
    groupSize: 2,
    reward: started.reward,
  });
  const tools = (groups[0]?.trajectories[0]?.tools ?? []).map(
    (tool) => (tool as { function: { name: string } }).function.name,
  );
  console.log(
    `the agent was offered ${tools.join(', ')} over MCP; rewards ${groups[0]?.trajectories.map((t) => t.reward.toFixed(2)).join(', ')}`,
  );
} finally {
  await started.close();
  await model.close();
  await backend.close();
}
