/**
 * What a newcomer moving to a Tinker server meets, against SkyRL 0.4.0 started with
 * `max_lora_rank` 16 (test/support/skyrl-server.ts), on a tiny Qwen3 with the real tokenizer:
 * a LoRA rank the server cannot hold is refused by the first training step with a message naming
 * `lora.rank` of TinkerBackend (SkyRL's `get_server_capabilities` states no limit, so `register`
 * cannot tell); `chat_template_kwargs` reaches the template; a Tinker loss the contract of the
 * hosted service lacks (`importance_sampling`) trains; and the weights a deleted data directory
 * left on the server are listed as orphaned and deleted by `policyloop tinker checkpoints`.
 *
 * Skips with one line saying why without a Python >= 3.12, unless POLICYLOOP_REQUIRE_TINKER=1 (CI).
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TinkerBackend, TrainableModel, TrainingJobFailedError } from 'policyloop';
import type { Choice, TrajectoryGroup } from 'policyloop/schema';
import { TinkerClient } from 'policyloop/tinker';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { writeTinyQwen3 } from '../../src/engine/hf/tiny-qwen3.js';
import { runCli } from '../cli/support/run-cli.js';
import { type SkyrlServer, skyrlSkipReason, startSkyrlServer } from '../support/skyrl-server.js';

const MINUTE = 60_000;
const skipReason = await skyrlSkipReason();
if (skipReason !== undefined) console.log(`Tinker limits suite skipped: ${skipReason}`);

const fixture = JSON.parse(readFileSync('test/fixtures/reference/chat-templates.json', 'utf8')) as {
  cases: { name: string; messages: { role: 'user'; content: string }[]; ids: number[] }[];
};
const thinkingOff = fixture.cases.find(
  (entry) => entry.name === 'qwen3 thinking disabled',
) as (typeof fixture.cases)[0];

type TokenChoice = Choice & { prompt_token_ids: number[]; token_ids: number[] };

/** One group of two sampled replies with different rewards: something to train on. */
async function sampledGroup(model: TrainableModel): Promise<TrajectoryGroup> {
  const messages = [{ role: 'user' as const, content: 'Say yes' }];
  const reply = await model.openai().chat.completions.create({
    model: model.inferenceName(),
    messages,
    max_tokens: 3,
    n: 2,
    temperature: 1,
  });
  return {
    trajectories: reply.choices.map((choice, index) => ({
      messages_and_choices: [...messages, choice],
      reward: index,
    })),
  } as unknown as TrajectoryGroup;
}

const TITLE = 'TinkerBackend on SkyRL with max_lora_rank 16';
describe.skipIf(skipReason !== undefined)(
  skipReason === undefined ? TITLE : `${TITLE} (skipped: ${skipReason})`,
  () => {
    let root: string;
    let server: SkyrlServer;
    let modelDir: string;
    const backends: TinkerBackend[] = [];

    const backendFor = (name: string, rank: number): TinkerBackend => {
      const backend = new TinkerBackend({
        baseURL: server.baseURL,
        dataDir: path.join(root, name),
        lora: { rank, seed: 0 },
      });
      backends.push(backend);
      return backend;
    };

    beforeAll(async () => {
      root = await mkdtemp(path.join(os.tmpdir(), 'policyloop-tinker-limits-'));
      modelDir = await writeTinyQwen3(path.join(root, 'tiny-qwen3'), { embeddingStd: 0.15 });
      server = await startSkyrlServer({ modelDir, maxLoraRank: 16, readyTimeoutMs: 4 * MINUTE });
    }, 40 * MINUTE);

    afterEach(async () => {
      await Promise.all(backends.splice(0).map((backend) => backend.close()));
    });

    afterAll(async () => {
      await server?.close();
      if (root !== undefined) await rm(root, { recursive: true, force: true });
    });

    it('rank 32 registers (the server states no limit), then the first step fails naming lora.rank of TinkerBackend', async () => {
      const backend = backendFor('rank-32', 32);
      const model = await new TrainableModel({ project: 'limits', name: 'rank32', baseModel: modelDir }).register(
        backend,
      );
      const error = await model.train([await sampledGroup(model)]).then(
        () => undefined,
        (failure: unknown) => failure,
      );
      expect(error).toBeInstanceOf(TrainingJobFailedError);
      const message = (error as Error).message;
      expect(message).toContain('LoRA rank 32 must be between 1 and 16');
      expect(message).toContain('Set `lora.rank` of TinkerBackend to at most 16');
      expect(await model.getStep()).toBe(0);
      await model.close();
    });

    it('chatTemplateKwargs renders the prompt as transformers does with enable_thinking=False', async () => {
      const backend = backendFor('kwargs', 8);
      const model = await new TrainableModel({
        project: 'limits',
        name: 'thinking-off',
        baseModel: modelDir,
        chatTemplateKwargs: { enable_thinking: false },
      }).register(backend);
      const reply = await model.openai().chat.completions.create({
        model: model.inferenceName(),
        messages: thinkingOff.messages,
        max_tokens: 2,
      });
      expect((reply.choices[0] as TokenChoice).prompt_token_ids).toEqual(thinkingOff.ids);
      await model.close();
    });

    it('trains with lossFn importance_sampling, and lists and deletes the weights a removed data directory left behind', async () => {
      const kept = backendFor('kept', 8);
      const keptModel = await new TrainableModel({ project: 'limits', name: 'kept', baseModel: modelDir }).register(
        kept,
      );
      await keptModel.train([await sampledGroup(keptModel)], { lossFn: 'importance_sampling', learningRate: 1e-3 });
      const gone = backendFor('gone', 8);
      const goneModel = await new TrainableModel({ project: 'limits', name: 'gone', baseModel: modelDir }).register(
        gone,
      );
      const { step } = await goneModel.train([await sampledGroup(goneModel)], { learningRate: 1e-3 });
      expect(step).toBe(1);
      await goneModel.close();
      await keptModel.close();
      await Promise.all(backends.splice(0).map((backend) => backend.close()));
      // The data directory of `gone` is removed: its server weights are orphans of `kept`'s.
      await rm(path.join(root, 'gone'), { recursive: true, force: true });

      const cli = (...args: string[]) =>
        runCli(['tinker', 'checkpoints', ...args, '--server', server.baseURL, '--data-dir', path.join(root, 'kept')]);
      const listed = await cli('list', '--json');
      expect(listed.code).toBe(0);
      const rows = listed.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { tinkerPath: string; checkpointType: string; orphaned: boolean });
      // Each step saved sampler weights and resumable state: two of `kept`'s, two orphans of `gone`'s.
      expect(rows.filter((row) => !row.orphaned)).toHaveLength(2);
      const orphans = rows.filter((row) => row.orphaned);
      expect(orphans.map((row) => row.checkpointType).sort()).toEqual(['sampler', 'training']);

      const deleted = await cli('delete', '--orphaned');
      expect(deleted.code).toBe(0);
      for (const orphan of orphans) expect(deleted.stdout).toContain(`deleted ${orphan.tinkerPath}`);
      const after = await cli('list', '--orphaned');
      expect(after.stdout.trim()).toBe('no orphaned checkpoints');
      // `kept`'s weights are still there.
      const tinker = new TinkerClient({ baseURL: server.baseURL, apiKey: 'tml-test' });
      const left = (
        await Promise.all((await tinker.listTrainingRuns()).map((run) => tinker.listCheckpoints(run.trainingRunId)))
      ).flat();
      expect(left.map((checkpoint) => checkpoint.tinkerPath).sort()).toEqual(
        rows
          .filter((row) => !row.orphaned)
          .map((row) => row.tinkerPath)
          .sort(),
      );
    });
  },
);
