/**
 * RLTrainer on a real OpenAI Agents SDK agent that hands off (examples/tasks/seat-booking.ts), on
 * the local service, with the default pipeline (`maxStepsOffPolicy: 1`):
 * - a rollout that throws (the SDK's own `ModelBehaviorError`, as for a tool name that does not
 *   exist) costs that rollout, not the step: retried once, then kept in its group's `exceptions`,
 *   the group training on the rollouts that finished, counted in the step's metrics and events;
 * - a learning-rate schedule reaches every training job's body;
 * - one step number: the trainer's events, `history.jsonl`, the service's history, the CLI's
 *   `history --json`, the logged groups and `policyloop report` agree, and `history:mismatch`
 *   stays silent.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ModelBehaviorError } from '@openai/agents';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BookingScenario,
  bookingRunner,
  bookingScenarios,
  demonstration,
  runBooking,
} from '../../examples/tasks/seat-booking.js';
import type { TrainingClient } from 'policyloop/client';
import { linearDecay, LocalBackend, RLTrainer, TrainableModel } from 'policyloop';
import type { RLRolloutFailedEvent, StepEndEvent } from 'policyloop/training';
import { runCli } from '../cli/support/run-cli.js';

let dataDir: string;
let backend: LocalBackend;
let client: TrainingClient;
let env: Record<string, string>;
const jobBodies: {
  trajectory_groups: { trajectories: unknown[]; exceptions?: { type: string; message: string }[] }[];
  experimental_config?: { learning_rate?: number };
}[] = [];

const recordingFetch: typeof globalThis.fetch = async (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (init?.method === 'POST' && url.pathname.endsWith('/preview/training-jobs')) {
    jobBodies.push(JSON.parse(String(init.body)));
  }
  return await fetch(input, init);
};

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-rl-agents-'));
  backend = await LocalBackend.start({ dataDir, fetch: recordingFetch });
  const connection = await backend.connect();
  client = connection.client;
  env = { POLICYLOOP_BASE_URL: connection.baseURL, POLICYLOOP_API_KEY: connection.apiKey };
});
afterAll(async () => {
  await backend?.close();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

const jsonLines = (text: string): Record<string, number>[] =>
  text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, number>);

describe('RLTrainer on an Agents SDK handoff agent', () => {
  it('a throwing rollout costs a rollout, the schedule reaches the jobs, and every view agrees on the step', async () => {
    const model = await new TrainableModel({
      project: 'agents',
      name: 'handoff',
      baseModel: 'policyloop/agent-chat',
    }).register(backend);
    const scenarios = bookingScenarios(2);
    const demonstrations = await Promise.all(scenarios.map(demonstration));
    const { step: warmStep } = await model.trainSFT(Array.from({ length: 20 }, () => demonstrations).flat(), {
      batchSize: 4,
      learningRate: 1e-2,
    });
    const openai = new OpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
    const runner = bookingRunner(openai, model.inferenceName(), { maxTokens: 16 });
    const schedule = linearDecay({ initial: 4e-3, final: 1e-3, steps: warmStep + 3 });
    const maxSteps = warmStep + 3;

    const trainer = new RLTrainer<BookingScenario>({
      model,
      scenarios,
      groupSize: 3,
      groupsPerStep: 2,
      maxSteps,
      maxStepsOffPolicy: 1,
      learningRate: schedule,
      gather: { retryDelay: 1 },
      progress: false,
      rollout: async (scenario, { groupIndex, index, attempt }) => {
        // The first rollout of the first group always throws, as the SDK does for a tool the
        // model made up; the second of the second group throws once and passes when retried.
        if (groupIndex === 0 && index === 0)
          throw new ModelBehaviorError('Tool book_seat not found in agent seat_agent.');
        if (groupIndex === 1 && index === 1 && attempt === 0) throw new Error('a flaky framework error');
        await runBooking(runner, scenario);
        // The rollout's position: every group has a reward spread, whatever the model wrote.
        return { reward: index };
      },
    });
    const ends: StepEndEvent[] = [];
    const failures: RLRolloutFailedEvent[] = [];
    let mismatches = 0;
    trainer.on('step:end', (event) => ends.push(event));
    trainer.on('rollout:failed', (event) => failures.push(event));
    model.on('history:mismatch', () => {
      mismatches += 1;
    });
    const before = jobBodies.length;
    const summary = await trainer.run();

    // Three steps trained; the failures cost a rollout each, not a step.
    const steps = [warmStep, warmStep + 1, warmStep + 2];
    expect(summary.step).toBe(maxSteps);
    expect(ends.map((event) => event.step)).toEqual(steps);
    for (const event of ends) {
      expect(event.metrics['rollouts/failed']).toBe(1);
      expect(event.metrics['rollouts/retried']).toBe(2);
      expect(event.metrics['groups/dropped_failed']).toBe(0);
    }
    expect(summary.totals.failedRollouts).toBe(3);
    expect(
      failures.filter((event) => !event.willRetry).every((event) => event.error instanceof ModelBehaviorError),
    ).toBe(true);
    // The pipeline sampled ahead: a later step trained a batch sampled at the step before it.
    expect(ends.some((event) => event.sampledStep === event.step - 1)).toBe(true);

    // Every job: the failed rollout kept in its group's exceptions, the other two trained on,
    // and the schedule's learning rate for that step in the body.
    const bodies = jobBodies.slice(before);
    expect(bodies).toHaveLength(3);
    bodies.forEach((body, index) => {
      const first = body.trajectory_groups[0];
      expect(first?.trajectories).toHaveLength(2);
      expect(first?.exceptions?.map((exception) => exception.type)).toEqual(['ModelBehaviorError']);
      expect(body.trajectory_groups[1]?.trajectories).toHaveLength(3);
      expect(body.experimental_config?.learning_rate).toBeCloseTo(schedule(steps[index] as number, { maxSteps }), 12);
    });

    // One step number: history.jsonl, the service's history and the CLI carry train/* at the
    // steps the trainer trained, with the same values, and the histories agree.
    const fileRows = (await readFile(model.files.history, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, number>)
      .filter((row) => typeof row['train/reward'] === 'number');
    expect(fileRows.map((row) => row['training_step'])).toEqual(steps);
    const serviceRows = (await model.history()).filter((row) => typeof row['train/reward'] === 'number');
    expect(serviceRows.map((row) => row.training_step)).toEqual(steps);
    expect(serviceRows.map((row) => row['train/reward'])).toEqual(fileRows.map((row) => row['train/reward']));
    expect(mismatches).toBe(0);
    const cli = await runCli(['history', model.id, '--json', '--split', 'train', '--metric', 'reward'], env);
    expect(cli.code).toBe(0);
    expect(jsonLines(cli.stdout).map((row) => [row['training_step'], row['train/reward']])).toEqual(
      fileRows.map((row) => [row['training_step'], row['train/reward']]),
    );

    // The logged groups are stored under the step they trained (the dashboard opens there), and
    // still say which step sampled them.
    for (const event of ends) {
      const logged = [];
      for await (const item of client.local.trajectoryGroups.list(model.id, { step: event.step, split: 'train' }))
        logged.push(item);
      expect(logged).toHaveLength(2);
      for (const item of logged)
        for (const trajectory of item.group.trajectories)
          expect(trajectory.initial_policy_version).toBe(event.sampledStep);
    }

    // The report shows the last trained step's trajectories, under that step.
    const reportFile = path.join(dataDir, 'report.html');
    const report = await runCli(['report', model.id, '-o', reportFile, '--json'], env);
    expect(report.code).toBe(0);
    const written = JSON.parse(report.stdout) as { samples: { split: string; step: number }[] };
    expect(written.samples.find((sample) => sample.split === 'train')?.step).toBe(warmStep + 2);
    await model.close();
  }, 300_000);
});
