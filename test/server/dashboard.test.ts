/**
 * The dashboard in a real browser: the local service on loopback trains a model for a few RL
 * steps, then headless Chromium (Debian's `chromium`, driven by playwright-core) opens the page
 * with the key in the URL fragment and must show the reward curve and the logged trajectories
 * (messages, token logprobs, tool calls). Without a key the page shows its login form and the
 * data routes answer 401. Saves a screenshot to `test/.output/dashboard.png`.
 * Skipped, saying why, when no Chromium is installed.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatherTrajectoryGroups } from '../../src/rollout/gather-trajectory-groups.js';
import { finalAssistantText } from '../../src/rewards/trajectory-text.js';
import type { Trajectory, TrajectoryGroupInput } from 'policyloop/schema';
import { makeChoice, startTestService, type TestService } from 'policyloop/testing';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { TrainableModel } from '../../src/training/trainable-model.js';

const OUTPUT_DIR = fileURLToPath(new URL('../.output/', import.meta.url));
const SCENARIOS = ['cat', 'dog', 'sun', 'owl'];
const STEPS = 3;

/** Chromium's path, from `POLICYLOOP_CHROMIUM` or the PATH (`chromium`, `chromium-browser`). */
function findChromium(): string | undefined {
  const configured = process.env['POLICYLOOP_CHROMIUM'];
  if (configured !== undefined && configured !== '') return configured;
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      const found = execFileSync('which', [name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
      if (found !== '') return found;
    } catch {
      // not on the PATH
    }
  }
  return undefined;
}

const executablePath = findChromium();
const NO_CHROMIUM =
  'No Chromium found (looked for `chromium` and `chromium-browser` on the PATH, or POLICYLOOP_CHROMIUM): ' +
  'install it (Debian: `apt-get install -y chromium`) to run the dashboard browser test.';

/** The share of capital letters in the reply: the quickstart's reward. */
function capitals(text: string): number {
  return text.length === 0 ? 0 : (text.match(/[A-Z]/g)?.length ?? 0) / text.length;
}

/** A hand-written validation group with a tool call and its result, to be shown by the browser. */
function toolGroup(): TrajectoryGroupInput {
  const call = makeChoice(null, { toolCalls: [{ name: 'lookup', arguments: { word: 'owl' }, id: 'call_1' }] });
  const answer = makeChoice('An OWL hoots at night', { logprobs: [-0.05, -2.5, -0.2, -0.9, -0.1] });
  return {
    trajectories: [
      {
        messages_and_choices: [
          { role: 'system', content: 'Answer with the help of the lookup tool.' },
          { role: 'user', content: 'What does an owl do?' },
          call,
          { role: 'tool', tool_call_id: 'call_1', content: '{"sound": "hoot"}' },
          answer,
        ],
        reward: 0.9,
        metrics: { used_tool: true },
        logs: ['looked up "owl"'],
      },
      {
        // The same system prompt (shown once for the group) and a sub-agent's conversation.
        messages_and_choices: [
          { role: 'system', content: 'Answer with the help of the lookup tool.' },
          { role: 'user', content: 'What does an owl do?' },
          makeChoice('it sleeps'),
        ],
        additional_histories: [
          {
            messages_and_choices: [
              { role: 'system', content: 'You are the owl expert.' },
              { role: 'user', content: 'owl?' },
              makeChoice('owls hunt at night'),
            ],
          },
        ],
        reward: 0.1,
        metrics: { used_tool: false },
      },
    ],
  };
}

describe.skipIf(executablePath === undefined)('the dashboard in headless Chromium', () => {
  let service: TestService;
  let backend: LocalBackend;
  let clientDir: string;
  let context: BrowserContext;
  let userDataDir: string;
  let modelId: string;

  beforeAll(async () => {
    mkdirSync(OUTPUT_DIR, { recursive: true });
    service = await startTestService();
    clientDir = await mkdtemp(path.join(tmpdir(), 'policyloop-dashboard-client-'));
    backend = new LocalBackend({ url: service.baseURL, apiKey: service.apiKey, dataDir: clientDir });
    const model = await new TrainableModel({
      project: 'dashboard',
      name: 'capitals',
      baseModel: 'policyloop/tiny-chat',
    }).register(backend);
    modelId = model.id;
    const client = model.openai();
    let trainingStep = 0;
    const rollout = async (word: string, { index }: { index: number }) => {
      // At step 1 one rollout throws: it is kept in its group's exceptions, and the step's row
      // counts it as `rollouts/failed`.
      if (trainingStep === 1 && word === SCENARIOS[0] && index === 0) throw new Error('the agent gave up');
      await client.chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'user', content: word }],
        max_tokens: 8,
      });
    };
    const reward = (trajectory: Trajectory) => capitals(finalAssistantText(trajectory));
    for (let step = 0; step < STEPS; step += 1) {
      trainingStep = step;
      const groups = await gatherTrajectoryGroups(SCENARIOS, rollout, {
        groupSize: 4,
        maxExceptions: 1,
        reward,
        sampledStep: () => model.getStep(),
      });
      if (step !== 1) {
        const val = await gatherTrajectoryGroups(SCENARIOS.slice(0, 2), rollout, { groupSize: 2, reward });
        await model.log({ groups: [...val, toolGroup()], split: 'val' });
      }
      await model.train(groups);
    }
    await model.flushLogs();
    await model.close();

    userDataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-chromium-'));
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: executablePath as string,
      headless: true,
      viewport: { width: 1280, height: 800 },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });

  afterAll(async () => {
    await context?.close();
    await backend?.close();
    await service?.close();
    if (clientDir !== undefined) await rm(clientDir, { recursive: true, force: true });
    if (userDataDir !== undefined) await rm(userDataDir, { recursive: true, force: true });
  });

  const origin = () => service.baseURL.replace(/\/v1$/, '');

  it('shows the reward curve and the trajectories after logging in through the URL fragment', async () => {
    const page = await context.newPage();
    const problems = collectProblems(page);
    await page.goto(`${origin()}/#key=${encodeURIComponent(service.apiKey)}`);

    // The key left the address bar at once and lives in this tab's session storage.
    await page.locator('#model-title').filter({ hasText: 'dashboard/capitals' }).waitFor();
    expect(page.url()).not.toContain('key=');
    expect(await page.evaluate(() => sessionStorage.getItem('policyloop.apiKey'))).toBe(service.apiKey);
    expect(await page.locator('#login-view').isHidden()).toBe(true);

    // The reward curve: a uPlot canvas with train at every step trained on and val where logged.
    const chart = page.locator('#chart');
    await chart.locator('canvas').first().waitFor();
    await page.waitForFunction(() => Number(document.querySelector('#chart')?.getAttribute('data-points')) >= 5);
    expect(await chart.getAttribute('data-series')).toBe('train,val');
    // train at steps 0, 1, 2; val at steps 0 and 2
    expect(Number(await chart.getAttribute('data-points'))).toBe(STEPS + 2);
    expect(await page.locator('.u-legend').textContent()).toContain('val');

    // Jobs, newest first, finished; checkpoints up to the last step.
    await expect
      .poll(() => page.locator('#job-list .pill').allTextContents())
      .toEqual(['completed', 'completed', 'completed']);
    expect(await page.locator('#checkpoints tbody tr').first().locator('td').first().textContent()).toBe(String(STEPS));

    // The trajectory browser opens on the newest train step: each group's trajectories side by side,
    // with the user's message and the sampled tokens carrying their logprobs.
    await page.locator('#groups .group').first().waitFor();
    expect(await page.locator('#split-select').inputValue()).toBe('train');
    expect(await page.locator('#groups .group').count()).toBe(SCENARIOS.length);
    expect(await page.locator('#groups .group').first().locator('.trajectory').count()).toBe(4);
    const userTexts = await page.locator('#groups .message.user .text').allTextContents();
    expect(new Set(userTexts)).toEqual(new Set(SCENARIOS));
    const token = page.locator('#groups .tok').first();
    expect(Number(await token.getAttribute('data-logprob'))).toBeLessThanOrEqual(0);
    // Keyboard and screen-reader users get one stop per turn, with a summary of its logprobs.
    expect(await page.locator('#groups .tokens').first().getAttribute('aria-label')).toMatch(
      /\d+ tokens, mean logprob -?\d+\.\d\d, least likely/,
    );
    await token.hover();
    await expect.poll(() => page.locator('.tooltip').textContent()).toMatch(/logprob -?\d+\.\d{3}/);

    // Sorted by reward, high to low, within each group.
    const rewards = await page.locator('#groups .group').first().locator('.reward').allTextContents();
    const values = rewards.map((text) => Number(text.replace('reward ', '')));
    expect(values).toEqual([...values].sort((a, b) => b - a));

    // The val split at step 2 has the hand-written group: its tool call, the tool's result and logs.
    await page.selectOption('#split-select', 'val');
    await page.locator('#groups .tool-call').first().waitFor();
    expect(await page.locator('#groups .tool-call').first().textContent()).toBe('lookup({"word":"owl"})');
    expect(await page.locator('#groups .message.tool .text').first().textContent()).toBe('{"sound": "hoot"}');
    expect(await page.locator('#groups .tok[data-logprob="-2.5"]').textContent()).toBe(' OWL');
    // The system prompt both trajectories share is shown once, above them; the sub-agent's turns
    // are shown (open) under its trajectory.
    const toolCard = page.locator('#groups .group', { has: page.locator('.tool-call') });
    expect(await toolCard.locator('.system-prompt .text').allTextContents()).toEqual([
      'Answer with the help of the lookup tool.',
    ]);
    expect(await toolCard.locator('.message.system .role').allTextContents()).toEqual([
      'system · prompt 1 (shown once above)',
      'system · prompt 1 (shown once above)',
      'system',
    ]);
    expect(await toolCard.locator('details[open] summary', { hasText: 'sub-agent conversation 1' }).count()).toBe(1);
    expect(await toolCard.locator('.message.choice', { hasText: 'owls hunt at night' }).count()).toBe(1);

    // The step's own metrics are in the same row: the failed rollout at step 1, and each step's time.
    const chartTable = async (): Promise<string[][]> =>
      page
        .locator('#chart-table tbody tr')
        .evaluateAll((rows) =>
          rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent ?? '')),
        );
    await page.selectOption('#metric-select', 'rollouts/failed');
    await expect.poll(() => page.locator('#chart-heading').textContent()).toBe('rollouts/failed');
    expect(await chart.getAttribute('data-series')).toBe('train');
    expect(await chartTable()).toEqual([
      ['0', '0'],
      ['1', '1'],
      ['2', '0'],
    ]);
    await page.selectOption('#metric-select', 'time/step');
    await expect.poll(() => page.locator('#chart-heading').textContent()).toBe('time/step');
    const times = await chartTable();
    expect(times.map(([step]) => step)).toEqual(['0', '1', '2']);
    for (const [, seconds] of times) expect(Number(seconds)).toBeGreaterThan(0);
    await page.mouse.move(0, 0);
    await page
      .locator('section', { has: page.locator('#chart') })
      .screenshot({ path: path.join(OUTPUT_DIR, 'dashboard-step-metrics.png') });
    await page.selectOption('#metric-select', 'reward');

    await page.setViewportSize({ width: 1280, height: 800 });
    await page.selectOption('#split-select', 'train');
    await page.locator('#groups .message.user').first().waitFor();
    await page.mouse.move(0, 0);
    await page.screenshot({ path: path.join(OUTPUT_DIR, 'dashboard.png'), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });

  it('shows the login form without a key, refuses a wrong one, and opens with the right one typed in', async () => {
    const unauthorized = await fetch(`${service.baseURL}/local/models`);
    expect(unauthorized.status).toBe(401);
    expect(await unauthorized.json()).toMatchObject({ detail: expect.stringContaining('Missing API key') });

    const page = await context.newPage();
    const problems = collectProblems(page);
    await page.goto(`${origin()}/`);
    await page.locator('#login-form').waitFor();
    expect(await page.locator('#app-view').isHidden()).toBe(true);
    await page.screenshot({ path: path.join(OUTPUT_DIR, 'login.png') });

    await page.getByLabel('API key').fill('not-the-key');
    await page.getByRole('button', { name: 'Open dashboard' }).click();
    await expect.poll(() => page.locator('#login-error').textContent()).toContain('refused');
    expect(await page.evaluate(() => sessionStorage.getItem('policyloop.apiKey'))).toBeNull();

    await page.getByLabel('API key').fill(service.apiKey);
    await page.getByRole('button', { name: 'Open dashboard' }).click();
    await page.locator('#model-list button').filter({ hasText: 'dashboard/capitals' }).waitFor();
    expect(await page.locator('#login-view').isHidden()).toBe(true);
    expect(modelId).toMatch(/^[0-9a-f-]{36}$/);
    // 401s are expected in this test: only script errors count.
    expect(problems.filter((problem) => !problem.includes('401'))).toEqual([]);
    await page.close();
  });
});

if (executablePath === undefined) {
  it('the dashboard browser test needs Chromium', (context) => {
    context.skip(NO_CHROMIUM);
  });
}

/** Script errors and failed requests of the page, as messages. */
function collectProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  return problems;
}
