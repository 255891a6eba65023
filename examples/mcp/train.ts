/**
 * Trains a model for a few RL steps on the MCP notes environment (./notes.ts) on the local
 * service: `server-memory` and `server-filesystem` start for every rollout (their state in the
 * rollout's temporary folder), and `server-everything` runs once, over streamable HTTP on a free
 * loopback port, each rollout opening a session of its own. When the run ends (or fails, or is
 * interrupted) no server process is left.
 * Run: npx tsx examples/mcp/train.ts   (POLICYLOOP_EXAMPLE_STEPS=<n>, default 3)
 */
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
import { notesEnvironment } from './notes.js';
import { referenceServer } from './reference-servers.js';

const steps = Number(process.env['POLICYLOOP_EXAMPLE_STEPS'] ?? 3);

/** A free loopback port. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
    server.once('error', reject);
  });
}

// server-everything over streamable HTTP: one process, a session per rollout.
const port = await freePort();
const { command, args } = referenceServer('everything', ['streamableHttp']);
const everything = spawn(command, args, {
  env: { ...process.env, PORT: String(port) },
  stdio: ['ignore', 'ignore', 'pipe'],
});
await new Promise<void>((resolve, reject) => {
  let stderr = '';
  everything.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (stderr.includes('listening')) resolve();
  });
  everything.once('exit', (code) => reject(new Error(`server-everything exited with ${code}: ${stderr}`)));
});

const dataDir = '.policyloop/mcp-notes';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'mcp-notes', baseModel: 'policyloop/agent-chat' });
await model.register(backend);
try {
  const environment = notesEnvironment({ everythingUrl: `http://127.0.0.1:${port}/mcp` });
  const trainer = new RLTrainer({
    model,
    environment,
    groupSize: 4,
    groupsPerStep: 2,
    maxSteps: steps,
    // Short turns: without max_tokens a local model samples up to its context.
    sampling: { max_tokens: 16 },
    validation: false,
    progress: false,
  });
  trainer.on('step:end', ({ step, metrics }) => {
    const reward = metrics['train/reward'] ?? Number.NaN;
    const usedTool = metrics['train/used_tool'] ?? Number.NaN;
    console.log(`step ${step + 1}: reward ${reward.toFixed(3)}, used_tool ${usedTool.toFixed(3)}`);
  });
  const summary = await trainer.run();
  console.log(`trained to step ${summary.step} with MCP tools (${summary.totals.rollouts} rollouts)`);
} finally {
  await model.close();
  await backend.close();
  everything.kill();
}
