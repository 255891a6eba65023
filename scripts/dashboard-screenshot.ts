/**
 * Takes `docs/dashboard.png` from a real run: the local service trains the quickstart's task
 * (answer in capitals) for a few RL steps with validation every few steps, then headless Chromium
 * opens the dashboard and photographs it at 1280 px.
 * Run: npx tsx scripts/dashboard-screenshot.ts [output.png]   (needs Debian's `chromium`)
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { finalAssistantText } from '../src/rewards/trajectory-text.js';
import { gatherTrajectoryGroups } from '../src/rollout/gather-trajectory-groups.js';
import type { Trajectory, TrajectoryGroupInput } from '../src/schema/index.js';
import { makeChoice, startTestService } from '../src/testing/index.js';
import { LocalBackend } from '../src/backends/local-backend.js';
import { TrainableModel } from '../src/training/trainable-model.js';

const output = path.resolve(process.argv[2] ?? 'docs/dashboard.png');
const executablePath = execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
const scenarios = ['cat', 'dog', 'sun', 'map', 'owl', 'bee', 'fig', 'ink'];
const steps = 12;

const capitals = (trajectory: Trajectory): number => {
  const text = finalAssistantText(trajectory);
  return text.length === 0 ? 0 : (text.match(/[A-Z]/g)?.length ?? 0) / text.length;
};

/** A hand-written group with a tool call, its result and a trained answer, for the browser. */
const toolGroup = (): TrajectoryGroupInput => ({
  trajectories: [
    {
      messages_and_choices: [
        { role: 'system', content: 'Answer in capitals. Use the lookup tool.' },
        { role: 'user', content: 'owl' },
        makeChoice(null, { toolCalls: [{ name: 'lookup', arguments: { word: 'owl' }, id: 'call_1' }] }),
        { role: 'tool', tool_call_id: 'call_1', content: '{"meaning": "a night bird"}' },
        makeChoice('AN OWL IS a night bird', { logprobs: [-0.04, -0.3, -0.08, -1.6, -2.9, -0.7] }),
      ],
      reward: 0.5,
      metrics: { used_tool: true },
      logs: ['lookup("owl") answered in 3 ms'],
    },
    {
      messages_and_choices: [{ role: 'user', content: 'owl' }, makeChoice('a bird', { logprobs: [-0.9, -1.8] })],
      reward: 0,
      metrics: { used_tool: false },
    },
  ],
});

const service = await startTestService();
const clientDir = await mkdtemp(path.join(tmpdir(), 'policyloop-screenshot-'));
const backend = new LocalBackend({ url: service.baseURL, apiKey: service.apiKey, dataDir: clientDir });
try {
  const model = await new TrainableModel({
    project: 'quickstart',
    name: 'capitals',
    baseModel: 'policyloop/tiny-chat',
  }).register(backend);
  const client = model.openai();
  const rollout = async (word: string) => {
    await client.chat.completions.create({
      model: model.inferenceName(),
      messages: [{ role: 'user', content: word }],
      max_tokens: 8,
    });
  };
  for (let step = 0; step < steps; step += 1) {
    if (step % 3 === 0 || step === steps - 1) {
      const val = await gatherTrajectoryGroups(scenarios.slice(0, 3), rollout, { groupSize: 4, reward: capitals });
      await model.log({ groups: step === steps - 1 ? [toolGroup(), ...val] : val, split: 'val' });
    }
    const groups = await gatherTrajectoryGroups(scenarios, rollout, {
      groupSize: 8,
      reward: capitals,
      sampledStep: () => model.getStep(),
    });
    const { step: next } = await model.train(groups);
    process.stderr.write(`trained step ${next}\n`);
  }
  await model.flushLogs();
  await model.close();

  const userDataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 1200 },
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
  });
  try {
    const page = await context.newPage();
    await page.goto(`${service.baseURL.replace(/\/v1$/, '')}/#key=${encodeURIComponent(service.apiKey)}`);
    await page.locator('#chart canvas').first().waitFor();
    await page.selectOption('#split-select', 'val');
    await page.selectOption('#sort-select', 'logged');
    await page.locator('#groups .tool-call').first().waitFor();
    await page.mouse.move(0, 0);
    await page.screenshot({ path: output });
    process.stderr.write(`wrote ${output}\n`);
  } finally {
    await context.close();
    await rm(userDataDir, { recursive: true, force: true });
  }
} finally {
  await backend.close();
  await service.close();
  await rm(clientDir, { recursive: true, force: true });
}
