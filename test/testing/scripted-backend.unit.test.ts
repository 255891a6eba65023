/**
 * `ScriptedBackend` from `policyloop/testing`: a model registers on it, samples what the script
 * says (with logprobs, at the step it is pinned to), trains at once with the script's metrics or
 * failure, counts what its engine was asked, and cleans up after itself. The trainer's own tests on
 * it are in test/training/rl-trainer-loops.unit.test.ts.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  gatherTrajectoryGroups,
  InvalidArgumentError,
  TrainableModel,
  TrainingJobFailedError,
  finalAssistantText,
  toolCallsOf,
} from 'policyloop';
import { makeChoice, ScriptedBackend } from 'policyloop/testing';
import { afterEach, describe, expect, it } from 'vitest';

const started: ScriptedBackend[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((backend) => backend.close()));
});

async function start(options: ConstructorParameters<typeof ScriptedBackend>[0] = {}): Promise<ScriptedBackend> {
  const backend = await ScriptedBackend.start(options);
  started.push(backend);
  return backend;
}

async function register(backend: ScriptedBackend, baseModel = 'policyloop/tiny-chat'): Promise<TrainableModel> {
  return new TrainableModel({ project: 'scripted', name: 'agent', baseModel }).register(backend);
}

const ask = (content: string) => [{ role: 'user' as const, content }];

describe('ScriptedBackend', () => {
  it('registers a model (get-or-create) on its base models only', async () => {
    const backend = await start({ baseModels: ['Qwen/Qwen3-8B'] });
    const model = await register(backend, 'Qwen/Qwen3-8B');
    const again = await register(backend, 'Qwen/Qwen3-8B');
    expect(again.id).toBe(model.id);
    expect(await model.getStep()).toBe(0);
    await expect(register(backend, 'policyloop/tiny-chat')).rejects.toThrow(/policyloop\/tiny-chat/);
  });

  it('answers from a list, the k-th request with the same messages getting entry k % length, with logprobs', async () => {
    const backend = await start({ sample: ['Paris', 'Lyon'] });
    const model = await register(backend);
    const [group] = await gatherTrajectoryGroups(
      ['France'],
      async (country) => {
        await model.openai().chat.completions.create({ model: model.inferenceName(), messages: ask(country) });
      },
      { groupSize: 3, concurrency: 1 },
    );
    expect(group?.trajectories.map((trajectory) => finalAssistantText(trajectory))).toEqual(['Paris', 'Lyon', 'Paris']);
    const choice = group?.trajectories[0]?.messages_and_choices.at(-1) as { logprobs?: { content?: unknown[] } };
    expect(choice.logprobs?.content).toHaveLength(1);
    expect(backend.samples.map(({ repeat, step, index }) => [repeat, step, index])).toEqual([
      [0, 0, 0],
      [1, 0, 0],
      [2, 0, 0],
    ]);
  });

  it('answers from a function of the request: its body, the step sampled from, and `n` choices', async () => {
    const backend = await start({
      sample: ({ body, step, index }) => `${String(body.messages[0]?.content)} at step ${step}, choice ${index}`,
    });
    const model = await register(backend);
    await model.train([
      {
        trajectories: [0, 1].map((reward) => ({
          messages_and_choices: [...ask('hi'), makeChoice('hello')],
          reward,
        })),
      },
    ]);
    const client = model.openai();
    const latest = await client.chat.completions.create({ model: model.inferenceName(), messages: ask('hi'), n: 2 });
    expect(latest.choices.map((choice) => choice.message.content)).toEqual([
      'hi at step 1, choice 0',
      'hi at step 1, choice 1',
    ]);
    const pinned = await model.openai({ step: 0 }).chat.completions.create({ model: '', messages: ask('hi') });
    expect(pinned.choices[0]?.message.content).toBe('hi at step 0, choice 0');
    expect(latest.usage?.total_tokens).toBeGreaterThan(0);
  });

  it('answers with a scripted Choice (tool calls), streamed too', async () => {
    const backend = await start({
      sample: makeChoice(null, { toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] }),
    });
    const model = await register(backend);
    const [group] = await gatherTrajectoryGroups(['Paris'], async (city) => {
      const stream = await model.openai().chat.completions.create({
        model: model.inferenceName(),
        messages: ask(`weather in ${city}?`),
        tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }],
        stream: true,
      });
      for await (const _chunk of stream);
    });
    expect(toolCallsOf(group?.trajectories[0] as never)).toEqual([
      expect.objectContaining({ name: 'get_weather', arguments: { city: 'Paris' } }),
    ]);
  });

  it('trains at once: counts the job, reports the script metrics under train/, and fails a job the script fails', async () => {
    const backend = await start({
      train: (job) => {
        if (job.step === 1) throw new Error('out of memory (scripted)');
        return { loss: 0.25, kl_div: 0.01 };
      },
    });
    const model = await register(backend);
    const groups = [
      { trajectories: [0, 1].map((reward) => ({ messages_and_choices: [...ask('hi'), makeChoice('yo')], reward })) },
    ];
    const result = await model.train(groups, { learningRate: 3e-3 });
    expect(result.step).toBe(1);
    expect(result.metrics).toMatchObject({ 'train/loss': 0.25, 'train/kl_div': 0.01, 'train/learning_rate': 3e-3 });
    expect(backend.trainedJobs).toEqual([
      expect.objectContaining({ kind: 'rl', modelId: model.id, step: 0, learningRate: 3e-3 }),
    ]);
    expect(backend.trainedJobs[0]?.groups[0]?.trajectories).toHaveLength(2);
    const error = await model.train(groups).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(TrainingJobFailedError);
    expect((error as Error).message).toMatch(/out of memory \(scripted\)/);
    expect(await model.getStep()).toBe(1);
    // The job's metrics are in the history of the step that trained, and of no other.
    const rows = (await model.history()).filter((row) => typeof row['train/loss'] === 'number');
    expect(rows.map((row) => [row.training_step, row['train/loss'], row['train/kl_div']])).toEqual([[0, 0.25, 0.01]]);
  });

  it('trains SFT from rows (the service reads them from its data directory)', async () => {
    const backend = await start({ defaultLearningRate: 1e-3 });
    const model = await register(backend);
    const { step } = await model.trainSFT([{ messages: [...ask('2+2?'), { role: 'assistant', content: '4' }] }]);
    expect(step).toBe(1);
    expect(backend.trainedJobs).toEqual([expect.objectContaining({ kind: 'sft', step: 0 })]);
    expect(backend.trainedJobs[0]?.rows).toHaveLength(1);
    expect(await backend.defaultLearningRate()).toBe(1e-3);
  });

  it('shows every request to `intercept`, which may answer in its place', async () => {
    const seen: string[] = [];
    const backend = await start({
      intercept: async (request, next) => {
        seen.push(`${request.method} ${new URL(request.url).pathname}`);
        if (new URL(request.url).pathname.endsWith('/base-models')) return Response.json(['intercepted']);
        return next(request);
      },
    });
    const model = await register(backend);
    expect(seen).toContain('POST /v1/preview/models');
    const { client } = await backend.connect();
    expect(await client.baseModels.list()).toEqual(['intercepted']);
    expect(model.isRegistered).toBe(true);
  });

  it('keeps a given data directory for a second backend (a rerun), and removes its own on close', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-scripted-test-'));
    try {
      const first = new ScriptedBackend({ dataDir });
      const model = await register(first);
      await model.train([
        { trajectories: [0, 1].map((reward) => ({ messages_and_choices: [...ask('a'), makeChoice('b')], reward })) },
      ]);
      await model.close();
      await first.close();
      await expect(first.connect()).rejects.toThrow(/closed/);

      const second = await start({ dataDir });
      const again = await register(second);
      expect(await again.getStep()).toBe(1);
      expect((await again.history()).map((row) => row.training_step)).toEqual([0]);
      await again.close();
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
    const own = await ScriptedBackend.start();
    expect(existsSync(own.dataDir)).toBe(true);
    await own.close();
    expect(existsSync(own.dataDir)).toBe(false);
  });

  it('refuses bad options before starting anything', () => {
    expect(() => new ScriptedBackend({ sample: 42 as never })).toThrow(InvalidArgumentError);
    expect(() => new ScriptedBackend({ sample: [] })).toThrow(/sample/);
    expect(() => new ScriptedBackend({ train: 'fast' as never })).toThrow(/train/);
    expect(() => new ScriptedBackend({ baseModels: [] })).toThrow(/baseModels/);
    expect(() => new ScriptedBackend({ defaultLearningRate: -1 })).toThrow(/defaultLearningRate/);
    expect(() => new ScriptedBackend({ sampel: 'yes' } as never)).toThrow(
      'Unknown option `sampel`; did you mean `sample`?',
    );
  });
});
